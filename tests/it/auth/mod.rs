//! Who gets in: bearer tokens, eragate as an OAuth protected resource, its built-in
//! authorization server, and the credentials it holds toward upstreams.

mod auth_server;
mod auth_server_broker;
mod auth_server_cimd;
mod auth_server_hardening;
mod auth_server_pages;
mod auth_server_storage;
mod bearer;
mod oauth;
mod oauth_cli;
mod oauth_refusals;
mod upstream_credentials;
