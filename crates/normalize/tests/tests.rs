//! The integration tests of rampart-normalize: one test binary, one module per area
//! (`cargo test -p rampart-normalize --test tests AREA::`).

mod attacks;
mod perf;
mod props;
