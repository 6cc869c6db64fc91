//! `rampart approvals list|approve|deny`: the service's approver endpoints (`GET
//! /admin/approvals`, `POST /admin/approvals/{id}/approve|deny`). A tool call the policy
//! says to CONFIRM waits there until an approver key, other than the key that made the
//! call, says yes or no.

use crate::service_client::{Client, clip};
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rampart_tools::{ApprovalState, PendingApproval};
use std::io::Write;

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List the tool calls waiting for an approver, oldest first, with their arguments.
    List(ListArgs),
    /// Approve a pending call: its token redeems once.
    Approve(DecideArgs),
    /// Deny a pending call: its token never redeems.
    Deny(DecideArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ApproverArgs {
    /// The service's base URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// The environment variable holding an approver API key (`[[auth.keys]]` with
    /// `approver = true`, or an admin key).
    #[arg(long, value_name = "VAR", default_value = "RAMPART_APPROVER_KEY")]
    pub approver_key_env: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub server: ApproverArgs,
    /// Print the approvals as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    #[command(flatten)]
    pub server: ApproverArgs,
    /// The approval's id (32 hex digits, as `list` and the webhook name it).
    pub id: String,
    /// Print the decided approval as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, serde::Deserialize)]
struct ApprovalList {
    approvals: Vec<PendingApproval>,
}

#[derive(Debug, serde::Deserialize)]
struct Decided {
    approval: PendingApproval,
}

pub fn run(cmd: &ApprovalsCommand) -> Result<u8> {
    run_to(cmd, &mut crate::out::stdout())
}

fn client(a: &ApproverArgs) -> Result<Client> {
    Client::new(&a.server, &a.approver_key_env, "approver")
}

fn checked_id(id: &str) -> Result<&str> {
    let id = id.trim();
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("invalid approval id {id:?} (expected 32 hex digits)");
    }
    Ok(id)
}

fn run_to(cmd: &ApprovalsCommand, out: &mut dyn Write) -> Result<u8> {
    match cmd {
        ApprovalsCommand::List(a) => {
            let text = client(&a.server)?.call("GET", "/admin/approvals", None)?;
            let list: ApprovalList = serde_json::from_str(&text).with_context(|| {
                format!(
                    "the service's answer is not a list of approvals: {}",
                    clip(&text)
                )
            })?;
            if a.json {
                writeln!(out, "{}", serde_json::to_string(&list.approvals)?)?;
            } else if list.approvals.is_empty() {
                writeln!(out, "no approvals pending")?;
            } else {
                for p in &list.approvals {
                    writeln!(out, "{}", describe(p))?;
                }
            }
        }
        ApprovalsCommand::Approve(a) | ApprovalsCommand::Deny(a) => {
            let verb = if matches!(cmd, ApprovalsCommand::Approve(_)) {
                "approve"
            } else {
                "deny"
            };
            let id = checked_id(&a.id)?;
            let text = client(&a.server)?.call(
                "POST",
                &format!("/admin/approvals/{id}/{verb}"),
                Some(b"{}"),
            )?;
            let d: Decided = serde_json::from_str(&text).with_context(|| {
                format!("the service's answer is not an approval: {}", clip(&text))
            })?;
            if a.json {
                writeln!(out, "{}", serde_json::to_string(&d.approval)?)?;
            } else {
                writeln!(out, "{}", describe(&d.approval))?;
            }
        }
    }
    out.flush()?;
    Ok(0)
}

/// One line: id, state, tool, who asked, expiry, and the arguments as JSON (control
/// characters shown as `?`: an argument is attacker-influenced text on an approver's
/// terminal).
fn describe(p: &PendingApproval) -> String {
    let state = match &p.state {
        ApprovalState::Pending => "pending".to_string(),
        ApprovalState::Approved { by } => format!("approved by {by}"),
        ApprovalState::Denied { by } => format!("denied by {by}"),
    };
    let s = format!(
        "{} {state} tool={} requested_by={} until {} arguments={}",
        p.id,
        p.tool,
        p.requested_by.as_deref().unwrap_or("-"),
        rampart_audit::format_time_ms(i64::try_from(p.expires_ms).unwrap_or(i64::MAX)),
        p.arguments
    );
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_before_anything_is_sent() {
        assert!(checked_id("0123456789abcdef0123456789abcdef").is_ok());
        for bad in ["", "../x", "0123", "0123456789abcdef0123456789abcdeg"] {
            assert!(checked_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_listed_approval_shows_its_call_without_control_characters() {
        let p = PendingApproval {
            id: rampart_tools::ApprovalId("ab".repeat(16)),
            tool: "delete_file".into(),
            arguments: serde_json::json!({"path": "/srv/a\u{1b}[2Jb"}),
            arguments_hash: "h".into(),
            requested_by: Some("agent".into()),
            issued_ms: 0,
            expires_ms: 1_795_683_600_000,
            state: ApprovalState::Pending,
        };
        let line = describe(&p);
        assert!(
            line.starts_with(&format!(
                "{} pending tool=delete_file requested_by=agent",
                "ab".repeat(16)
            )),
            "{line}"
        );
        assert!(!line.contains('\u{1b}'), "{line}");
    }
}
