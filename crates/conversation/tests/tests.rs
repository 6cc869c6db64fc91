//! The integration tests of rampart-conversation: one test binary, one module per area
//! (`cargo test -p rampart-conversation --test tests AREA::`).

mod agreement;
mod common;
mod ledger;
mod persist;
#[path = "../../state/tests/redis_server.rs"]
mod redis_server;
mod scan;
mod shared;
mod state;
