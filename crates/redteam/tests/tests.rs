//! The integration tests of rampart-redteam: one test binary, one module per area
//! (`cargo test -p rampart-redteam --test tests AREA::`).

mod generate;
mod transforms;
