//! `rampart`: the prompt firewall's command-line tool.

// Output goes through `out`, where a reader that has gone ends the program quietly;
// `println!` would panic on it.
#![warn(clippy::print_stdout)]

// First, so that its `outln!` / `out!` macros are visible in every module below.
#[macro_use]
mod out;

mod approvals_cmd;
mod audit_cmd;
mod breakglass_cmd;
#[cfg(test)]
mod cli_reference;
mod datasets_cmd;
mod discover_cmd;
mod eval_cmd;
mod human;
mod judge_cmd;
mod lint_cmd;
mod models_cmd;
mod owasp_cmd;
mod redteam_cmd;
mod relate_cmd;
mod rules_cmd;
mod scan;
mod serve_cmd;
mod service_client;
mod tools_cmd;
mod train_cmd;
mod train_combiner;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use rampart_core::{Pipeline, PipelineConfig};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status for "allowed".
pub const EXIT_ALLOW: u8 = 0;
/// Exit status for a fatal error (bad configuration, unreadable file, input over the limits).
pub const EXIT_ERROR: u8 = 1;
/// Exit status for "sanitized".
pub const EXIT_SANITIZE: u8 = 10;
/// Exit status for "blocked".
pub const EXIT_BLOCK: u8 = 20;
/// Exit status for a batch in which some lines could not be scanned (error records printed).
pub const EXIT_BATCH_ERRORS: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "rampart",
    version,
    about = "Rampart: a prompt firewall. Every prompt gets ALLOW, SANITIZE or BLOCK with the evidence.",
    after_help = "Exit status of `scan`: 0 ALLOW, 10 SANITIZE, 20 BLOCK (a batch: the strictest), \
                  1 error, 2 usage error, 3 batch with per-line errors."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Scan text (argument, stdin, file) or a JSONL batch and print the decision.
    Scan(scan::ScanArgs),
    /// Ask a configuration's intent layer (LLM judge) about a text directly: label,
    /// confidence, explanation, evidence, cost, latency.
    Judge(judge_cmd::JudgeArgs),
    /// Relate a layered prompt (system, application, user) or a JSONL batch with the
    /// relational evaluator: per-layer truth / indeterminacy / falsehood, trust violations,
    /// the ayni balance, the exchange type and the label (reciprocal, borderline,
    /// manipulative, extractive); a labelled batch gets the four-label accuracy.
    Relate(relate_cmd::RelateArgs),
    /// Validate, test, lint and list rule packs.
    Rules {
        #[command(subcommand)]
        command: rules_cmd::RulesCommand,
    },
    /// List, fetch and import evaluation datasets.
    Datasets {
        #[command(subcommand)]
        command: datasets_cmd::DatasetsCommand,
    },
    /// Evaluate pipeline configurations over labelled datasets (metrics, reports, gates).
    Eval(eval_cmd::EvalArgs),
    /// Mine candidate rule patterns from eval logs (pattern_candidates.v1).
    Discover(discover_cmd::DiscoverArgs),
    /// Set up the built-in models, list models, pull hub models.
    Models {
        #[command(subcommand)]
        command: models_cmd::ModelsCommand,
    },
    /// Train the built-in linear classifier, or fit the combine layer, from catalogued datasets.
    Train {
        #[command(subcommand)]
        command: train_cmd::TrainCommand,
    },
    /// Query, export and prune the service's decision audit log.
    Audit {
        #[command(subcommand)]
        command: audit_cmd::AuditCommand,
    },
    /// List, approve and deny the tool calls waiting for an approver on a running service.
    Approvals {
        #[command(subcommand)]
        command: approvals_cmd::ApprovalsCommand,
    },
    /// Grant, list and revoke break-glass overrides of the tool policy on a running service.
    Breakglass {
        #[command(subcommand)]
        command: breakglass_cmd::BreakglassCommand,
    },
    /// Red-team mutation suite: variants of attack and benign prompts by transform family.
    Redteam {
        #[command(subcommand)]
        command: redteam_cmd::RedteamCommand,
    },
    /// Generate the OWASP Top 10 for LLM Applications (2025) coverage report
    /// (docs/reports/OWASP_LLM_Top10.md) from the rule packs, the layers and the measurements.
    Owasp(owasp_cmd::OwaspArgs),
    /// Run the HTTP service: check API, OpenAI-compatible proxy, metrics, audit log.
    Serve(serve_cmd::ServeArgs),
    /// Lint Python LLM application code for guardrail bypasses: unguarded model input, guards
    /// after the fact, prompts in logs, model output to dangerous sinks, ungoverned tools,
    /// secrets in prompts (human, JSON or SARIF output).
    Lint(lint_cmd::LintArgs),
    /// Lint tool-call policies and decide tool calls under one (ALLOW, CONFIRM, BLOCK).
    Tools {
        #[command(subcommand)]
        command: tools_cmd::ToolsCommand,
    },
    /// Check or print pipeline configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a configuration file (a pipeline configuration, or a server configuration
    /// for `rampart serve`, told apart by content) and build the pipeline it describes.
    Check {
        /// The file (default: the embedded default configuration).
        path: Option<PathBuf>,
        /// Treat the file as a server configuration (`rampart serve --config`).
        #[arg(long)]
        server: bool,
    },
    /// Print the embedded default configuration.
    Show,
}

/// The product's default configuration (the embedded rules and linear classifier), parsed.
pub fn default_config() -> Result<PipelineConfig> {
    rampart::default_config().map_err(Into::into)
}

/// Loads the datasets of a command (`--dataset`, in order), warning on stderr about each
/// one's unreadable rows as it is read; `then` sees each dataset after its warning.
pub fn load_datasets(
    specs: &[String],
    data_dir: &std::path::Path,
    mut then: impl FnMut(&rampart_datasets::LoadedDataset),
) -> Result<Vec<rampart_datasets::LoadedDataset>> {
    Ok(rampart_datasets::load_all(specs, data_dir, |d| {
        if let Some(note) = d.unreadable_note() {
            eprintln!("rampart: {note}");
        }
        then(d);
    })?)
}

/// A progress bar on standard error with `template`, or a hidden one when the command was
/// given `--no-progress` or standard error is not a terminal (a log file, CI).
pub fn progress_bar(no_progress: bool, len: u64, template: &str) -> Result<indicatif::ProgressBar> {
    use anyhow::Context as _;
    use std::io::IsTerminal;
    if no_progress || !std::io::stderr().is_terminal() {
        return Ok(indicatif::ProgressBar::hidden());
    }
    let b = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr(),
    );
    b.set_style(
        indicatif::ProgressStyle::with_template(template).context("progress bar template")?,
    );
    Ok(b)
}

/// Options shared by commands that build a pipeline.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    /// Pipeline configuration file (TOML). Default: the embedded configuration.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Add a rule pack to every rules layer (repeatable).
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Do not load the embedded default rule pack.
    #[arg(long)]
    pub no_default_rules: bool,
    /// On layer error or timeout, ALLOW (marked degraded) instead of BLOCK.
    #[arg(long)]
    pub fail_open: bool,
}

impl PipelineArgs {
    /// The library's builder with the command-line overrides.
    fn builder(&self) -> rampart::Builder {
        let mut b = rampart::Builder::from_optional_file(self.config.as_deref())
            .rule_packs(self.rules.iter().cloned());
        if self.fail_open {
            b = b.fail_open();
        }
        if self.no_default_rules {
            b = b.no_default_rules();
        }
        b
    }

    /// Loads the configuration, applies the command-line overrides, builds the pipeline.
    pub fn build(&self) -> Result<Pipeline> {
        self.builder().build().map_err(Into::into)
    }

    /// As [`PipelineArgs::build`], for a command that scans and exits: the embedded packs'
    /// regexes compile when a scan first needs them, not all before the first scan.
    pub fn build_for_one_run(&self) -> Result<Pipeline> {
        self.builder()
            .compile_on_first_use()
            .build()
            .map_err(Into::into)
    }

    /// Loads the configuration and applies the command-line overrides.
    pub fn load(&self) -> Result<PipelineConfig> {
        self.builder().config().map_err(Into::into)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // ONNX models use the library `rampart models onnxruntime` installed, when there is one
    // (a layer's `onnxruntime` option and ORT_DYLIB_PATH come first): under the command's own
    // `--data-dir` when it runs pipelines and has one, else $RAMPART_DATA_DIR, else ./data.
    let data_dir = match &cli.command {
        Command::Eval(args) => args.data_dir(),
        _ => rampart_datasets::default_data_dir(),
    };
    let ort = models_cmd::onnxruntime_path(&data_dir);
    if ort.is_file() {
        rampart_transformer::onnx::set_default_library(ort);
    }
    let result = match cli.command {
        Command::Scan(args) => scan::run(&args),
        Command::Judge(args) => judge_cmd::run(&args),
        Command::Relate(args) => relate_cmd::run(&args),
        Command::Rules { command } => rules_cmd::run(&command),
        Command::Config { command } => config_cmd(&command),
        Command::Serve(args) => serve_cmd::run(&args),
        Command::Datasets { command } => datasets_cmd::run(&command),
        Command::Eval(args) => eval_cmd::run(&args),
        Command::Discover(args) => discover_cmd::run(&args),
        Command::Models { command } => models_cmd::run(&command),
        Command::Train { command } => train_cmd::run(&command),
        Command::Audit { command } => audit_cmd::run(&command),
        Command::Approvals { command } => approvals_cmd::run(&command),
        Command::Breakglass { command } => breakglass_cmd::run(&command),
        Command::Tools { command } => tools_cmd::run(&command),
        Command::Redteam { command } => redteam_cmd::run(&command),
        Command::Owasp(args) => owasp_cmd::run(&args),
        Command::Lint(args) => lint_cmd::run(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader of our output has gone (`| head`): stop quietly, as other CLIs do.
        Err(e) if out::stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rampart: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn config_cmd(cmd: &ConfigCommand) -> Result<u8> {
    match cmd {
        ConfigCommand::Show => {
            out!("{}", rampart::DEFAULT_CONFIG_SRC)?;
            Ok(0)
        }
        ConfigCommand::Check { path, server } => {
            if let Some(p) = path {
                let kind = if *server {
                    serve_cmd::ConfigKind::Server
                } else {
                    // Unreadable: the pipeline loader below reports the I/O error.
                    std::fs::read_to_string(p)
                        .map(|src| serve_cmd::config_kind(&src))
                        .unwrap_or(serve_cmd::ConfigKind::Pipeline)
                };
                match kind {
                    serve_cmd::ConfigKind::Server => {
                        outln!("{}", serve_cmd::check(p)?)?;
                        return Ok(0);
                    }
                    // Only `version = 1`: a server configuration on defaults, not a pipeline
                    // without layers.
                    serve_cmd::ConfigKind::Bare => {
                        let summary = serve_cmd::check(p)?;
                        outln!("{summary} (read as a server configuration: no [[layers]])")?;
                        return Ok(0);
                    }
                    serve_cmd::ConfigKind::Pipeline => {}
                }
            }
            let config = match path {
                Some(p) => rampart::load_config(p)?,
                None => default_config()?,
            };
            let layers: Vec<String> = config.layers.iter().map(|l| l.kind.clone()).collect();
            Pipeline::from_config_with(config, &rampart::registry())?;
            outln!("ok: layers {}", layers.join(" -> "))?;
            Ok(0)
        }
    }
}
