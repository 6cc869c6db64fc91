//! `rampart datasets list|fetch|import`.

use anyhow::{Result, bail};
use clap::Subcommand;

/// `rampart datasets …`
#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// List the catalogued datasets.
    List,
}

pub fn run(cmd: &DatasetsCommand) -> Result<u8> {
    match cmd {
        DatasetsCommand::List => bail!("not implemented yet"),
    }
}
