//! The integration tests of rampart-eval: one test binary, one module per area
//! (`cargo test -p rampart-eval --test tests AREA::`).

mod conversations;
mod harness;
mod judge;
mod props;

use rampart_datasets::{LoadedDataset, read_jsonl_str};

/// A dataset named `name` read from the JSONL text `src` (rows that fail to read are in
/// `errors`).
fn dataset(name: &str, src: &str) -> LoadedDataset {
    let (records, errors) = read_jsonl_str(src);
    LoadedDataset {
        name: name.into(),
        origin: "test".into(),
        records,
        errors,
    }
}
