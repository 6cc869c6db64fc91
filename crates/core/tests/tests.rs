//! The integration tests of rampart-core: one test binary, one module per area
//! (`cargo test -p rampart-core --test tests AREA::`).

mod cascade;
mod data_scope;
mod facts;
mod fuse;
mod judge_contract;
mod pipeline;
mod sanitize;
