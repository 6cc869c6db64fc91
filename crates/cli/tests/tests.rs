//! The integration tests of rampart-cli: one test binary, one module per area
//! (`cargo test -p rampart-cli --test tests AREA::`).

mod cli;
mod common;
mod datasets;
mod dilution;
mod discover;
mod eval;
mod governance;
mod judge;
mod lint;
mod models;
#[path = "../../audit/tests/pg_cluster.rs"]
mod pg_cluster;
#[path = "../../state/tests/redis_server.rs"]
mod redis_server;
mod redteam;
mod redteam_report;
mod relate;
mod replicas;
mod replicas_conversation;
mod serve_errors;
mod serve_kill9;
mod tools;
mod train;
mod usability;
