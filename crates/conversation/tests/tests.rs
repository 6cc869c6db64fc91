//! The integration tests of rampart-conversation: one test binary, one module per area
//! (`cargo test -p rampart-conversation --test tests AREA::`).

mod agreement;
mod ledger;
mod persist;
mod scan;
mod state;
