//! The integration tests of rampart-eval: one test binary, one module per area
//! (`cargo test -p rampart-eval --test tests AREA::`).

mod conversations;
mod harness;
mod judge;
mod props;
