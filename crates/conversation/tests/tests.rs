//! The integration tests of rampart-conversation: one test binary, one module per area
//! (`cargo test -p rampart-conversation --test tests AREA::`).

mod agreement;
mod common;
mod ledger;
mod persist;
mod scan;
mod shared;
mod state;
