//! The integration tests of rampart-judge: one test binary, one module per area
//! (`cargo test -p rampart-judge --test tests AREA::`).

mod conversation;
mod pipeline;
mod real_model;
#[path = "../../state/tests/redis_server.rs"]
mod redis_server;
mod score;
mod shared_cache;
mod shipped_config;
