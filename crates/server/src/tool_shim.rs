//! Stand-ins for APIs other crates provide (argument parsing, approval tokens, break-glass
//! grants) with the same shapes, so the server's tool governance builds and is tested
//! before they land; replaced by the real ones on merge.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;
use std::collections::HashMap;
use std::sync::Mutex;

/// Largest tool-argument text accepted, in bytes.
pub(crate) const MAX_ARGUMENT_BYTES: usize = 64 * 1024;
/// Deepest nesting of arrays and objects accepted in tool arguments.
pub(crate) const MAX_ARGUMENT_DEPTH: usize = 32;

/// Why tool arguments were refused (the call is blocked, fail closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgumentsError {
    #[error("arguments are {0} bytes, over the limit of {MAX_ARGUMENT_BYTES}")]
    TooLarge(usize),
    #[error("arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")]
    TooDeep,
    #[error("arguments are not valid JSON")]
    NotJson,
    #[error("arguments are not a JSON object")]
    NotObject,
}

impl ArgumentsError {
    /// The check's name in answers (`failed_check`).
    pub(crate) fn check_name(&self) -> &'static str {
        match self {
            ArgumentsError::TooLarge(_) => "too_large",
            ArgumentsError::TooDeep => "too_deep",
            ArgumentsError::NotJson => "not_json",
            ArgumentsError::NotObject => "not_object",
        }
    }
}

/// Parses a tool call's arguments text: bounded size and depth, a JSON object (empty text is
/// an empty object, as some models send for tools without parameters).
pub(crate) fn parse_arguments(text: &str) -> Result<Value, ArgumentsError> {
    if text.len() > MAX_ARGUMENT_BYTES {
        return Err(ArgumentsError::TooLarge(text.len()));
    }
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    if nesting(text.as_bytes()) > MAX_ARGUMENT_DEPTH {
        return Err(ArgumentsError::TooDeep);
    }
    let v: Value = serde_json::from_str(text).map_err(|_| ArgumentsError::NotJson)?;
    check_value(&v)?;
    Ok(v)
}

/// Checks already-parsed arguments the way [`parse_arguments`] checks text.
pub(crate) fn check_value(v: &Value) -> Result<(), ArgumentsError> {
    if !v.is_object() {
        return Err(ArgumentsError::NotObject);
    }
    if depth(v) > MAX_ARGUMENT_DEPTH {
        return Err(ArgumentsError::TooDeep);
    }
    Ok(())
}

/// Deepest bracket nesting of JSON text, outside strings (checked before parsing, so a deep
/// text is refused without recursing into it).
fn nesting(b: &[u8]) -> usize {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &c in b {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Canonical JSON text of arguments: object keys sorted, no whitespace.
pub(crate) fn canonical_arguments(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    if let Some(x) = m.get(*k) {
                        write(x, out);
                    }
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    write(v, &mut s);
    s
}

pub(crate) fn sha256_hex(b: &[u8]) -> String {
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn random_hex(n: usize) -> Result<String, BookError> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).map_err(|_| BookError::Random)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Why a book refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BookError {
    #[error("the OS random source failed")]
    Random,
    #[error("too many pending approvals ({0}); retry later")]
    Full(usize),
    #[error("approval token unknown, already used or expired")]
    Unknown,
    #[error("approval token is for another call (tool, arguments or conversation differ)")]
    Mismatch,
    #[error("{0}")]
    Invalid(String),
}

/// An issued approval: the token the client resubmits, its id (audit), expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Approval {
    pub(crate) id: String,
    pub(crate) token: String,
    pub(crate) expires_at_ms: u64,
}

#[derive(Debug)]
struct Pending {
    id: String,
    tool: String,
    arguments_sha256: String,
    conversation: String,
    expires_at_ms: u64,
}

/// Single-use approval tokens bound to one call (tool, canonical-arguments hash,
/// conversation), in memory, bounded.
#[derive(Debug)]
pub(crate) struct ApprovalBook {
    ttl_ms: u64,
    max: usize,
    pending: Mutex<HashMap<String, Pending>>,
}

impl ApprovalBook {
    pub(crate) fn new(ttl_ms: u64, max: usize) -> Self {
        Self {
            ttl_ms,
            max,
            pending: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn issue(
        &self,
        tool: &str,
        arguments_sha256: &str,
        conversation: &str,
        now_ms: u64,
    ) -> Result<Approval, BookError> {
        let token = format!("rap_{}", random_hex(24)?);
        let id = format!("apr_{}", random_hex(8)?);
        let expires_at_ms = now_ms.saturating_add(self.ttl_ms);
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() >= self.max {
            p.retain(|_, v| v.expires_at_ms > now_ms);
            if p.len() >= self.max {
                return Err(BookError::Full(self.max));
            }
        }
        p.insert(
            sha256_hex(token.as_bytes()),
            Pending {
                id: id.clone(),
                tool: tool.to_string(),
                arguments_sha256: arguments_sha256.to_string(),
                conversation: conversation.to_string(),
                expires_at_ms,
            },
        );
        Ok(Approval {
            id,
            token,
            expires_at_ms,
        })
    }

    /// Redeems a token for exactly this call; single use (a mismatch leaves it pending).
    pub(crate) fn redeem(
        &self,
        token: &str,
        tool: &str,
        arguments_sha256: &str,
        conversation: &str,
        now_ms: u64,
    ) -> Result<String, BookError> {
        let key = sha256_hex(token.as_bytes());
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(e) = p.get(&key) else {
            return Err(BookError::Unknown);
        };
        if e.expires_at_ms <= now_ms {
            p.remove(&key);
            return Err(BookError::Unknown);
        }
        if e.tool != tool
            || e.arguments_sha256 != arguments_sha256
            || e.conversation != conversation
        {
            return Err(BookError::Mismatch);
        }
        Ok(p.remove(&key).map(|e| e.id).unwrap_or_default())
    }
}

/// What an admin asks for: a scope (tools, conversation, caller; at least one), a TTL, a
/// reason and an incident reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrantRequest {
    #[serde(default)]
    pub(crate) tools: Vec<String>,
    #[serde(default)]
    pub(crate) conversation: Option<String>,
    #[serde(default)]
    pub(crate) caller: Option<String>,
    pub(crate) ttl_s: u64,
    pub(crate) reason: String,
    pub(crate) incident: String,
}

/// A granted override.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BreakGlassGrant {
    pub(crate) id: String,
    pub(crate) tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conversation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) caller: Option<String>,
    pub(crate) reason: String,
    pub(crate) incident: String,
    pub(crate) granted_by: Option<String>,
    pub(crate) granted_at_ms: u64,
    pub(crate) expires_at_ms: u64,
}

impl BreakGlassGrant {
    fn applies(&self, tool: &str, conversation: Option<&str>, caller: Option<&str>) -> bool {
        (self.tools.is_empty() || self.tools.iter().any(|t| t == tool))
            && self
                .conversation
                .as_deref()
                .is_none_or(|c| conversation == Some(c))
            && self.caller.as_deref().is_none_or(|c| caller == Some(c))
    }
}

/// Active break-glass grants, in memory; expiry enforced on every look-up.
#[derive(Debug)]
pub(crate) struct BreakGlassBook {
    max_ttl_s: u64,
    grants: Mutex<Vec<BreakGlassGrant>>,
}

impl BreakGlassBook {
    pub(crate) fn new(max_ttl_s: u64) -> Self {
        Self {
            max_ttl_s,
            grants: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn grant(
        &self,
        req: GrantRequest,
        granted_by: Option<String>,
        now_ms: u64,
    ) -> Result<BreakGlassGrant, BookError> {
        if req.tools.is_empty() && req.conversation.is_none() && req.caller.is_none() {
            return Err(BookError::Invalid(
                "a grant needs a scope: tools, conversation or caller".into(),
            ));
        }
        if req.reason.trim().is_empty() || req.incident.trim().is_empty() {
            return Err(BookError::Invalid(
                "a grant needs a reason and an incident reference".into(),
            ));
        }
        if req.ttl_s == 0 || req.ttl_s > self.max_ttl_s {
            return Err(BookError::Invalid(format!(
                "ttl_s must be in 1..={} (tools.breakglass_max_ttl_s)",
                self.max_ttl_s
            )));
        }
        let g = BreakGlassGrant {
            id: format!("bg_{}", random_hex(8)?),
            tools: req.tools,
            conversation: req.conversation,
            caller: req.caller,
            reason: req.reason,
            incident: req.incident,
            granted_by,
            granted_at_ms: now_ms,
            expires_at_ms: now_ms.saturating_add(req.ttl_s.saturating_mul(1000)),
        };
        let mut gs = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        gs.retain(|x| x.expires_at_ms > now_ms);
        gs.push(g.clone());
        Ok(g)
    }

    pub(crate) fn active(&self, now_ms: u64) -> Vec<BreakGlassGrant> {
        let mut gs = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        gs.retain(|x| x.expires_at_ms > now_ms);
        gs.clone()
    }

    pub(crate) fn revoke(&self, id: &str) -> Option<BreakGlassGrant> {
        let mut gs = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        let i = gs.iter().position(|g| g.id == id)?;
        Some(gs.remove(i))
    }

    pub(crate) fn find(
        &self,
        tool: &str,
        conversation: Option<&str>,
        caller: Option<&str>,
        now_ms: u64,
    ) -> Option<BreakGlassGrant> {
        self.active(now_ms)
            .into_iter()
            .find(|g| g.applies(tool, conversation, caller))
    }
}
