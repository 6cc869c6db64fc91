//! The integration tests of rampart-discover: one test binary, one module per area
//! (`cargo test -p rampart-discover --test tests AREA::`).

mod common;
mod mine;
mod to_rule;
mod validate;
