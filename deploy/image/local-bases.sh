#!/usr/bin/env bash
# Makes the two base images the Dockerfile needs without a registry, from Debian's packages
# (debootstrap) and this machine's Rust toolchain, and tags them for `buildah bud`:
#
#   localhost/eragate-builder:bookworm   Debian bookworm minbase + gcc + the host's rustc/cargo
#   localhost/eragate-runtime:bookworm   distroless-like: glibc, libgcc_s, /etc/passwd, no shell
#
# Then build with:
#   buildah --storage-driver vfs bud --isolation chroot --layers --format docker \
#     --build-arg BUILDER=localhost/eragate-builder:bookworm \
#     --build-arg RUNTIME=localhost/eragate-runtime:bookworm -t eragate .
#
# Runs as root. Idempotent: an image that already exists is kept (--force remakes both).
# ERAGATE_BUILDAH_ROOT, if set, is buildah's storage root (tests keep theirs under .cache/).
# DEBIAN_MIRROR (default http://deb.debian.org/debian) is where debootstrap fetches from.
set -euo pipefail

builder_image=localhost/eragate-builder:bookworm
runtime_image=localhost/eragate-runtime:bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
force=0
[[ ${1:-} == --force ]] && force=1

buildah=(buildah --storage-driver vfs)
if [[ -n ${ERAGATE_BUILDAH_ROOT:-} ]]; then
  buildah+=(--root "$ERAGATE_BUILDAH_ROOT/root" --runroot "$ERAGATE_BUILDAH_ROOT/runroot")
fi

exists() { "${buildah[@]}" inspect --type image "$1" >/dev/null 2>&1; }

for tool in buildah debootstrap dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "local-bases.sh: needs $tool (apt-get install buildah debootstrap)" >&2; exit 1; }
done

work=$(mktemp -d)
cleanup() {
  if [[ -n ${ctr:-} ]]; then
    "${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The builder: Debian bookworm (minbase) with a C toolchain for the linker and ring's C code,
# and the host's Rust toolchain (rustup cannot be reached here) at /usr/local, where rustc
# finds its sysroot next to its binary.
if ((force)) || ! exists "$builder_image"; then
  sysroot=$(rustc --print sysroot)
  ctr=$("${buildah[@]}" from scratch)
  root=$("${buildah[@]}" mount "$ctr")
  debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  # Keep the .debs the runtime image is cut from, then drop the apt cache from the builder.
  mkdir -p "$work/debs"
  cp "$root"/var/cache/apt/archives/libc6_*.deb "$root"/var/cache/apt/archives/libgcc-s1_*.deb "$work/debs/"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  install -m 0755 "$sysroot/bin/rustc" "$sysroot/bin/cargo" "$root/usr/local/bin/"
  cp -a "$sysroot/lib/." "$root/usr/local/lib/"
  "${buildah[@]}" unmount "$ctr" >/dev/null
  "${buildah[@]}" config --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env CARGO_HOME=/usr/local/cargo --workingdir / "$ctr"
  "${buildah[@]}" commit --quiet --rm "$ctr" "$builder_image" >/dev/null
  ctr=
  echo "made $builder_image ($(rustc --version))"
else
  echo "kept $builder_image"
fi

# The builder trusts what this machine trusts: a network that reaches crates.io through a
# TLS-inspecting proxy has its CA in the host's bundle, not in Debian's. Refreshed when the
# host's bundle changes (its digest is a label of the image).
host_ca=/etc/ssl/certs/ca-certificates.crt
if [[ -f $host_ca ]]; then
  digest=$(sha256sum "$host_ca" | cut -d' ' -f1)
  if [[ $("${buildah[@]}" inspect --type image --format '{{index .OCIv1.Config.Labels "eragate.host-ca-sha256"}}' "$builder_image") != "$digest" ]]; then
    ctr=$("${buildah[@]}" from "$builder_image")
    "${buildah[@]}" copy --quiet "$ctr" "$host_ca" /etc/ssl/certs/ca-certificates.crt >/dev/null
    "${buildah[@]}" config --label "eragate.host-ca-sha256=$digest" "$ctr"
    "${buildah[@]}" commit --quiet --rm "$ctr" "$builder_image" >/dev/null
    ctr=
    echo "$builder_image: trusts this machine's CA bundle ($host_ca)"
  fi
fi

# The runtime: what gcr.io/distroless/cc-debian12 holds that eragate needs (glibc, libgcc_s;
# rustls brings its own roots, so no OpenSSL or CA bundle), a nonroot user 65532, and no shell.
if ((force)) || ! exists "$runtime_image"; then
  if [[ ! -d $work/debs ]]; then
    mkdir -p "$work/debs"
    ctr=$("${buildah[@]}" from "$builder_image")
    (cd "$work/debs" && "${buildah[@]}" run --isolation chroot "$ctr" -- sh -c \
      'apt-get update -qq >/dev/null && cd /tmp && apt-get download -qq libc6 libgcc-s1 && tar -c *.deb' | tar -x)
    "${buildah[@]}" rm "$ctr" >/dev/null
    ctr=
  fi
  rootfs=$work/rootfs
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$rootfs"; done
  rm -rf "${rootfs:?}"/usr/share "${rootfs:?}"/usr/lib/x86_64-linux-gnu/gconv "${rootfs:?}"/usr/bin "${rootfs:?}"/usr/sbin \
    "${rootfs:?}"/sbin "${rootfs:?}"/bin "${rootfs:?}"/usr/libexec "${rootfs:?}"/var
  mkdir -p "$rootfs"/etc "$rootfs"/tmp "$rootfs"/home/nonroot
  chmod 1777 "$rootfs"/tmp
  chown 65532:65532 "$rootfs"/home/nonroot
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$rootfs"/etc/passwd
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"$rootfs"/etc/group
  printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$rootfs"/etc/nsswitch.conf
  ctr=$("${buildah[@]}" from scratch)
  "${buildah[@]}" copy --quiet "$ctr" "$rootfs" / >/dev/null
  "${buildah[@]}" config --user 65532:65532 --workingdir /home/nonroot "$ctr"
  "${buildah[@]}" commit --quiet --rm "$ctr" "$runtime_image" >/dev/null
  ctr=
  echo "made $runtime_image"
else
  echo "kept $runtime_image"
fi
