//! OpenTelemetry's standard environment variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`, …) read as other instrumented services
//! read them, and merged with `[telemetry]`: a key the file sets wins over its variable.
//! Pure: the variables come from a lookup function, so the rules are tested as tables.

use crate::config::TelemetryConfig;

/// The traces pipeline the file and the environment ask for together.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TraceSettings {
    /// Where spans are posted (OTLP/HTTP protobuf); `None`: no traces.
    pub(crate) endpoint: Option<String>,
    /// Headers every export carries (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub(crate) headers: Vec<(String, String)>,
    /// `service.name` of the resource.
    pub(crate) service_name: String,
    /// The other resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub(crate) resource: Vec<(String, String)>,
    /// The share of new traces sampled, 0.0–1.0.
    pub(crate) ratio: f64,
    /// A request under a client's trace is sampled as its parent was.
    pub(crate) follow_parent: bool,
    /// What was ignored, and why, to be logged once.
    pub(crate) warnings: Vec<String>,
}

impl TraceSettings {
    /// The settings of `config` with the variables `env` gives.
    pub(crate) fn resolve(config: &TelemetryConfig, env: impl Fn(&str) -> Option<String>) -> TraceSettings {
        let env = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut warnings = Vec::new();
        let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let endpoint = match (&config.otlp_endpoint, disabled) {
            (_, true) => None,
            (Some(endpoint), false) => Some(endpoint.clone()),
            (None, false) => env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| traces_path(&base))),
        };
        if let Some(protocol) = env("OTEL_EXPORTER_OTLP_PROTOCOL")
            && protocol != "http/protobuf"
        {
            warnings.push(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: spans are sent as http/protobuf"
            ));
        }
        let headers = env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| env("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|list| pairs(&list, "OTEL_EXPORTER_OTLP_HEADERS", &mut warnings))
            .unwrap_or_default();
        let mut resource = env("OTEL_RESOURCE_ATTRIBUTES")
            .map(|list| pairs(&list, "OTEL_RESOURCE_ATTRIBUTES", &mut warnings))
            .unwrap_or_default();
        let attribute_name = resource
            .iter()
            .position(|(key, _)| key == "service.name")
            .map(|at| resource.remove(at).1);
        let service_name = config
            .service_name
            .clone()
            .or_else(|| env("OTEL_SERVICE_NAME"))
            .or(attribute_name)
            .unwrap_or_else(|| "eragate".into());
        let (ratio, follow_parent) = match config.sample_ratio {
            Some(ratio) => (ratio, true),
            None => sampler(
                env("OTEL_TRACES_SAMPLER"),
                env("OTEL_TRACES_SAMPLER_ARG"),
                &mut warnings,
            ),
        };
        TraceSettings {
            endpoint,
            headers,
            service_name,
            resource,
            ratio: ratio.clamp(0.0, 1.0),
            follow_parent,
            warnings,
        }
    }
}

/// The traces endpoint under a base `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn traces_path(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage form the
/// specification uses); an entry without `=` is skipped with a warning.
fn pairs(list: &str, variable: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy();
                out.push((key.trim().to_owned(), value.into_owned()));
            }
            _ => warnings.push(format!("{variable}: {entry:?} is not key=value; skipped")),
        }
    }
    out
}

/// The ratio and parent rule of `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`).
fn sampler(name: Option<String>, argument: Option<String>, warnings: &mut Vec<String>) -> (f64, bool) {
    let mut ratio = || match argument.as_deref().map(str::parse::<f64>) {
        None => 1.0,
        Some(Ok(ratio)) if (0.0..=1.0).contains(&ratio) => ratio,
        Some(_) => {
            warnings.push(format!(
                "OTEL_TRACES_SAMPLER_ARG={:?} is not a ratio from 0 to 1; 1.0 is used",
                argument.as_deref().unwrap_or_default()
            ));
            1.0
        }
    };
    match name.as_deref() {
        None | Some("parentbased_always_on") => (1.0, true),
        Some("parentbased_always_off") => (0.0, true),
        Some("parentbased_traceidratio") => (ratio(), true),
        Some("always_on") => (1.0, false),
        Some("always_off") => (0.0, false),
        Some("traceidratio") => (ratio(), false),
        Some(other) => {
            warnings.push(format!(
                "OTEL_TRACES_SAMPLER={other} is not supported; parentbased_always_on is used"
            ));
            (1.0, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Environment variables, by name.
    type Vars<'a> = &'a [(&'a str, &'a str)];

    fn resolve(file: &str, vars: &[(&str, &str)]) -> TraceSettings {
        let config: TelemetryConfig = toml::from_str(file).expect("telemetry");
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        TraceSettings::resolve(&config, |name| vars.get(name).cloned())
    }

    #[test]
    fn the_endpoint_comes_from_the_file_then_the_traces_variable_then_the_base() {
        let cases: &[(&str, Vars, Option<&str>)] = &[
            ("", &[], None),
            (
                "",
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
                Some("http://c:4318/v1/traces"),
            ),
            (
                "",
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")],
                Some("http://c:4318/v1/traces"),
            ),
            (
                "",
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/custom"),
                ],
                Some("http://t:9/custom"),
            ),
            (
                r#"otlp_endpoint = "http://file:4318/v1/traces""#,
                &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/custom")],
                Some("http://file:4318/v1/traces"),
            ),
            (
                r#"otlp_endpoint = "http://file:4318/v1/traces""#,
                &[("OTEL_SDK_DISABLED", "true")],
                None,
            ),
            (
                "",
                &[
                    ("OTEL_SDK_DISABLED", "TRUE"),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ],
                None,
            ),
            (
                "",
                &[
                    ("OTEL_SDK_DISABLED", "false"),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                ],
                Some("http://c/v1/traces"),
            ),
        ];
        for (file, vars, expected) in cases {
            assert_eq!(resolve(file, vars).endpoint.as_deref(), *expected, "{file} {vars:?}");
        }
    }

    #[test]
    fn the_service_name_comes_from_the_file_then_its_variable_then_the_resource() {
        let resource = (
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=from-resource,deployment.environment=prod",
        );
        let cases: &[(&str, Vars, &str)] = &[
            ("", &[], "eragate"),
            ("", &[resource], "from-resource"),
            ("", &[resource, ("OTEL_SERVICE_NAME", "from-variable")], "from-variable"),
            (
                r#"service_name = "from-file""#,
                &[resource, ("OTEL_SERVICE_NAME", "v")],
                "from-file",
            ),
        ];
        for (file, vars, expected) in cases {
            let settings = resolve(file, vars);
            assert_eq!(settings.service_name, *expected, "{file} {vars:?}");
        }
        let settings = resolve("", &[resource]);
        assert_eq!(
            settings.resource,
            [("deployment.environment".to_owned(), "prod".to_owned())]
        );
    }

    #[test]
    fn headers_and_attributes_are_decoded_and_the_traces_headers_win() {
        let settings = resolve(
            "",
            &[
                ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x-tenant = t1 ,broken"),
                ("OTEL_RESOURCE_ATTRIBUTES", "team=core%2Cinfra"),
            ],
        );
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(settings.headers, pairs(&[("api-key", "a b"), ("x-tenant", "t1")]));
        assert_eq!(settings.resource, pairs(&[("team", "core,infra")]));
        assert_eq!(settings.warnings.len(), 1, "{:?}", settings.warnings);
        let traces = resolve(
            "",
            &[
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=1"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=2"),
            ],
        );
        assert_eq!(traces.headers, pairs(&[("b", "2")]));
    }

    #[test]
    fn samplers_as_the_specification_names_them() {
        let cases: &[(&str, Vars, (f64, bool), usize)] = &[
            ("", &[], (1.0, true), 0),
            ("", &[("OTEL_TRACES_SAMPLER", "always_off")], (0.0, false), 0),
            ("", &[("OTEL_TRACES_SAMPLER", "always_on")], (1.0, false), 0),
            ("", &[("OTEL_TRACES_SAMPLER", "parentbased_always_off")], (0.0, true), 0),
            (
                "",
                &[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
                ],
                (0.25, false),
                0,
            ),
            (
                "",
                &[
                    ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
                ],
                (0.5, true),
                0,
            ),
            (
                "",
                &[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "2"),
                ],
                (1.0, false),
                1,
            ),
            ("", &[("OTEL_TRACES_SAMPLER", "jaeger_remote")], (1.0, true), 1),
            (
                "sample_ratio = 0.1",
                &[("OTEL_TRACES_SAMPLER", "always_on")],
                (0.1, true),
                0,
            ),
        ];
        for (file, vars, expected, warnings) in cases {
            let settings = resolve(file, vars);
            assert_eq!((settings.ratio, settings.follow_parent), *expected, "{file} {vars:?}");
            assert_eq!(
                settings.warnings.len(),
                *warnings,
                "{file} {vars:?}: {:?}",
                settings.warnings
            );
        }
    }

    #[test]
    fn only_http_protobuf_is_spoken() {
        let grpc = resolve("", &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(grpc.warnings.len(), 1);
        assert!(
            resolve("", &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")])
                .warnings
                .is_empty()
        );
    }
}
