//! Where Rampart keeps what it downloads and builds (datasets, models, runtimes).

use std::path::PathBuf;

/// The data directory when none is given: `$RAMPART_DATA_DIR`, else `./data`.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("RAMPART_DATA_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("data"), PathBuf::from)
}
