//! `rampart discover`.

use anyhow::{Result, bail};
use clap::Args;

/// `rampart discover …`
#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Eval log files to mine.
    #[arg(long = "log", value_name = "FILE")]
    pub logs: Vec<std::path::PathBuf>,
}

pub fn run(_args: &DiscoverArgs) -> Result<u8> {
    bail!("not implemented yet")
}
