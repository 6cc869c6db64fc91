//! The integration tests of rampart-transformer: one test binary, one module per area
//! (`cargo test -p rampart-transformer --test tests AREA::`).

mod detector;
mod onnx;
mod reference;
mod support;
