//! The client edge: transports, TLS, bounds, and what eragate answers to bad input.

mod faults;
mod hardening;
mod limits_edge;
mod modern_http;
mod param_headers;
mod smoke;
mod tls;
