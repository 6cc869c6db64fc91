//! The integration tests of rampart-relational: one test binary, one module per area
//! (`cargo test -p rampart-relational --test tests AREA::`).

mod circle;
mod llm;
mod local;
mod model_props;
mod real_model;
