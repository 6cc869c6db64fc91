//! The integration tests of rampart-tools: one test binary, one module per area
//! (`cargo test -p rampart-tools --test tests AREA::`).

mod context;
mod differential;
mod escapes;
mod examples;
mod lint;
mod policy;
mod provenance;
