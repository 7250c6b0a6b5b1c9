//! Durations in configuration files, written as text (`"250ms"`, `"30s"`).

use std::time::Duration;

use serde::Deserialize;

/// A duration written as text: `"250ms"`, `"30s"`, `"10m"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Humantime(pub(crate) Duration);

impl<'de> Deserialize<'de> for Humantime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text).map(Humantime).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); write e.g. \"30s\" or \"500ms\""
            ))
        })
    }
}
