//! `rampart serve`: the HTTP service (check API, OpenAI-compatible proxy, operations), and
//! `rampart serve hash-key`. The server configuration is documented in
//! `rampart_server::config`; `rampart config check FILE` validates one.

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use rampart_server::config::{ServerConfig, hash_api_key};
use rampart_server::{Server, ServerOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `rampart serve [--config FILE] [--listen ADDR]`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    command: Option<ServeCommand>,
    /// Server configuration file (TOML). Default: $RAMPART_CONFIG, else the built-in
    /// defaults (127.0.0.1:8080, the embedded pipeline, no keys, no audit log).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on (overrides server.listen and RAMPART_LISTEN).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Log format on stderr. Level: RUST_LOG (default info).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
}

/// `serve --log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One JSON object per event.
    Json,
    /// Human-readable lines.
    Text,
}

#[derive(Debug, Subcommand)]
enum ServeCommand {
    /// Read an API key from stdin and print its SHA-256, the form `[[auth.keys]] sha256`
    /// takes (the key itself is never stored).
    HashKey,
}

/// Loads the server configuration the way `serve` does (file, environment, `--listen`).
pub fn load_config(path: Option<&Path>, listen: Option<&str>) -> Result<ServerConfig> {
    let mut cfg = ServerConfig::load(path)?;
    if let Some(l) = listen {
        cfg.server.listen = l.to_string();
        cfg.validate("--listen")?;
    }
    Ok(cfg)
}

/// Validates a server configuration file, builds the pipeline it names and runs its rule
/// packs' own examples, as `serve` does at start-up and reload.
pub fn check(path: &Path) -> Result<String> {
    let cfg = ServerConfig::from_path(path)?;
    let pc = cfg.pipeline_config(&crate::default_config()?)?;
    let layers: Vec<String> = pc.layers.iter().map(|l| l.kind.clone()).collect();
    let pipeline = rampart_core::Pipeline::from_config_with(pc, &rampart::registry())?;
    rampart_server::check_rule_examples(&pipeline)?;
    rampart_server::check_tool_policy(&cfg)?;
    Ok(format!(
        "ok: server config; listen {}; {} API key(s); audit {}; tls {}; proxy upstream {}; conversation state {}; layers {}",
        cfg.server.listen,
        cfg.auth.keys.len(),
        if cfg.audit.is_some() { "on" } else { "off" },
        if cfg.tls.is_some() { "on" } else { "off" },
        if cfg.proxy.upstream_url.is_some() {
            "set"
        } else {
            "unset"
        },
        if cfg.conversation.as_ref().is_some_and(|c| c.enabled) {
            "on"
        } else {
            "off"
        },
        layers.join(" -> ")
    ))
}

/// What a configuration file given to `rampart config check` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// A server configuration: no `[[layers]]`, and one of the server sections.
    Server,
    /// Nothing but `version` (or nothing at all): a valid server configuration on defaults.
    Bare,
    /// A pipeline configuration, or a file only the pipeline parser can explain (syntax
    /// errors, unknown keys).
    Pipeline,
}

/// Classifies a TOML configuration file by its top-level keys.
pub fn config_kind(src: &str) -> ConfigKind {
    const SERVER_KEYS: [&str; 9] = [
        "server",
        "pipeline",
        "auth",
        "audit",
        "tls",
        "proxy",
        "canary",
        "output",
        "conversation",
    ];
    match toml::from_str::<toml::Table>(src) {
        Ok(t) if t.contains_key("layers") => ConfigKind::Pipeline,
        Ok(t) if t.keys().any(|k| SERVER_KEYS.contains(&k.as_str())) => ConfigKind::Server,
        Ok(t) if t.keys().all(|k| k == "version") => ConfigKind::Bare,
        _ => ConfigKind::Pipeline,
    }
}

fn init_logging(format: LogFormat) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    }
    .map_err(|e| anyhow::anyhow!("cannot initialize logging: {e}"))
}

/// Runs `rampart serve`.
pub fn run(args: &ServeArgs) -> Result<u8> {
    if let Some(ServeCommand::HashKey) = &args.command {
        let mut key = String::new();
        std::io::stdin()
            .take(64 * 1024)
            .read_to_string(&mut key)
            .context("reading the key from stdin")?;
        let key = key.trim_end_matches(['\n', '\r']);
        anyhow::ensure!(!key.is_empty(), "no key on stdin");
        outln!("{}", hash_api_key(key))?;
        return Ok(0);
    }
    init_logging(args.log_format)?;
    let cfg = load_config(args.config.as_deref(), args.listen.as_deref())?;
    let options = ServerOptions {
        registry: Arc::new(rampart::registry()),
        default_pipeline: crate::default_config()?,
        reload_on_sighup: true,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let server = Server::bind(cfg, options).await?;
        tracing::info!(
            addr = %server.local_addr(),
            tls = server.is_tls(),
            "rampart serving"
        );
        // For scripts that pass port 0: the bound address on stdout, one line. A reader that
        // has gone already is no reason to stop serving.
        if let Err(e) = outln!("listening on {}", server.local_addr()) {
            tracing::warn!(error = %e, "cannot print the bound address");
        }
        server.run(shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    Ok(0)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown signal received");
}
