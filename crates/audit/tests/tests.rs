//! The integration tests of rampart-audit: one test binary, one module per area
//! (`cargo test -p rampart-audit --test tests AREA::`).

mod crash;
mod governance;
mod log;
mod pg_cluster;
mod postgres;
mod stored_names;
