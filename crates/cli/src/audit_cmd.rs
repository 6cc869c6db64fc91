//! `rampart audit query|export|prune|verify`: read the service's decision audit log, its
//! governance rows (tool decisions, approvals, break-glass: `query --tools`) and verify their
//! hash chain. Either backend: a SQLite file (`--db PATH`) or a PostgreSQL database
//! (`--postgres-url-env VAR`, the variable holding its URL).

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use rampart_audit::{
    AuditFilter, AuditJudge, AuditReader, AuditRelational, AuditSource, ChainKey, ExportFormat,
    GovernanceEvent, GovernanceFilter, GovernanceKind, PostgresConfig, StoredGovernance,
    StoredRecord, format_time_ms, now_ms, parse_duration_ms, parse_time,
};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Default `--limit` of `query`.
const DEFAULT_QUERY_LIMIT: usize = 100;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Print the records matching the filters, newest first (a table, or JSONL with --json).
    Query(QueryArgs),
    /// Write the records matching the filters as CSV or JSONL, oldest first.
    Export(ExportArgs),
    /// Delete records older than a duration (the service also applies `retention_days`).
    /// The governance rows (tool decisions, approvals, break-glass) are never deleted.
    Prune(PruneArgs),
    /// Verify the hash chain of the governance rows: exit 1 naming the first edited,
    /// deleted or moved row.
    Verify(VerifyArgs),
}

/// Which audit log: a SQLite file or a PostgreSQL database.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct StoreArgs {
    /// The audit log (SQLite database) written by `rampart serve`.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// The PostgreSQL audit log (`[audit] backend = "postgres"`): the environment variable
    /// holding its connection URL, as the service's `[audit.postgres] url_env` (e.g.
    /// RAMPART_AUDIT_POSTGRES_URL); the URL, which may hold a password, never goes on the
    /// command line.
    #[arg(long, value_name = "VAR")]
    pub postgres_url_env: Option<String>,
}

impl StoreArgs {
    fn source(&self) -> AuditSource {
        match (&self.db, &self.postgres_url_env) {
            (_, Some(var)) => AuditSource::Postgres(PostgresConfig::from_env_var(var.clone())),
            (Some(db), None) => AuditSource::Sqlite(db.clone()),
            // clap requires one of the two.
            (None, None) => AuditSource::Sqlite(PathBuf::new()),
        }
    }

    fn open(&self) -> Result<AuditReader> {
        Ok(AuditReader::open_source(&self.source())?)
    }
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The environment variable holding the chain's key material, as the service's
    /// `[audit] chain_key_env` (unset or empty: the public key).
    #[arg(long, value_name = "VAR", default_value = rampart_audit::DEFAULT_CHAIN_KEY_ENV)]
    pub key_env: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The governance-row filters of `query --tools`.
#[derive(Debug, Clone, Args)]
pub struct ToolFilterArgs {
    /// Query the governance rows (tool decisions, approvals, break-glass) instead of the
    /// scan decisions. --action then takes ALLOW, CONFIRM or BLOCK.
    #[arg(long)]
    pub tools: bool,
    /// Only rows of this tool (with --tools).
    #[arg(long, value_name = "NAME", requires = "tools")]
    pub tool: Option<String>,
    /// Only rows of this conversation: its keyed hash as logged (with --tools).
    #[arg(
        long,
        value_name = "HASH",
        requires = "tools",
        conflicts_with = "conversation_id"
    )]
    pub conversation: Option<String>,
    /// Only rows of this conversation id, hashed with the chain key from --key-env (with
    /// --tools).
    #[arg(long, value_name = "ID", requires = "tools")]
    pub conversation_id: Option<String>,
    /// The environment variable of the chain key, for --conversation-id (as the service's
    /// `[audit] chain_key_env`).
    #[arg(long, value_name = "VAR", default_value = rampart_audit::DEFAULT_CHAIN_KEY_ENV)]
    pub key_env: String,
    /// Only rows of these kinds (with --tools; repeatable).
    #[arg(long, value_enum, requires = "tools")]
    pub kind: Vec<KindArg>,
    /// Only rows naming this approval id (with --tools).
    #[arg(long, value_name = "ID", requires = "tools")]
    pub approval: Option<String>,
    /// Only rows naming this break-glass id (with --tools).
    #[arg(long, value_name = "ID", requires = "tools")]
    pub breakglass: Option<String>,
}

/// `--kind`: the governance row kinds.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    #[value(name = "tool_decision")]
    ToolDecision,
    #[value(name = "approval_issued")]
    ApprovalIssued,
    #[value(name = "approval_redeemed")]
    ApprovalRedeemed,
    #[value(name = "approval_refused")]
    ApprovalRefused,
    #[value(name = "approval_approved")]
    ApprovalApproved,
    #[value(name = "approval_denied")]
    ApprovalDenied,
    #[value(name = "breakglass_granted")]
    BreakglassGranted,
    #[value(name = "breakglass_used")]
    BreakglassUsed,
    #[value(name = "breakglass_revoked")]
    BreakglassRevoked,
    #[value(name = "breakglass_expired")]
    BreakglassExpired,
}

impl From<KindArg> for GovernanceKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::ToolDecision => GovernanceKind::ToolDecision,
            KindArg::ApprovalIssued => GovernanceKind::ApprovalIssued,
            KindArg::ApprovalRedeemed => GovernanceKind::ApprovalRedeemed,
            KindArg::ApprovalRefused => GovernanceKind::ApprovalRefused,
            KindArg::ApprovalApproved => GovernanceKind::ApprovalApproved,
            KindArg::ApprovalDenied => GovernanceKind::ApprovalDenied,
            KindArg::BreakglassGranted => GovernanceKind::BreakglassGranted,
            KindArg::BreakglassUsed => GovernanceKind::BreakglassUsed,
            KindArg::BreakglassRevoked => GovernanceKind::BreakglassRevoked,
            KindArg::BreakglassExpired => GovernanceKind::BreakglassExpired,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Records at or after this time: RFC 3339 (2026-11-24T05:00:00Z), a date (2026-11-24,
    /// UTC) or a duration ago (30m, 24h, 7d).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Records before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only this action (CONFIRM: with --tools only, SANITIZE: without).
    #[arg(long, value_enum, ignore_case = true)]
    pub action: Option<ActionArg>,
    /// Only records with a finding of this rule ID (e.g. CTRL_001).
    #[arg(long, value_name = "RULE_ID")]
    pub rule: Option<String>,
    /// Only records of this API key ID.
    #[arg(long, value_name = "KEY_ID")]
    pub key: Option<String>,
    /// Only the records of this request ID.
    #[arg(long, value_name = "REQUEST_ID")]
    pub request: Option<String>,
    /// Only records of this endpoint (scan, scan_batch, scan_output, chat_completions…).
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    /// Only records whose judge (intent layer) gave this label.
    #[arg(long, value_enum, ignore_case = true)]
    pub intent_label: Option<IntentLabelArg>,
    /// Only records whose judge call ended this way (ok, timeout, http_error…).
    #[arg(long, value_enum, ignore_case = true)]
    pub judge_outcome: Option<JudgeOutcomeArg>,
}

/// `--intent-label`: the judge's labels.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum IntentLabelArg {
    Benign,
    Suspicious,
    Malicious,
}

impl From<IntentLabelArg> for rampart_judge::IntentLabel {
    fn from(a: IntentLabelArg) -> Self {
        match a {
            IntentLabelArg::Benign => rampart_judge::IntentLabel::Benign,
            IntentLabelArg::Suspicious => rampart_judge::IntentLabel::Suspicious,
            IntentLabelArg::Malicious => rampart_judge::IntentLabel::Malicious,
        }
    }
}

/// `--judge-outcome`: how a judge call can end.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum JudgeOutcomeArg {
    Ok,
    Refused,
    Unparseable,
    Empty,
    Truncated,
    Timeout,
    #[value(name = "http_error")]
    HttpError,
    #[value(name = "budget_exhausted")]
    BudgetExhausted,
}

impl From<JudgeOutcomeArg> for rampart_llm::OutcomeKind {
    fn from(a: JudgeOutcomeArg) -> Self {
        use rampart_llm::OutcomeKind as O;
        match a {
            JudgeOutcomeArg::Ok => O::Ok,
            JudgeOutcomeArg::Refused => O::Refused,
            JudgeOutcomeArg::Unparseable => O::Unparseable,
            JudgeOutcomeArg::Empty => O::Empty,
            JudgeOutcomeArg::Truncated => O::Truncated,
            JudgeOutcomeArg::Timeout => O::Timeout,
            JudgeOutcomeArg::HttpError => O::HttpError,
            JudgeOutcomeArg::BudgetExhausted => O::BudgetExhausted,
        }
    }
}

/// `--action`: the decisions the audit log records (scan decisions: ALLOW, SANITIZE,
/// BLOCK; tool decisions: ALLOW, CONFIRM, BLOCK).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ActionArg {
    #[value(name = "ALLOW")]
    Allow,
    #[value(name = "SANITIZE")]
    Sanitize,
    #[value(name = "CONFIRM")]
    Confirm,
    #[value(name = "BLOCK")]
    Block,
}

impl ActionArg {
    fn scan_action(self) -> Result<rampart_core::Action> {
        Ok(match self {
            ActionArg::Allow => rampart_core::Action::Allow,
            ActionArg::Sanitize => rampart_core::Action::Sanitize,
            ActionArg::Block => rampart_core::Action::Block,
            ActionArg::Confirm => {
                anyhow::bail!("--action CONFIRM only applies to tool decisions (add --tools)")
            }
        })
    }

    fn tool_action(self) -> Result<rampart_tools::ToolAction> {
        Ok(match self {
            ActionArg::Allow => rampart_tools::ToolAction::Allow,
            ActionArg::Confirm => rampart_tools::ToolAction::Confirm,
            ActionArg::Block => rampart_tools::ToolAction::Block,
            ActionArg::Sanitize => {
                anyhow::bail!("--action SANITIZE does not apply to tool decisions")
            }
        })
    }
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub tool_filter: ToolFilterArgs,
    /// At most this many records (0: no limit).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_QUERY_LIMIT)]
    pub limit: usize,
    /// Oldest first instead of newest first.
    #[arg(long)]
    pub oldest_first: bool,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// RFC 4180 CSV with a header row.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Output file, or `-` for stdout.
    #[arg(long, value_name = "FILE", default_value = "-")]
    pub out: PathBuf,
    /// At most this many records (the oldest).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Delete records older than this duration (e.g. 30d, 12h, 2w).
    #[arg(long, value_name = "DURATION")]
    pub older_than: String,
    /// Only count what would be deleted.
    #[arg(long)]
    pub dry_run: bool,
}

impl FilterArgs {
    fn to_filter(&self, now: i64) -> Result<AuditFilter> {
        let time = |flag: &str, v: &Option<String>| -> Result<Option<i64>> {
            v.as_deref()
                .map(|s| parse_time(s, now).with_context(|| format!("--{flag}")))
                .transpose()
        };
        let f = AuditFilter {
            since_ms: time("since", &self.since)?,
            until_ms: time("until", &self.until)?,
            action: self.action.map(ActionArg::scan_action).transpose()?,
            rule_id: self.rule.clone(),
            key_id: self.key.clone(),
            request_id: self.request.clone(),
            endpoint: self.endpoint.clone(),
            intent_label: self.intent_label.map(rampart_judge::IntentLabel::from),
            judge_outcome: self.judge_outcome.map(rampart_llm::OutcomeKind::from),
            limit: None,
            newest_first: false,
        };
        f.validate()?;
        Ok(f)
    }
}

pub fn run(cmd: &AuditCommand) -> Result<u8> {
    run_to(cmd, &mut crate::out::stdout())
}

fn run_to(cmd: &AuditCommand, out: &mut dyn Write) -> Result<u8> {
    let now = now_ms();
    match cmd {
        AuditCommand::Query(a) if a.tool_filter.tools => query_tools(a, now, out),
        AuditCommand::Verify(a) => verify(a, out),
        AuditCommand::Query(a) => {
            let mut f = a.filter.to_filter(now)?;
            f.limit = (a.limit > 0).then_some(a.limit);
            f.newest_first = !a.oldest_first;
            let reader = a.filter.store.open()?;
            if a.json {
                reader.export(&f, ExportFormat::Jsonl, out)?;
            } else {
                let records = reader.query(&f)?;
                out.write_all(table(&records).as_bytes())?;
                let total = reader.count(&AuditFilter { limit: None, ..f })?;
                let shown = records.len() as u64;
                if shown < total {
                    writeln!(out, "{shown} of {total} records (use --limit to see more)")?;
                } else {
                    writeln!(out, "{shown} record{}", if shown == 1 { "" } else { "s" })?;
                }
            }
            out.flush()?;
            Ok(0)
        }
        AuditCommand::Export(a) => {
            let mut f = a.filter.to_filter(now)?;
            f.limit = a.limit;
            let reader = a.filter.store.open()?;
            let format = match a.format {
                Format::Csv => ExportFormat::Csv,
                Format::Jsonl => ExportFormat::Jsonl,
            };
            if a.out == Path::new("-") {
                reader.export(&f, format, out)?;
            } else {
                let n = export_to_file(&reader, &f, format, &a.out)?;
                eprintln!("exported {n} records to {}", a.out.display());
            }
            Ok(0)
        }
        AuditCommand::Prune(a) => {
            let age = parse_duration_ms(&a.older_than).context("--older-than")?;
            let cutoff = now.saturating_sub(age);
            if a.dry_run {
                let reader = a.store.open()?;
                let n = reader.count(&AuditFilter {
                    until_ms: Some(cutoff),
                    ..AuditFilter::default()
                })?;
                writeln!(
                    out,
                    "would delete {n} records before {}",
                    format_time_ms(cutoff)
                )?;
            } else {
                let n = rampart_audit::prune_source(&a.store.source(), cutoff)?;
                writeln!(out, "deleted {n} records before {}", format_time_ms(cutoff))?;
            }
            Ok(0)
        }
    }
}

impl FilterArgs {
    fn to_governance_filter(&self, t: &ToolFilterArgs, now: i64) -> Result<GovernanceFilter> {
        for (flag, given) in [
            ("--rule", self.rule.is_some()),
            ("--endpoint", self.endpoint.is_some()),
            ("--intent-label", self.intent_label.is_some()),
            ("--judge-outcome", self.judge_outcome.is_some()),
        ] {
            if given {
                anyhow::bail!("{flag} does not apply to tool decisions (--tools)");
            }
        }
        let time = |flag: &str, v: &Option<String>| -> Result<Option<i64>> {
            v.as_deref()
                .map(|s| parse_time(s, now).with_context(|| format!("--{flag}")))
                .transpose()
        };
        Ok(GovernanceFilter {
            since_ms: time("since", &self.since)?,
            until_ms: time("until", &self.until)?,
            kinds: t.kind.iter().map(|k| GovernanceKind::from(*k)).collect(),
            tool: t.tool.clone(),
            action: self.action.map(ActionArg::tool_action).transpose()?,
            conversation: match &t.conversation_id {
                Some(id) => Some(ChainKey::from_env(&t.key_env).hasher().conversation(id)),
                None => t.conversation.clone(),
            },
            request_id: self.request.clone(),
            key_id: self.key.clone(),
            approval_id: t.approval.clone(),
            breakglass_id: t.breakglass.clone(),
            limit: None,
            newest_first: false,
        })
    }
}

/// `query --tools`: the governance rows, a table or JSONL.
fn query_tools(a: &QueryArgs, now: i64, out: &mut dyn Write) -> Result<u8> {
    let mut f = a.filter.to_governance_filter(&a.tool_filter, now)?;
    // One more than the limit tells whether there are more.
    f.limit = (a.limit > 0).then_some(a.limit.saturating_add(1));
    f.newest_first = !a.oldest_first;
    let reader = a.filter.store.open()?;
    let mut rows = reader.query_governance(&f)?;
    let more = a.limit > 0 && rows.len() > a.limit;
    rows.truncate(if a.limit > 0 { a.limit } else { rows.len() });
    if a.json {
        for r in &rows {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
    } else {
        out.write_all(governance_table(&rows).as_bytes())?;
        let n = rows.len();
        if more {
            writeln!(out, "{n} rows shown, more match (use --limit to see more)")?;
        } else {
            writeln!(out, "{n} row{}", if n == 1 { "" } else { "s" })?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// The cells of one governance row: kind, tool, action, risk, rules / detail, ids.
fn governance_cells(r: &StoredGovernance) -> Vec<String> {
    let short = |s: &Option<String>| -> String {
        s.as_deref()
            .map_or_else(|| "-".to_string(), |v| v.chars().take(12).collect())
    };
    let dash = || "-".to_string();
    let (tool, action, risk, detail, request, key, conv, ids) = match &r.event {
        GovernanceEvent::ToolDecision(d) => {
            let mut detail = d.rules.join(",");
            if let Some(a) = &d.failed_argument {
                let _ = write!(detail, " arg={a}");
            }
            let ids = match (&d.approval_id, &d.breakglass_id) {
                (Some(a), _) => format!("approval {a}"),
                (None, Some(b)) => format!("breakglass {b}"),
                (None, None) => dash(),
            };
            (
                d.tool.clone(),
                d.action.name().to_string(),
                d.risk.map_or_else(dash, |x| x.name().to_string()),
                format!("{} {detail}", d.endpoint.name()),
                d.request_id.clone(),
                d.key_id.clone(),
                d.conversation.clone(),
                ids,
            )
        }
        GovernanceEvent::ApprovalIssued(e) | GovernanceEvent::ApprovalRedeemed(e) => (
            e.tool.clone(),
            dash(),
            dash(),
            format!(
                "expires {}",
                format_time_ms(i64::try_from(e.expires_ms).unwrap_or(i64::MAX))
            ),
            e.request_id.clone(),
            e.key_id.clone(),
            e.conversation.clone(),
            format!("approval {}", e.approval_id),
        ),
        GovernanceEvent::ApprovalRefused(e) => (
            e.tool.clone(),
            dash(),
            dash(),
            e.reason.clone(),
            e.request_id.clone(),
            e.key_id.clone(),
            e.conversation.clone(),
            dash(),
        ),
        GovernanceEvent::BreakglassGranted(g) => {
            let mut scope = format!("tools={}", g.scope.tools.join(","));
            if let Some(c) = &g.scope.caller {
                let _ = write!(scope, " caller={c}");
            }
            if let Some(c) = &g.scope.conversation {
                let _ = write!(scope, " conversation={c}");
            }
            if g.scope.override_arguments {
                scope.push_str(" override_arguments");
            }
            (
                dash(),
                dash(),
                dash(),
                format!(
                    "{scope} until {} incident {}: {}",
                    format_time_ms(i64::try_from(g.expires_ms).unwrap_or(i64::MAX)),
                    g.incident,
                    g.reason
                ),
                dash(),
                Some(g.granted_by.clone()),
                None,
                format!("breakglass {}", g.id),
            )
        }
        GovernanceEvent::BreakglassUsed(e) => (
            e.tool.clone(),
            "ALLOW".to_string(),
            dash(),
            format!("overrides {}", e.overridden.name()),
            e.request_id.clone(),
            e.key_id.clone(),
            e.conversation.clone(),
            format!("breakglass {}", e.breakglass_id),
        ),
        GovernanceEvent::ApprovalApproved(e) | GovernanceEvent::ApprovalDenied(e) => (
            e.tool.clone(),
            dash(),
            dash(),
            format!("requested by {}", e.requested_by.as_deref().unwrap_or("-")),
            e.request_id.clone(),
            e.by.clone(),
            None,
            format!("approval {}", e.approval_id),
        ),
        GovernanceEvent::BreakglassRevoked(e) | GovernanceEvent::BreakglassExpired(e) => (
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
            e.by.clone(),
            None,
            format!("breakglass {}", e.breakglass_id),
        ),
    };
    vec![
        r.seq.to_string(),
        format_time_ms(r.time_ms),
        r.event.kind().name().to_string(),
        printable(&tool),
        action,
        risk,
        printable(&request),
        printable(key.as_deref().unwrap_or("-")),
        printable(&short(&conv)),
        printable(&ids),
        printable(&detail),
    ]
}

fn governance_table(rows: &[StoredGovernance]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let head: Vec<String> = [
        "SEQ", "TIME", "KIND", "TOOL", "ACTION", "RISK", "REQUEST", "KEY", "CONV", "IDS", "DETAIL",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let cells: Vec<Vec<String>> = rows.iter().map(governance_cells).collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(head).chain(cells) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `verify`: walks the chain; exit 1 naming the first bad row.
fn verify(a: &VerifyArgs, out: &mut dyn Write) -> Result<u8> {
    let key = ChainKey::from_env(&a.key_env);
    let report = rampart_audit::verify_source(&a.store.source(), &key)?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        if key.is_public() {
            writeln!(
                out,
                "note: ${} is not set: verifying with the public key (catches accidental \
                 edits, not someone who recomputes the chain)",
                a.key_env
            )?;
        }
        if !report.triggers_present {
            writeln!(
                out,
                "warning: the append-only triggers are missing (someone dropped them)"
            )?;
        }
        match &report.first_bad {
            None => {
                writeln!(
                    out,
                    "ok: {} governance rows verified (key id {})",
                    report.rows, report.key_id
                )?;
                if let Some((seq, hash)) = &report.head {
                    writeln!(
                        out,
                        "head: row {seq} {hash}\n(record the head elsewhere: a verify cannot \
                         tell a chain whose last rows were deleted from a shorter one)"
                    )?;
                }
            }
            Some((seq, why)) => {
                writeln!(
                    out,
                    "BROKEN: governance row {seq}: {why} ({} rows read, key id {})",
                    report.rows, report.key_id
                )?;
            }
        }
    }
    out.flush()?;
    Ok(if report.ok { 0 } else { 1 })
}

/// Writes the export to `path` through a temporary file renamed at the end, so a failed
/// export leaves no partial file.
fn export_to_file(
    reader: &AuditReader,
    f: &AuditFilter,
    format: ExportFormat,
    path: &Path,
) -> Result<u64> {
    let name = path
        .file_name()
        .with_context(|| format!("--out {}: not a file name", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".partial");
    let tmp = path.with_file_name(tmp_name);
    let result = (|| -> Result<u64> {
        let file =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = std::io::BufWriter::new(file);
        let n = reader.export(f, format, &mut w)?;
        w.into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        Ok(n)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Control characters (from client-supplied IDs) are escaped so they cannot drive the
/// terminal.
fn printable(s: &str) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect()
    } else {
        s.to_string()
    }
}

/// The JUDGE cell: the label and confidence, the failed outcome, or `-` when the judge was
/// not asked.
fn judge_cell(j: &AuditJudge) -> String {
    if !j.called {
        return "-".to_string();
    }
    match (j.intent_label, j.confidence) {
        (Some(l), Some(c)) => format!("{l} {c:.2}"),
        (Some(l), None) => l.to_string(),
        _ => j.outcome.map_or("?", |o| o.name()).to_string(),
    }
}

/// One line per record the judge was asked about: triggers, model, cost, and the
/// explanation (redacted by the judge layer before it was logged).
fn judge_lines(records: &[StoredRecord]) -> String {
    let mut out = String::new();
    for r in records {
        let Some(j) = r.record.judge.as_ref().filter(|j| j.called) else {
            continue;
        };
        let cost = j
            .cost_usd
            .map_or_else(|| "unpriced".to_string(), |c| format!("${c:.6}"));
        let _ = write!(
            out,
            "  {}: {} via {} · {} · {} · {}+{} tokens · {cost} · {} ms",
            printable(&r.record.request_id),
            j.outcome.map_or("?", |o| o.name()),
            j.triggers
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join("+"),
            printable(if j.model.is_empty() { "-" } else { &j.model }),
            j.cache.name(),
            j.input_tokens,
            j.output_tokens,
            j.latency_ms,
        );
        if let Some(o) = j.explain_outcome {
            let _ = write!(out, " · explanation {o}");
            if let Some(ms) = j.explain_latency_ms {
                let _ = write!(out, " ({ms} ms)");
            }
        }
        if let Some(e) = &j.explanation {
            let _ = write!(out, "\n    {}", printable(e));
        }
        out.push('\n');
    }
    if out.is_empty() {
        out
    } else {
        format!("judge:\n{out}")
    }
}

/// The RELATIONAL cell: the label and balance, or the status when there is no label.
fn relational_cell(r: &AuditRelational) -> String {
    match (r.label, r.balance) {
        (Some(l), Some(b)) => format!("{l} {b:+.2}"),
        (Some(l), None) => l.to_string(),
        (None, _) => r.status.to_string(),
    }
}

fn table(records: &[StoredRecord]) -> String {
    const BASE: [&str; 8] = [
        "TIME", "ACTION", "RISK", "ENDPOINT", "KEY", "REQUEST", "RULES", "ELAPSED",
    ];
    // The JUDGE and RELATIONAL columns only where some record has one: pipelines without
    // those layers print the table they always did.
    let judged = records.iter().any(|r| r.record.judge.is_some());
    let related = records.iter().any(|r| r.record.relational.is_some());
    let mut head: Vec<&str> = BASE.to_vec();
    if judged {
        head.push("JUDGE");
    }
    if related {
        head.push("RELATIONAL");
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let rec = &r.record;
            let mut action = rec.action.name().to_string();
            if rec.degraded {
                action.push('*');
            }
            let mut row = vec![
                format_time_ms(rec.time_ms),
                action,
                rec.risk.name().to_string(),
                printable(&rec.endpoint),
                printable(rec.key_id.as_deref().unwrap_or("-")),
                printable(&rec.request_id),
                printable(&rec.rule_ids().join(",")),
                format!("{}us", rec.elapsed_us),
            ];
            if judged {
                row.push(printable(
                    &rec.judge
                        .as_ref()
                        .map_or_else(|| "-".to_string(), judge_cell),
                ));
            }
            if related {
                row.push(printable(
                    &rec.relational
                        .as_ref()
                        .map_or_else(|| "-".to_string(), relational_cell),
                ));
            }
            row
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(head).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if records.iter().any(|r| r.record.degraded) {
        out.push_str("(* degraded: a layer failed or timed out and the fail mode decided)\n");
    }
    out.push_str(&judge_lines(records));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use rampart_audit::{AuditConfig, AuditFinding, AuditJudge, AuditLog, AuditRecord};
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context as TaskContext, Poll, Wake, Waker};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: AuditCommand,
    }

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    /// Enough of an executor for `append` (no timers needed with room in the queue).
    fn block_on<F: Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = TaskContext::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            std::thread::park();
        }
    }

    fn record(i: i64, age_ms: i64) -> AuditRecord {
        AuditRecord {
            time_ms: now_ms() - age_ms,
            request_id: format!("req-{i}"),
            key_id: (i % 2 == 0).then(|| "team-a".to_string()),
            endpoint: "scan".into(),
            input_hash: "ab".repeat(32),
            hash_key_id: "hk".into(),
            action: if i % 2 == 0 {
                rampart_core::Action::Block
            } else {
                rampart_core::Action::Allow
            },
            risk: rampart_core::RiskClass::LowRisk,
            policy_version: "1".into(),
            findings: if i % 2 == 0 {
                vec![AuditFinding {
                    rule_id: "CTRL_001".into(),
                    category: "control_phrase".into(),
                    strength: rampart_core::Strength::Strong,
                    layer: "rules".into(),
                }]
            } else {
                vec![]
            },
            layer_timings_us: [("rules".to_string(), 5)].into(),
            elapsed_us: 7,
            degraded: false,
            judge: None,
            relational: None,
        }
    }

    fn db() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let log = AuditLog::open(AuditConfig::at(&path)).unwrap();
        let w = log.writer();
        for (i, age_h) in [(0, 72), (1, 48), (2, 2), (3, 1)] {
            block_on(w.append(record(i, age_h * 3_600_000))).unwrap();
        }
        log.shutdown().unwrap();
        (dir, path)
    }

    fn run_args(args: &[&str]) -> Result<String> {
        let cli = Cli::try_parse_from(std::iter::once("audit").chain(args.iter().copied()))?;
        let mut out = Vec::new();
        run_to(&cli.cmd, &mut out)?;
        Ok(String::from_utf8(out)?)
    }

    #[test]
    fn query_table_and_filters() {
        let (_dir, path) = db();
        let db = path.to_str().unwrap();
        let out = run_args(&["query", "--db", db]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("TIME") && lines[0].contains("REQUEST"),
            "{out}"
        );
        // Newest first.
        assert!(
            lines[1].contains("req-3") && lines[4].contains("req-0"),
            "{out}"
        );
        assert_eq!(lines[5], "4 records");

        let out = run_args(&["query", "--db", db, "--since", "24h", "--action", "block"]).unwrap();
        assert!(
            out.contains("req-2") && !out.contains("req-0") && !out.contains("req-3"),
            "{out}"
        );
        assert!(out.ends_with("1 record\n"), "{out}");

        let out = run_args(&[
            "query", "--db", db, "--rule", "CTRL_001", "--key", "team-a", "--json",
        ])
        .unwrap();
        let ids: Vec<String> = out
            .lines()
            .map(|l| {
                serde_json::from_str::<StoredRecord>(l)
                    .unwrap()
                    .record
                    .request_id
            })
            .collect();
        assert_eq!(ids, ["req-2", "req-0"]);

        let out = run_args(&["query", "--db", db, "--limit", "1", "--oldest-first"]).unwrap();
        assert!(
            out.contains("req-0") && out.ends_with("1 of 4 records (use --limit to see more)\n"),
            "{out}"
        );
    }

    #[test]
    fn export_to_file_and_stdout() {
        let (dir, path) = db();
        let db = path.to_str().unwrap();
        let out = run_args(&["export", "--db", db, "--format", "csv", "--until", "24h"]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("id,time,time_ms,request_id"));
        assert_eq!(lines.len(), 3, "{out}");
        assert!(
            lines[1].contains(",req-0,") && lines[2].contains(",req-1,"),
            "{out}"
        );

        let file = dir.path().join("out.jsonl");
        run_args(&[
            "export",
            "--db",
            db,
            "--format",
            "jsonl",
            "--out",
            file.to_str().unwrap(),
        ])
        .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 4);
        assert!(!dir.path().join(".out.jsonl.partial").exists());
    }

    #[test]
    fn prune_older_than() {
        let (_dir, path) = db();
        let db = path.to_str().unwrap();
        let out = run_args(&["prune", "--db", db, "--older-than", "1d", "--dry-run"]).unwrap();
        assert!(out.starts_with("would delete 2 records before "), "{out}");
        let out = run_args(&["prune", "--db", db, "--older-than", "1d"]).unwrap();
        assert!(out.starts_with("deleted 2 records before "), "{out}");
        let out = run_args(&["query", "--db", db]).unwrap();
        assert!(out.ends_with("2 records\n"), "{out}");
    }

    #[test]
    fn postgres_is_named_by_an_environment_variable_and_errors_are_clear() {
        // One of --db and --postgres-url-env, not both.
        assert!(run_args(&["query"]).is_err());
        assert!(run_args(&["verify", "--db", "a.db", "--postgres-url-env", "X"]).is_err());
        for cmd in [
            vec![
                "query",
                "--postgres-url-env",
                "RAMPART_TEST_UNSET_AUDIT_PG_VAR",
            ],
            vec![
                "verify",
                "--postgres-url-env",
                "RAMPART_TEST_UNSET_AUDIT_PG_VAR",
            ],
            vec![
                "prune",
                "--postgres-url-env",
                "RAMPART_TEST_UNSET_AUDIT_PG_VAR",
                "--older-than",
                "1d",
            ],
        ] {
            let e = format!("{:#}", run_args(&cmd).unwrap_err());
            assert!(
                e.contains("RAMPART_TEST_UNSET_AUDIT_PG_VAR, which is not set"),
                "{cmd:?}: {e}"
            );
        }
    }

    #[test]
    fn clear_errors() {
        let (dir, path) = db();
        let db = path.to_str().unwrap();
        let missing = dir.path().join("nope.db");
        let e = run_args(&["query", "--db", missing.to_str().unwrap()]).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
        let e = run_args(&["query", "--db", db, "--since", "yesterday"]).unwrap_err();
        assert!(format!("{e:#}").contains("--since: invalid time"), "{e:#}");
        let e = run_args(&["query", "--db", db, "--since", "1h", "--until", "2h"]).unwrap_err();
        assert!(format!("{e:#}").contains("is after until"), "{e:#}");
        let e = run_args(&["prune", "--db", db, "--older-than", "30"]).unwrap_err();
        assert!(
            format!("{e:#}").contains("--older-than: invalid duration"),
            "{e:#}"
        );
        assert!(run_args(&["query", "--db", db, "--action", "DENY"]).is_err());
        assert!(run_args(&["export", "--db", db, "--format", "xml"]).is_err());
    }

    fn judged(
        label: Option<rampart_judge::IntentLabel>,
        outcome: rampart_llm::OutcomeKind,
    ) -> AuditJudge {
        AuditJudge {
            layer: "judge".into(),
            called: true,
            triggers: vec![rampart_judge::JudgeTriggerKind::Deferred],
            outcome: Some(outcome),
            intent_label: label,
            confidence: label.map(|_| 0.8),
            explanation: label.map(|_| "asks to reveal [input 0:4..40]".to_string()),
            cache: rampart_judge::CacheStatus::Miss,
            model: "smollm2".into(),
            prompt_id: "judge-v1".into(),
            prompt_hash: "abcd".into(),
            input_tokens: 300,
            output_tokens: 40,
            cost_usd: None,
            latency_ms: 950,
            explain_outcome: None,
            explain_latency_ms: None,
        }
    }

    #[test]
    fn query_shows_and_filters_the_judge() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let log = AuditLog::open(AuditConfig::at(&path)).unwrap();
        let w = log.writer();
        let mut recs: Vec<AuditRecord> = (0..3).map(|i| record(i, 1000 - i)).collect();
        recs[0].judge = Some(judged(
            Some(rampart_judge::IntentLabel::Malicious),
            rampart_llm::OutcomeKind::Ok,
        ));
        recs[1].judge = Some(judged(None, rampart_llm::OutcomeKind::HttpError));
        for r in recs {
            block_on(w.append(r)).unwrap();
        }
        log.shutdown().unwrap();
        let db = path.to_str().unwrap();

        let out = run_args(&["query", "--db", db]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].ends_with("JUDGE"), "{out}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("req-0") && l.ends_with("malicious 0.80")),
            "{out}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("req-1") && l.ends_with("http_error")),
            "{out}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("req-2") && l.ends_with('-')),
            "{out}"
        );
        assert!(out.contains("judge:\n"), "{out}");
        assert!(out.contains("    asks to reveal [input 0:4..40]"), "{out}");
        assert!(
            out.contains(
                "req-0: ok via deferred · smollm2 · miss · 300+40 tokens · unpriced · 950 ms"
            ),
            "{out}"
        );

        let out =
            run_args(&["query", "--db", db, "--intent-label", "MALICIOUS", "--json"]).unwrap();
        let got: Vec<StoredRecord> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), 1, "{out}");
        assert_eq!(got[0].record.request_id, "req-0");
        let j = got[0].record.judge.as_ref().unwrap();
        assert_eq!(
            j.explanation.as_deref(),
            Some("asks to reveal [input 0:4..40]")
        );

        let out = run_args(&["query", "--db", db, "--judge-outcome", "http_error"]).unwrap();
        assert!(out.contains("req-1") && !out.contains("req-0"), "{out}");
        assert!(out.ends_with("1 record\n"), "{out}");
        let e = run_args(&["query", "--db", db, "--judge-outcome", "error"]).unwrap_err();
        assert!(
            format!("{e:#}").contains("possible values: ok, refused"),
            "{e:#}"
        );
    }

    /// The flags' values are the library enums' names, every one of them.
    #[test]
    fn flag_values_are_the_enums_names() {
        fn names<A: ValueEnum>() -> Vec<String> {
            A::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value())
                .map(|p| p.get_name().to_string())
                .collect()
        }
        assert_eq!(
            names::<IntentLabelArg>(),
            rampart_judge::IntentLabel::ALL.map(|l| l.name())
        );
        for a in IntentLabelArg::value_variants() {
            let name = a.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(rampart_judge::IntentLabel::from(*a).name(), name);
        }
        assert_eq!(
            names::<JudgeOutcomeArg>(),
            rampart_llm::OutcomeKind::ALL.map(|o| o.name())
        );
        for a in JudgeOutcomeArg::value_variants() {
            let name = a.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(rampart_llm::OutcomeKind::from(*a).name(), name);
        }
        for a in ActionArg::value_variants() {
            let name = a.to_possible_value().unwrap().get_name().to_string();
            if let Ok(action) = a.scan_action() {
                assert_eq!(action.name(), name);
            }
        }
    }

    #[test]
    fn table_without_a_judge_has_no_judge_column() {
        let t = table(&[StoredRecord {
            id: 1,
            record: record(1, 0),
        }]);
        assert!(!t.contains("JUDGE") && !t.contains("judge:"), "{t}");
    }

    #[test]
    fn table_shows_the_relational_label_and_balance() {
        use rampart_relational::{RelationalLabel, RelationalStatusKind};
        let rel = |label: Option<RelationalLabel>, status| rampart_audit::AuditRelational {
            layer: "relational".into(),
            backend: rampart_relational::Backend::Local,
            status,
            reason: None,
            label,
            balance: label.map(|_| -0.5),
            exchange: None,
            violations: Vec::new(),
            calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            elapsed_us: 12,
        };
        let mut a = record(1, 0);
        a.relational = Some(rel(
            Some(RelationalLabel::Extractive),
            RelationalStatusKind::Ok,
        ));
        let mut b = record(2, 0);
        b.relational = Some(rel(None, RelationalStatusKind::Failed));
        let c = record(3, 0);
        let t = table(&[
            StoredRecord { id: 1, record: a },
            StoredRecord { id: 2, record: b },
            StoredRecord { id: 3, record: c },
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].ends_with("RELATIONAL"), "{t}");
        assert!(!lines[0].contains("JUDGE"), "{t}");
        assert!(lines[1].ends_with("extractive -0.50"), "{t}");
        assert!(lines[2].ends_with("failed"), "{t}");
        assert!(lines[3].ends_with('-'), "{t}");
    }

    fn run_code(args: &[&str]) -> Result<(u8, String)> {
        let cli = Cli::try_parse_from(std::iter::once("audit").chain(args.iter().copied()))?;
        let mut out = Vec::new();
        let code = run_to(&cli.cmd, &mut out)?;
        Ok((code, String::from_utf8(out)?))
    }

    /// A variable no test environment sets: the chain's public key.
    const NO_KEY: &str = "RAMPART_TEST_AUDIT_NO_SUCH_KEY_VAR";

    fn tool_row(
        i: i64,
        tool: &str,
        action: rampart_tools::ToolAction,
    ) -> rampart_audit::GovernanceRecord {
        rampart_audit::GovernanceRecord::new(
            now_ms() - 10_000 + i,
            GovernanceEvent::ToolDecision(rampart_audit::ToolDecisionEvent {
                request_id: format!("req-{i}"),
                key_id: Some("team-a".into()),
                endpoint: rampart_audit::ToolEndpoint::Proxy,
                conversation: Some(
                    ChainKey::public()
                        .hasher()
                        .conversation(&format!("conv{}", i % 2)),
                ),
                tool: tool.into(),
                arguments: [("path".to_string(), "ab".repeat(32))].into(),
                hash_key_id: "hk".into(),
                argument_values: None,
                action,
                risk: Some(rampart_tools::Risk::High),
                rules: vec!["TOOL_ACTION".into()],
                failed_argument: (action == rampart_tools::ToolAction::Block)
                    .then(|| "path".into()),
                approval_id: None,
                breakglass_id: None,
                provenance: Vec::new(),
            }),
        )
    }

    fn governance_db() -> (tempfile::TempDir, PathBuf) {
        use rampart_tools::ToolAction::*;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let log =
            AuditLog::open_with_chain_key(AuditConfig::at(&path), ChainKey::public()).unwrap();
        let w = log.writer();
        block_on(w.append(record(0, 0))).unwrap();
        for (i, tool, action) in [
            (1, "read_file", Allow),
            (2, "delete_file", Confirm),
            (3, "read_file", Block),
            (4, "transfer_funds", Block),
        ] {
            block_on(w.append_governance(tool_row(i, tool, action))).unwrap();
        }
        log.shutdown().unwrap();
        (dir, path)
    }

    #[test]
    fn query_tools_table_json_and_filters() {
        let (_dir, path) = governance_db();
        let db = path.to_str().unwrap();
        let out = run_args(&["query", "--db", db, "--tools"]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("SEQ") && lines[0].contains("TOOL"),
            "{out}"
        );
        assert!(
            lines[1].starts_with('4') && lines[1].contains("transfer_funds"),
            "{out}"
        );
        assert!(
            lines[2].contains("BLOCK") && lines[2].contains("arg=path"),
            "{out}"
        );
        assert_eq!(lines[5], "4 rows");

        let out = run_args(&[
            "query",
            "--db",
            db,
            "--tools",
            "--tool",
            "read_file",
            "--action",
            "block",
        ])
        .unwrap();
        assert!(out.contains("req-3") && !out.contains("req-1"), "{out}");
        assert!(out.ends_with("1 row\n"), "{out}");

        let conv0 = ChainKey::public().hasher().conversation("conv0");
        let out = run_args(&[
            "query",
            "--db",
            db,
            "--tools",
            "--conversation",
            &conv0,
            "--json",
            "--oldest-first",
        ])
        .unwrap();
        let seqs: Vec<i64> = out
            .lines()
            .map(|l| serde_json::from_str::<StoredGovernance>(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, [2, 4]);

        // By conversation id, hashed with the (here public) chain key.
        let hashed = ChainKey::public().hasher().conversation("conv1");
        let out = run_args(&[
            "query",
            "--db",
            db,
            "--tools",
            "--conversation-id",
            "conv1",
            "--key-env",
            NO_KEY,
        ])
        .unwrap();
        assert!(
            out.contains(&hashed[..12]) && out.ends_with("2 rows\n"),
            "{out}"
        );
        let out = run_args(&[
            "query",
            "--db",
            db,
            "--tools",
            "--request",
            "req-2",
            "--action",
            "CONFIRM",
        ])
        .unwrap();
        assert!(
            out.contains("delete_file") && out.ends_with("1 row\n"),
            "{out}"
        );
        let out = run_args(&["query", "--db", db, "--tools", "--kind", "approval_issued"]).unwrap();
        assert_eq!(out, "0 rows\n");
        let out = run_args(&["query", "--db", db, "--tools", "--limit", "2"]).unwrap();
        assert!(
            out.ends_with("2 rows shown, more match (use --limit to see more)\n"),
            "{out}"
        );

        // The scan decisions are still what plain `query` shows.
        let out = run_args(&["query", "--db", db]).unwrap();
        assert!(out.ends_with("1 record\n"), "{out}");
        // Flags that belong to one side only.
        let e = run_args(&["query", "--db", db, "--action", "CONFIRM"]).unwrap_err();
        assert!(format!("{e:#}").contains("add --tools"), "{e:#}");
        let e = run_args(&["query", "--db", db, "--tools", "--action", "SANITIZE"]).unwrap_err();
        assert!(format!("{e:#}").contains("does not apply"), "{e:#}");
        let e = run_args(&["query", "--db", db, "--tools", "--rule", "CTRL_001"]).unwrap_err();
        assert!(format!("{e:#}").contains("--rule does not apply"), "{e:#}");
        assert!(run_args(&["query", "--db", db, "--tool", "read_file"]).is_err());
    }

    #[test]
    fn verify_passes_an_untouched_chain_and_names_the_first_bad_row() {
        let (_dir, path) = governance_db();
        let db = path.to_str().unwrap();
        let (code, out) = run_code(&["verify", "--db", db, "--key-env", NO_KEY]).unwrap();
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("ok: 4 governance rows verified (key id public)"),
            "{out}"
        );
        assert!(out.contains("head: row 4 "), "{out}");
        assert!(out.contains("public key"), "{out}");

        let (code, out) = run_code(&["verify", "--db", db, "--key-env", NO_KEY, "--json"]).unwrap();
        assert_eq!(code, 0);
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["rows"], 4);
        assert_eq!(v["ok"], true);

        // Another key: every row is foreign.
        let (code, out) = run_code(&["verify", "--db", db, "--key-env", "PATH"]).unwrap();
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("BROKEN: governance row 1: chained with key id public"),
            "{out}"
        );

        // An edited row (triggers dropped first, as an attacker with write access would).
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "DROP TRIGGER governance_no_update;
             UPDATE governance SET body_json = replace(body_json, '\"block\"', '\"allow\"'), action = 'ALLOW' WHERE seq = 3;",
        )
        .unwrap();
        drop(c);
        let (code, out) = run_code(&["verify", "--db", db, "--key-env", NO_KEY]).unwrap();
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("BROKEN: governance row 3: its hash does not match"),
            "{out}"
        );
        assert!(out.contains("triggers are missing"), "{out}");

        let missing = path.with_file_name("nope.db");
        let e = run_code(&["verify", "--db", missing.to_str().unwrap()]).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
    }

    #[test]
    fn governance_table_shows_every_kind() {
        use rampart_audit::{
            ApprovalEvent, ApprovalRefusedEvent, BreakGlassEndEvent, BreakGlassUseEvent,
        };
        let grant = rampart_tools::BreakGlassGrant {
            id: rampart_tools::BreakGlassId("bg_9".into()),
            scope: rampart_tools::BreakGlassScope {
                tools: vec!["transfer_funds".into()],
                conversation: Some("c-1".into()),
                caller: Some("team-a".into()),
                override_arguments: false,
            },
            granted_by: "admin".into(),
            created_ms: 0,
            expires_ms: 60_000,
            reason: "payroll\u{1b}[2J".into(),
            incident: "INC-1".into(),
        };
        let approval = ApprovalEvent {
            approval_id: "a1".into(),
            request_id: "req-1".into(),
            key_id: None,
            conversation: None,
            tool: "delete_file".into(),
            arguments_hash: "h".into(),
            expires_ms: 1,
        };
        let events = vec![
            GovernanceEvent::ApprovalIssued(approval.clone()),
            GovernanceEvent::ApprovalRedeemed(approval),
            GovernanceEvent::ApprovalRefused(ApprovalRefusedEvent {
                request_id: "req-2".into(),
                key_id: None,
                conversation: None,
                tool: "delete_file".into(),
                reason: "replayed".into(),
            }),
            GovernanceEvent::BreakglassGranted(grant),
            GovernanceEvent::BreakglassUsed(BreakGlassUseEvent {
                breakglass_id: "bg_9".into(),
                request_id: "req-3".into(),
                key_id: Some("team-a".into()),
                conversation: None,
                tool: "transfer_funds".into(),
                overridden: rampart_tools::ToolAction::Block,
            }),
            GovernanceEvent::BreakglassRevoked(BreakGlassEndEvent {
                breakglass_id: "bg_9".into(),
                by: Some("admin".into()),
            }),
        ];
        let rows: Vec<StoredGovernance> = events
            .into_iter()
            .enumerate()
            .map(|(i, event)| StoredGovernance {
                seq: i as i64 + 1,
                time_ms: 0,
                event,
                hash: String::new(),
            })
            .collect();
        let t = governance_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 7, "{t}");
        assert!(
            lines[1].contains("approval_issued") && lines[1].contains("approval a1"),
            "{t}"
        );
        assert!(
            lines[3].contains("approval_refused") && lines[3].ends_with("replayed"),
            "{t}"
        );
        assert!(
            lines[4].contains("tools=transfer_funds caller=team-a conversation=c-1")
                && lines[4].contains("incident INC-1"),
            "{t}"
        );
        assert!(!t.contains('\u{1b}'), "{t}");
        assert!(
            lines[5].contains("ALLOW") && lines[5].ends_with("overrides BLOCK"),
            "{t}"
        );
        assert!(
            lines[6].contains("breakglass_revoked") && lines[6].contains("admin"),
            "{t}"
        );
    }

    #[test]
    fn table_escapes_control_characters() {
        let mut r = record(1, 0);
        r.request_id = "evil\u{1b}[2Jid".into();
        r.degraded = true;
        let t = table(&[StoredRecord { id: 1, record: r }]);
        assert!(
            !t.contains('\u{1b}') && t.contains("evil\\u{1b}[2Jid"),
            "{t}"
        );
        assert!(t.contains("ALLOW*") && t.contains("degraded"), "{t}");
    }
}
