//! `rampart eval`.

use anyhow::{Result, bail};
use clap::Args;

/// `rampart eval …`
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Dataset file or catalog name (repeatable).
    #[arg(long = "dataset", value_name = "FILE_OR_NAME")]
    pub datasets: Vec<String>,
}

pub fn run(_args: &EvalArgs) -> Result<u8> {
    bail!("not implemented yet")
}
