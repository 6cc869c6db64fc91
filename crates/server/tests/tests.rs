//! The integration tests of rampart-server: one test binary, one module per area
//! (`cargo test -p rampart-server --test tests AREA::`).

mod api;
mod conversation;
mod explain;
mod hardening;
#[path = "support/openapi.rs"]
mod openapi;
mod output_scanner;
mod proxy;
mod relate;
#[path = "support/server.rs"]
mod server;
mod spotlight;
mod tools;
#[path = "support/upstream.rs"]
mod upstream;
