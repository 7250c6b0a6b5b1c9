//! Every integration test, in one binary: the real `eragate` binary run as a process against
//! the real peers of `tests/peers/install.sh`. One binary compiles `common` and links the
//! crate once; run one area with `cargo test --test it -- edge::` or one file with
//! `-- edge::faults::`.

mod auth;
mod common;
mod conformance;
mod edge;
mod eras;
mod federation;
mod ops;
mod policy;
mod upstreams;

/// A test file not declared as a module is silently not compiled, and a `.rs` file directly
/// in `tests/` would be a binary of its own: this holds every file to its place.
#[test]
fn every_integration_test_is_in_this_binary() {
    let it = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let stray: Vec<_> = std::fs::read_dir(it.parent().expect("tests/"))
        .expect("read tests/")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    assert!(stray.is_empty(), "move these into tests/it/: {stray:?}");
    let mut undeclared = Vec::new();
    let mut dirs = vec![it.clone()];
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir)
            .expect("read a test folder")
            .filter_map(Result::ok)
            .map(|e| e.path())
        {
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if path.extension().is_none_or(|ext| ext != "rs") || name == "main" || name == "mod" {
                continue;
            }
            // Declared by `mod NAME;` in the folder's mod.rs, in main.rs, or in the file
            // beside the folder (`ops/cli.rs` declares `ops/cli/config_keys.rs`).
            let parents = [dir.join("mod.rs"), dir.join("main.rs"), dir.with_extension("rs")];
            let declared = parents.iter().any(|parent| {
                std::fs::read_to_string(parent).is_ok_and(|text| {
                    text.lines().any(|line| {
                        let line = line.trim_start_matches("pub ").trim();
                        line == format!("mod {name};")
                    })
                })
            });
            if !declared {
                undeclared.push(path);
            }
        }
    }
    assert!(undeclared.is_empty(), "declare these with `mod NAME;`: {undeclared:?}");
}
