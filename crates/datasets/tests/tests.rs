//! The integration tests of rampart-datasets: one test binary, one module per area
//! (`cargo test -p rampart-datasets --test tests AREA::`).

mod fetch;
mod importers;
mod multilingual_attacks;
mod promptguard;
