//! `rampart breakglass grant|list|revoke`: the service's break-glass admin endpoints
//! (`POST/GET /admin/breakglass`, `DELETE /admin/breakglass/{id}`), with an admin API key
//! read from an environment variable (never from the command line, where `ps` shows it).

use crate::service_client::{Client, clip};
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use rampart_tools::{BreakGlassGrant, DEFAULT_MAX_TTL_SECONDS, GrantRequest};
use std::io::Write;

#[derive(Debug, Subcommand)]
pub enum BreakglassCommand {
    /// Grant a scoped, time-limited override of the tool policy.
    Grant(GrantArgs),
    /// List the active grants.
    List(ListArgs),
    /// Revoke a grant.
    Revoke(RevokeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The service's base URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// The environment variable holding an admin API key (`[[auth.keys]]` with `admin =
    /// true`).
    #[arg(long, value_name = "VAR", default_value = "RAMPART_ADMIN_KEY")]
    pub admin_key_env: String,
}

#[derive(Debug, Args)]
pub struct GrantArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// A tool the grant covers (repeatable), or `*` for every tool.
    #[arg(long = "tool", value_name = "NAME", required = true)]
    pub tools: Vec<String>,
    /// Only this conversation.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// Only this caller (API key id).
    #[arg(long, value_name = "KEY_ID")]
    pub caller: Option<String>,
    /// How long it lasts: a duration (30m, 2h, 1d) or seconds.
    #[arg(long, value_name = "DURATION")]
    pub ttl: String,
    /// Why the override is needed (required).
    #[arg(long)]
    pub reason: String,
    /// The incident or ticket reference (required).
    #[arg(long, value_name = "REF")]
    pub incident: String,
    /// Also override failed argument checks (path traversal, foreign domains…). Off by
    /// default: a grant lets a tool run, not escape its argument constraints.
    #[arg(long)]
    pub override_arguments: bool,
    /// Print the grant as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Print the grants as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The grant's id (`bg_…`).
    pub id: String,
}

#[derive(Debug, serde::Deserialize)]
struct GrantList {
    grants: Vec<BreakGlassGrant>,
}

pub fn run(cmd: &BreakglassCommand) -> Result<u8> {
    run_to(cmd, &mut crate::out::stdout())
}

/// `30m`, `2h`, `1d`, `90s` or plain seconds.
fn ttl_seconds(s: &str) -> Result<u64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    let ms = rampart_audit::parse_duration_ms(s).with_context(|| format!("--ttl {s:?}"))?;
    let secs = u64::try_from(ms / 1000).unwrap_or(0);
    if ms % 1000 != 0 {
        bail!("--ttl {s:?}: use whole seconds");
    }
    Ok(secs)
}

fn grant_request(a: &GrantArgs) -> Result<GrantRequest> {
    let req = GrantRequest {
        tools: a.tools.clone(),
        conversation: a.conversation.clone(),
        caller: a.caller.clone(),
        ttl_seconds: ttl_seconds(&a.ttl)?,
        reason: a.reason.clone(),
        incident: a.incident.clone(),
        override_arguments: a.override_arguments,
    };
    // The service checks against its own maximum; this catches the obvious before asking.
    req.validate(DEFAULT_MAX_TTL_SECONDS)?;
    Ok(req)
}

fn run_to(cmd: &BreakglassCommand, out: &mut dyn Write) -> Result<u8> {
    match cmd {
        BreakglassCommand::Grant(a) => {
            let req = grant_request(a)?;
            let client = Client::new(&a.server.server, &a.server.admin_key_env, "admin")?;
            let body = serde_json::to_vec(&req)?;
            let text = client.call("POST", "/admin/breakglass", Some(&body))?;
            let g: BreakGlassGrant = serde_json::from_str(&text)
                .with_context(|| format!("the service's answer is not a grant: {}", clip(&text)))?;
            if a.json {
                writeln!(out, "{}", serde_json::to_string(&g)?)?;
            } else {
                writeln!(out, "granted {}", describe(&g))?;
            }
        }
        BreakglassCommand::List(a) => {
            let client = Client::new(&a.server.server, &a.server.admin_key_env, "admin")?;
            let text = client.call("GET", "/admin/breakglass", None)?;
            let list: GrantList = serde_json::from_str(&text).with_context(|| {
                format!(
                    "the service's answer is not a list of grants: {}",
                    clip(&text)
                )
            })?;
            if a.json {
                writeln!(out, "{}", serde_json::to_string(&list.grants)?)?;
            } else if list.grants.is_empty() {
                writeln!(out, "no active break-glass grants")?;
            } else {
                for g in &list.grants {
                    writeln!(out, "{}", describe(g))?;
                }
            }
        }
        BreakglassCommand::Revoke(a) => {
            let id = a.id.trim();
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                bail!("invalid grant id {id:?} (expected bg_ and hex digits)");
            }
            let client = Client::new(&a.server.server, &a.server.admin_key_env, "admin")?;
            client.call("DELETE", &format!("/admin/breakglass/{id}"), None)?;
            writeln!(out, "revoked {id}")?;
        }
    }
    out.flush()?;
    Ok(0)
}

fn describe(g: &BreakGlassGrant) -> String {
    let mut s = format!(
        "{} tools={} until {} by {} incident {}",
        g.id,
        g.scope.tools.join(","),
        rampart_audit::format_time_ms(i64::try_from(g.expires_ms).unwrap_or(i64::MAX)),
        g.granted_by,
        g.incident
    );
    if let Some(c) = &g.scope.conversation {
        s.push_str(&format!(" conversation={c}"));
    }
    if let Some(c) = &g.scope.caller {
        s.push_str(&format!(" caller={c}"));
    }
    if g.scope.override_arguments {
        s.push_str(" override_arguments");
    }
    s.push_str(&format!(": {}", g.reason));
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: BreakglassCommand,
    }

    fn parse(args: &[&str]) -> Result<BreakglassCommand> {
        Ok(Cli::try_parse_from(std::iter::once("breakglass").chain(args.iter().copied()))?.cmd)
    }

    fn run_args(args: &[&str]) -> Result<String> {
        let cmd = parse(args)?;
        let mut out = Vec::new();
        run_to(&cmd, &mut out)?;
        Ok(String::from_utf8(out)?)
    }

    const GRANT: [&str; 9] = [
        "grant",
        "--tool",
        "transfer_funds",
        "--ttl",
        "30m",
        "--reason",
        "payroll is stuck",
        "--incident",
        "INC-42",
    ];

    #[test]
    fn grant_arguments_are_validated_before_any_request() {
        let BreakglassCommand::Grant(a) = parse(&GRANT).unwrap() else {
            panic!()
        };
        let r = grant_request(&a).unwrap();
        assert_eq!(r.ttl_seconds, 1800);
        assert_eq!(r.tools, ["transfer_funds"]);
        assert!(!r.override_arguments);
        // Required flags.
        assert!(parse(&["grant", "--ttl", "1m", "--reason", "r", "--incident", "i"]).is_err());
        assert!(parse(&["grant", "--tool", "x", "--ttl", "1m", "--incident", "i"]).is_err());
        // Empty reason, zero or too long TTL, bad duration: refused locally.
        for (i, v, needle) in [
            (6, "  ", "reason"),
            (4, "0", "ttl_seconds"),
            (4, "30d", "ttl_seconds"),
            (4, "soon", "--ttl"),
        ] {
            let mut args = GRANT.to_vec();
            args[i] = v;
            let BreakglassCommand::Grant(a) = parse(&args).unwrap() else {
                panic!()
            };
            let e = format!("{:#}", grant_request(&a).unwrap_err());
            assert!(e.contains(needle), "{v}: {e}");
        }
        assert!(parse(&["revoke"]).is_err());
    }

    #[test]
    fn a_missing_admin_key_is_a_clear_error() {
        let mut args = GRANT.to_vec();
        args.extend(["--admin-key-env", "RAMPART_TEST_BREAKGLASS_NO_SUCH_VAR"]);
        let e = format!("{:#}", run_args(&args).unwrap_err());
        assert!(
            e.contains("$RAMPART_TEST_BREAKGLASS_NO_SUCH_VAR is not set"),
            "{e}"
        );
    }

    // The tests name `PATH` as the admin key's variable: every process has it, and setting
    // a variable is `unsafe` (and racy) in a multi-threaded test binary.
    #[test]
    fn an_unreachable_server_is_a_clear_error() {
        // A port nothing listens on: bind one, note it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = format!("http://127.0.0.1:{port}");
        for args in [
            vec!["list", "--server", &server, "--admin-key-env", "PATH"],
            vec![
                "revoke",
                "bg_0123",
                "--server",
                &server,
                "--admin-key-env",
                "PATH",
            ],
        ] {
            let e = format!("{:#}", run_args(&args).unwrap_err());
            assert!(
                e.contains(&format!("cannot reach the service at {server}")),
                "{e}"
            );
        }
        let e = format!(
            "{:#}",
            run_args(&["list", "--server", "ftp://x", "--admin-key-env", "PATH"]).unwrap_err()
        );
        assert!(e.contains("must be an http"), "{e}");
        let e = format!(
            "{:#}",
            run_args(&["revoke", "../x", "--admin-key-env", "PATH"]).unwrap_err()
        );
        assert!(e.contains("invalid grant id"), "{e}");
    }

    #[test]
    fn a_server_answer_is_read_and_errors_are_named() {
        use std::io::{Read, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = format!("http://{}", listener.local_addr().unwrap());
        let answers = [
            (
                "200 OK",
                r#"{"grants":[{"id":"bg_1","scope":{"tools":["transfer_funds"],"override_arguments":false},"granted_by":"admin","created_ms":0,"expires_ms":1800000,"reason":"payroll","incident":"INC-42"}]}"#,
            ),
            (
                "403 Forbidden",
                r#"{"error":{"message":"this API key is not an admin key","type":"auth","code":"forbidden"}}"#,
            ),
        ];
        let t = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for (status, body) in answers {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).unwrap();
                seen.push(String::from_utf8_lossy(&buf[..n]).to_string());
                write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
            seen
        });
        let out = run_args(&["list", "--server", &server, "--admin-key-env", "PATH"]).unwrap();
        assert!(out.starts_with("bg_1 tools=transfer_funds until "), "{out}");
        assert!(out.contains("incident INC-42: payroll"), "{out}");
        let e = format!(
            "{:#}",
            run_args(&["list", "--server", &server, "--admin-key-env", "PATH"]).unwrap_err()
        );
        assert!(
            e.contains("HTTP 403: this API key is not an admin key (is it an admin key?)"),
            "{e}"
        );
        let seen = t.join().unwrap();
        assert!(
            seen[0].starts_with("GET /admin/breakglass HTTP/1.1"),
            "{}",
            seen[0]
        );
        assert!(
            seen[0]
                .to_ascii_lowercase()
                .contains("authorization: bearer "),
            "{}",
            seen[0]
        );
    }
}
