//! The configuration loader: TOML text to a validated `Config`.
//!
//! Properties:
//! - arbitrary text never panics the loader;
//! - what loads, validates (the loader and `validate`, which `check-config`
//!   and reload use, agree), and has at least one upstream, each with a name,
//!   a path starting with '/' and exactly one transport;
//! - what is refused names at least one issue, each with a message.
#![no_main]

use eragate::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml(text) {
        Ok(config) => {
            if let Err(e) = config.validate() {
                panic!("loaded, yet validation refuses it: {e}");
            }
            assert!(!config.upstreams.is_empty());
            for upstream in &config.upstreams {
                assert!(!upstream.name.is_empty());
                assert!(upstream.path.starts_with('/'));
                let transports = [
                    upstream.stdio.is_some(),
                    upstream.http.is_some(),
                    upstream.sse.is_some(),
                ];
                assert_eq!(transports.iter().filter(|t| **t).count(), 1);
            }
        }
        Err(error) => {
            assert!(!error.issues.is_empty());
            for issue in &error.issues {
                assert!(!issue.message.is_empty(), "{issue:?}");
            }
            let _ = error.to_string();
        }
    }
});
