# eragate container image: `docker build -t eragate .` (or `buildah bud`, `podman build`).
#
# Two stages: a Rust builder whose dependency layer is cached (it is rebuilt only when
# Cargo.toml or Cargo.lock change), and a runtime with nothing but glibc and the binary:
# a numeric non-root user, no shell, `eragate` as the entrypoint.
#
# The bases are build arguments, so the same file builds from a registry (the defaults) or
# offline from local bases made by deploy/image/local-bases.sh:
#   --build-arg BUILDER=localhost/eragate-builder:bookworm
#   --build-arg RUNTIME=localhost/eragate-runtime:bookworm
ARG BUILDER=docker.io/library/rust:1.95-bookworm
ARG RUNTIME=gcr.io/distroless/cc-debian12:nonroot

# Every instruction of this stage is a layer, and copying layers is slow on some storage
# drivers (vfs), so the stage has few of them: the build settings are on the RUN lines.
FROM ${BUILDER} AS build
# The Cargo profile: `dist` (fat LTO, one codegen unit) is what ships; `release` builds in a
# third of the time and runs a few per cent slower (CI's image test builds it).
ARG PROFILE=dist
WORKDIR /src
# The dependency layer: the manifests with stub sources, so every dependency is compiled once
# and kept while only eragate's own code changes.
COPY Cargo.toml Cargo.lock ./
COPY bench/Cargo.toml bench/Cargo.toml
# Every `[[bench]]` needs a file to exist: a stub per `name = "…"` of Cargo.toml (the package's
# own name gives one more, unused).
RUN mkdir -p src benches bench/src/bin/mcpload \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs \
 && sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml > /tmp/names \
 && while read -r name; do echo 'fn main() {}' > "benches/$name.rs"; done < /tmp/names \
 && cargo build --profile "$PROFILE" --locked -p eragate --bin eragate \
      --config "profile.$PROFILE.debug=false" --config "profile.$PROFILE.strip=\"symbols\"" \
 && rm -rf src benches bench/src
# eragate itself. Sources keep their own mtimes, so touch them past the stub build's.
COPY . .
# `cargo rustc` passes a linker option to the final link only (dependencies, build scripts
# and the stub layer above are compiled as before), and bench/run.sh builds eragate with the
# same command and option, so the bench measures this binary.
# `-z pack-relative-relocs` (DT_RELR): the relative relocations a position-independent
# executable applies at start, 343 KiB of `.rela.dyn` read whole, become 8 KiB (-320 to -540
# KiB of idle RSS; bench/NOTES.md "A linker option"). Needs glibc >= 2.36 where the binary
# runs (this builder and distroless/cc-debian12 have 2.36) and rust-lld (the default) or
# binutils >= 2.38 to link.
RUN find src -name '*.rs' -exec touch {} + \
 && cargo rustc --profile "$PROFILE" --locked -p eragate --bin eragate \
      --config "profile.$PROFILE.debug=false" --config "profile.$PROFILE.strip=\"symbols\"" -- \
      -C link-arg=-Wl,-z,pack-relative-relocs \
 && install -D -m 0755 "target/$PROFILE/eragate" /out/eragate

FROM ${RUNTIME}
COPY --from=build /out/eragate /usr/local/bin/eragate
# distroless's `nonroot`; numeric, so runAsNonRoot can check it without /etc/passwd.
USER 65532:65532
EXPOSE 8080
# Mount the configuration at /etc/eragate/eragate.toml with `[listen] address = "0.0.0.0:8080"`.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/eragate", "health", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/eragate"]
CMD ["run", "--config", "/etc/eragate/eragate.toml"]
