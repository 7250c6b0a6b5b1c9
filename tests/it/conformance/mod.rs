//! The official MCP conformance suites (stable and alpha) run against eragate.

mod conformance_auth;
mod conformance_eras;
mod conformance_fixture;
mod everything;
