//! Break-glass: an administrator's time-limited, scoped override of the tool policy, with a
//! required reason and incident reference. Every grant, use, revocation and expiry goes to
//! the hash-chained governance audit (the service writes those rows).
//!
//! # What a grant overrides
//!
//! A matching, unexpired grant turns a CONFIRM or BLOCK into ALLOW when it came from:
//! the tool's own action (`TOOL_ACTION`), the default for unknown tools (`TOOL_UNKNOWN`),
//! flow rules (`FLOW_*`, rate limits) and context conditions (caller role or attributes,
//! time windows). It does **not** override a failed argument predicate (`TOOL_ARG`: path
//! traversal, a foreign email domain, …) or arguments that are not a JSON object
//! (`TOOL_ARGS_SHAPE`) unless the grant says `override_arguments = true`: break-glass is for
//! "this tool is needed now", not for "let this call escape its sandbox".
//!
//! # Scope
//!
//! A grant names tools (or `["*"]`) and optionally one conversation and one caller (API key
//! id); it applies to a call only if every part it names matches. A grant naming neither a
//! conversation nor a caller applies to every caller of the named tools.
//!
//! # Expiry
//!
//! Enforced at lookup: [`BreakGlassBook::find`] never returns an expired grant, and drops
//! expired grants from the active list; [`BreakGlassBook::take_expired`] hands them to the
//! caller once so the expiry can be audited.

use crate::{RULE_ARGUMENT, RULE_ARGUMENTS_SHAPE, ToolAction, ToolDecision};
use rampart_state::{Op, Reply, SharedStore};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// Default (and the largest configurable) `ttl_seconds` of a grant: 24 hours.
pub const DEFAULT_MAX_TTL_SECONDS: u64 = 86_400;
/// Most characters of `reason`.
pub const MAX_REASON_CHARS: usize = 2_000;
/// Most characters of `incident`.
pub const MAX_INCIDENT_CHARS: usize = 200;
/// Most tools a grant names.
pub const MAX_GRANT_TOOLS: usize = 256;
/// Most characters of a tool name, conversation or caller in a grant.
pub const MAX_SCOPE_CHARS: usize = 256;
/// Most grants active at once; beyond, granting is refused.
pub const MAX_ACTIVE_GRANTS: usize = 1_024;
/// Rule id added to a decision a grant turned into ALLOW.
pub const RULE_BREAK_GLASS: &str = "BREAK_GLASS";
/// The tool name that means every tool.
pub const ALL_TOOLS: &str = "*";

/// The body of `POST /admin/breakglass`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// Tool names, or `["*"]` for every tool.
    pub tools: Vec<String>,
    /// Only this conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Only this caller (API key id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Time to live, seconds (1 to the book's maximum).
    pub ttl_seconds: u64,
    /// Why (required).
    pub reason: String,
    /// The incident or ticket reference (required).
    pub incident: String,
    /// Also override failed argument predicates (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub override_arguments: bool,
}

/// Why a grant request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// A field is missing, empty or too long, or the TTL is out of range.
    #[error("break-glass request: {0}")]
    Invalid(String),
    /// [`MAX_ACTIVE_GRANTS`] grants are active.
    #[error("too many active break-glass grants ({0}); revoke some first")]
    Full(usize),
    /// No randomness for the grant's id.
    #[error(transparent)]
    Random(#[from] crate::approval::RandomError),
    /// The shared state (Redis) could not be read or written.
    #[error("the shared state is unavailable: {0}")]
    Unavailable(String),
}

fn bounded(field: &str, v: &str, max: usize) -> Result<(), GrantError> {
    if v.trim().is_empty() {
        return Err(GrantError::Invalid(format!("`{field}` must not be empty")));
    }
    if v.chars().count() > max {
        return Err(GrantError::Invalid(format!(
            "`{field}` is longer than {max} characters"
        )));
    }
    if v.chars().any(char::is_control) {
        return Err(GrantError::Invalid(format!(
            "`{field}` contains control characters"
        )));
    }
    Ok(())
}

impl GrantRequest {
    /// Checks the request against `max_ttl_seconds`.
    pub fn validate(&self, max_ttl_seconds: u64) -> Result<(), GrantError> {
        if self.tools.is_empty() {
            return Err(GrantError::Invalid(
                "`tools` must name at least one tool (or \"*\")".into(),
            ));
        }
        if self.tools.len() > MAX_GRANT_TOOLS {
            return Err(GrantError::Invalid(format!(
                "`tools` names more than {MAX_GRANT_TOOLS} tools"
            )));
        }
        for t in &self.tools {
            bounded("tools[]", t, MAX_SCOPE_CHARS)?;
        }
        if let Some(c) = &self.conversation {
            bounded("conversation", c, MAX_SCOPE_CHARS)?;
        }
        if let Some(c) = &self.caller {
            bounded("caller", c, MAX_SCOPE_CHARS)?;
        }
        bounded("reason", &self.reason, MAX_REASON_CHARS)?;
        bounded("incident", &self.incident, MAX_INCIDENT_CHARS)?;
        if !(1..=max_ttl_seconds).contains(&self.ttl_seconds) {
            return Err(GrantError::Invalid(format!(
                "`ttl_seconds` must be between 1 and {max_ttl_seconds}, got {}",
                self.ttl_seconds
            )));
        }
        Ok(())
    }
}

/// The id of a grant (`bg_` and 24 hex digits).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BreakGlassId(pub String);

impl std::fmt::Display for BreakGlassId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a grant applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakGlassScope {
    /// Tool names (trimmed), or `["*"]`.
    pub tools: Vec<String>,
    /// Only this conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Only this caller (API key id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Also overrides failed argument predicates.
    #[serde(default)]
    pub override_arguments: bool,
}

impl BreakGlassScope {
    /// Whether a call of `tool` in `conversation` by `caller` is in scope.
    pub fn covers(&self, tool: &str, conversation: Option<&str>, caller: Option<&str>) -> bool {
        let tool = tool.trim();
        self.tools.iter().any(|t| t == ALL_TOOLS || t == tool)
            && self
                .conversation
                .as_deref()
                .is_none_or(|c| conversation == Some(c))
            && self.caller.as_deref().is_none_or(|c| caller == Some(c))
    }
}

/// A granted override (the answer of `POST /admin/breakglass`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakGlassGrant {
    /// Its id.
    pub id: BreakGlassId,
    /// What it applies to.
    pub scope: BreakGlassScope,
    /// Who granted it (the admin key's id).
    pub granted_by: String,
    /// When, Unix milliseconds.
    pub created_ms: u64,
    /// Expiry, Unix milliseconds (the grant applies while `now < expires_ms`).
    pub expires_ms: u64,
    /// Why.
    pub reason: String,
    /// The incident reference.
    pub incident: String,
}

impl BreakGlassGrant {
    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms
    }

    /// Whether it can turn `decision` into ALLOW: it is not ALLOW already, and, unless
    /// `override_arguments`, it was not decided by a failed argument.
    pub fn can_override(&self, decision: &ToolDecision) -> bool {
        if decision.action == ToolAction::Allow {
            return false;
        }
        let argument_failure = decision.failed_argument.is_some()
            || decision
                .rules
                .iter()
                .any(|r| r == RULE_ARGUMENT || r == RULE_ARGUMENTS_SHAPE);
        !argument_failure || self.scope.override_arguments
    }
}

/// Applies `grant` to `decision` if it can override it ([`BreakGlassGrant::can_override`]):
/// ALLOW, rule [`RULE_BREAK_GLASS`], `breakglass_id` set. Does not check scope or expiry
/// (that is [`BreakGlassBook::find`]'s). Returns whether the decision changed.
pub fn apply_breakglass(decision: &mut ToolDecision, grant: &BreakGlassGrant) -> bool {
    if !grant.can_override(decision) {
        return false;
    }
    decision.reasons.push(format!(
        "break-glass {} (incident {}) overrides {}",
        grant.id,
        grant.incident,
        decision.action.name()
    ));
    decision.action = ToolAction::Allow;
    decision.rules.push(RULE_BREAK_GLASS.into());
    decision.breakglass_id = Some(grant.id.clone());
    true
}

const GRANT_INDEX: &str = "bg:idx";

fn grant_key(id: &str) -> String {
    format!("bg:{id}")
}

/// Set by the replica that reports a grant's expiry (or revokes it): once across replicas.
/// A day is longer than any grant's reporting delay.
fn expired_marker(id: &str) -> String {
    format!("bg:expired:{id}")
}

fn run(store: &dyn SharedStore, op: Op) -> Result<Reply, GrantError> {
    store
        .execute(&op)
        .map_err(|e| GrantError::Unavailable(e.chain()))
}

#[derive(Debug, Default)]
struct Inner {
    active: Vec<BreakGlassGrant>,
    expired: Vec<BreakGlassGrant>,
}

impl Inner {
    fn prune(&mut self, now_ms: u64) {
        let (gone, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(|g| g.expired(now_ms));
        self.active = keep;
        self.expired.extend(gone);
        // Bounded: if nobody takes them, the oldest are dropped from the buffer (their
        // expiry is still evident from `expires_ms` in the grant's audit row).
        if self.expired.len() > MAX_ACTIVE_GRANTS {
            let excess = self.expired.len() - MAX_ACTIVE_GRANTS;
            self.expired.drain(..excess);
        }
    }
}

/// The active grants. Thread-safe (`Send + Sync`); in memory: a restart ends every grant
/// (each is in the audit, and re-granting is one command).
#[derive(Debug)]
pub struct BreakGlassBook {
    max_ttl_seconds: u64,
    inner: Mutex<Inner>,
    /// Set: grants live in the shared state, in force on every replica.
    shared: Option<Arc<dyn SharedStore>>,
}

impl Default for BreakGlassBook {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TTL_SECONDS)
    }
}

impl BreakGlassBook {
    /// A book accepting TTLs up to `max_ttl_seconds` (at least 1).
    pub fn new(max_ttl_seconds: u64) -> Self {
        Self {
            max_ttl_seconds: max_ttl_seconds.max(1),
            inner: Mutex::new(Inner::default()),
            shared: None,
        }
    }

    /// Keeps the grants in `store`: a grant made on one replica is in force on every
    /// replica, and expires (a TTL in the store) on all of them at once.
    pub fn with_shared_state(mut self, store: Arc<dyn SharedStore>) -> Self {
        self.shared = Some(store);
        self
    }

    /// The grants in force in the shared state, oldest first.
    fn shared_active(
        &self,
        store: &dyn SharedStore,
        now_ms: u64,
    ) -> Result<Vec<BreakGlassGrant>, GrantError> {
        let ids = match run(
            store,
            Op::IndexLive {
                index: GRANT_INDEX.into(),
                now_ms,
                limit: MAX_ACTIVE_GRANTS as u64,
            },
        )? {
            Reply::Members(m) => m,
            other => {
                return Err(GrantError::Unavailable(format!(
                    "unexpected reply {other:?}"
                )));
            }
        };
        let mut out = Vec::new();
        for id in ids {
            if let Reply::Value(Some(v)) = run(
                store,
                Op::Get {
                    key: grant_key(&id),
                },
            )? && let Ok(g) = serde_json::from_str::<BreakGlassGrant>(&v)
                && !g.expired(now_ms)
            {
                out.push(g);
            }
        }
        out.sort_by(|a, b| (a.created_ms, &a.id.0).cmp(&(b.created_ms, &b.id.0)));
        // Remembered here for `take_expired`: the replica that sees a grant expire first
        // reports it (a marker in the store makes it once across replicas).
        let mut inner = self.lock();
        for g in &out {
            if !inner.active.iter().any(|a| a.id == g.id) {
                inner.active.push(g.clone());
            }
        }
        Ok(out)
    }

    /// The largest TTL accepted.
    pub fn max_ttl_seconds(&self) -> u64 {
        self.max_ttl_seconds
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Validates `req` and grants it, by `granted_by` (the admin key's id), from `now_ms`.
    pub fn grant(
        &self,
        req: GrantRequest,
        granted_by: &str,
        now_ms: u64,
    ) -> Result<BreakGlassGrant, GrantError> {
        req.validate(self.max_ttl_seconds)?;
        let key = crate::approval::random_key()?;
        let id = BreakGlassId(format!("bg_{}", &blake3::hash(&key).to_hex()[..24]));
        let grant = BreakGlassGrant {
            id,
            scope: BreakGlassScope {
                tools: req.tools.iter().map(|t| t.trim().to_string()).collect(),
                conversation: req.conversation,
                caller: req.caller,
                override_arguments: req.override_arguments,
            },
            granted_by: granted_by.to_string(),
            created_ms: now_ms,
            expires_ms: now_ms.saturating_add(req.ttl_seconds.saturating_mul(1000)),
            reason: req.reason,
            incident: req.incident,
        };
        if let Some(store) = &self.shared {
            let added = run(
                store.as_ref(),
                Op::IndexAdd {
                    index: GRANT_INDEX.into(),
                    member: grant.id.0.clone(),
                    expires_ms: grant.expires_ms,
                    cap: MAX_ACTIVE_GRANTS as u64,
                    now_ms,
                },
            )?;
            if added != Reply::Done(true) {
                return Err(GrantError::Full(MAX_ACTIVE_GRANTS));
            }
            let value = serde_json::to_string(&grant)
                .map_err(|e| GrantError::Unavailable(format!("cannot write the grant: {e}")))?;
            run(
                store.as_ref(),
                Op::PutNew {
                    key: grant_key(&grant.id.0),
                    value,
                    ttl_ms: grant.expires_ms.saturating_sub(now_ms).max(1),
                },
            )?;
            self.lock().active.push(grant.clone());
            return Ok(grant);
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        if inner.active.len() >= MAX_ACTIVE_GRANTS {
            return Err(GrantError::Full(MAX_ACTIVE_GRANTS));
        }
        inner.active.push(grant.clone());
        Ok(grant)
    }

    /// Revokes a grant; the grant, if it was active.
    pub fn revoke(&self, id: &str, now_ms: u64) -> Result<Option<BreakGlassGrant>, GrantError> {
        if let Some(store) = &self.shared {
            let taken = run(store.as_ref(), Op::Take { key: grant_key(id) })?;
            run(
                store.as_ref(),
                Op::IndexRemove {
                    index: GRANT_INDEX.into(),
                    member: id.to_string(),
                },
            )?;
            self.lock().active.retain(|g| g.id.0 != id);
            // A revoked grant is not reported as expired later by any replica.
            run(
                store.as_ref(),
                Op::PutNew {
                    key: expired_marker(id),
                    value: "revoked".into(),
                    ttl_ms: 86_400_000,
                },
            )?;
            return Ok(match taken {
                Reply::Value(Some(v)) => serde_json::from_str::<BreakGlassGrant>(&v)
                    .ok()
                    .filter(|g| !g.expired(now_ms)),
                _ => None,
            });
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        let Some(i) = inner.active.iter().position(|g| g.id.0 == id) else {
            return Ok(None);
        };
        Ok(Some(inner.active.remove(i)))
    }

    /// The grants active at `now_ms`, oldest first.
    pub fn active(&self, now_ms: u64) -> Result<Vec<BreakGlassGrant>, GrantError> {
        if let Some(store) = &self.shared {
            return self.shared_active(store.as_ref(), now_ms);
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        Ok(inner.active.clone())
    }

    /// The id of the first active grant whose scope covers the call (expired grants never
    /// apply, and are dropped).
    pub fn find(
        &self,
        tool: &str,
        conversation: Option<&str>,
        caller: Option<&str>,
        now_ms: u64,
    ) -> Option<BreakGlassId> {
        if self.shared.is_some() {
            return self
                .active_or_none(now_ms)
                .iter()
                .find(|g| g.scope.covers(tool, conversation, caller))
                .map(|g| g.id.clone());
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        inner
            .active
            .iter()
            .find(|g| g.scope.covers(tool, conversation, caller))
            .map(|g| g.id.clone())
    }

    /// The grants in force, or none when the shared state cannot be read: a grant that
    /// cannot be checked overrides nothing (fail closed).
    fn active_or_none(&self, now_ms: u64) -> Vec<BreakGlassGrant> {
        self.active(now_ms).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "break-glass grants unreadable: none applies");
            Vec::new()
        })
    }

    /// Applies the first active grant that covers the call and can override `decision`
    /// (see [`apply_breakglass`]); the grant's id if one did.
    pub fn apply(
        &self,
        decision: &mut ToolDecision,
        tool: &str,
        conversation: Option<&str>,
        caller: Option<&str>,
        now_ms: u64,
    ) -> Option<BreakGlassId> {
        if decision.action == ToolAction::Allow {
            return None;
        }
        if self.shared.is_some() {
            let active = self.active_or_none(now_ms);
            let g = active
                .iter()
                .find(|g| g.scope.covers(tool, conversation, caller) && g.can_override(decision))?;
            return apply_breakglass(decision, g).then(|| g.id.clone());
        }
        let mut inner = self.lock();
        inner.prune(now_ms);
        let g = inner
            .active
            .iter()
            .find(|g| g.scope.covers(tool, conversation, caller) && g.can_override(decision))?;
        apply_breakglass(decision, g).then(|| g.id.clone())
    }

    /// The grants that expired since the last call (each once), for the audit.
    pub fn take_expired(&self, now_ms: u64) -> Vec<BreakGlassGrant> {
        let expired = {
            let mut inner = self.lock();
            inner.prune(now_ms);
            std::mem::take(&mut inner.expired)
        };
        let Some(store) = &self.shared else {
            return expired;
        };
        // Across replicas each expiry is reported once: by the replica that sets its marker.
        expired
            .into_iter()
            .filter(|g| {
                store
                    .execute(&Op::PutNew {
                        key: expired_marker(&g.id.0),
                        value: "1".into(),
                        ttl_ms: 86_400_000,
                    })
                    .is_ok_and(|r| r == Reply::Done(true))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallContext, Policy, ToolCall};
    use serde_json::json;

    const T0: u64 = 1_700_000_000_000;

    fn req(tools: &[&str]) -> GrantRequest {
        GrantRequest {
            tools: tools.iter().map(|s| s.to_string()).collect(),
            conversation: None,
            caller: None,
            ttl_seconds: 60,
            reason: "payroll run is stuck".into(),
            incident: "INC-42".into(),
            override_arguments: false,
        }
    }

    fn policy() -> Policy {
        Policy::from_toml(
            r#"
version = 1
[[tools]]
name = "transfer_funds"
risk = "critical"
action = "block"
[[tools]]
name = "read_file"
risk = "low"
action = "allow"
args.path = { path_under = ["/srv/app/docs"] }
"#,
        )
        .unwrap()
    }

    #[test]
    fn an_expired_break_glass_no_longer_applies() {
        let book = BreakGlassBook::default();
        let g = book.grant(req(&["transfer_funds"]), "admin", T0).unwrap();
        assert_eq!(g.expires_ms, T0 + 60_000);
        let p = policy();
        let call = ToolCall::new("transfer_funds", json!({}));
        let mut d = p.check(&call, &CallContext::default());
        assert_eq!(d.action, ToolAction::Block);
        assert_eq!(
            book.apply(&mut d, "transfer_funds", None, None, T0 + 59_999),
            Some(g.id.clone())
        );
        assert_eq!(d.action, ToolAction::Allow);
        assert_eq!(d.breakglass_id, Some(g.id.clone()));
        assert!(d.rules.iter().any(|r| r == RULE_BREAK_GLASS));

        let mut d = p.check(&call, &CallContext::default());
        assert_eq!(
            book.apply(&mut d, "transfer_funds", None, None, T0 + 60_000),
            None
        );
        assert_eq!(d.action, ToolAction::Block);
        assert_eq!(book.find("transfer_funds", None, None, T0 + 60_000), None);
        assert!(book.active(T0 + 60_000).unwrap().is_empty());
        let expired = book.take_expired(T0 + 60_000);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].id, g.id);
        assert!(book.take_expired(T0 + 60_001).is_empty());
    }

    #[test]
    fn scope_by_tool_conversation_and_caller() {
        let book = BreakGlassBook::default();
        let mut r = req(&["transfer_funds"]);
        r.conversation = Some("conv-1".into());
        r.caller = Some("team-a".into());
        let g = book.grant(r, "admin", T0).unwrap();
        let t = T0 + 1;
        assert_eq!(
            book.find("transfer_funds", Some("conv-1"), Some("team-a"), t),
            Some(g.id.clone())
        );
        assert_eq!(
            book.find("delete_file", Some("conv-1"), Some("team-a"), t),
            None
        );
        assert_eq!(
            book.find("transfer_funds", Some("conv-2"), Some("team-a"), t),
            None
        );
        assert_eq!(book.find("transfer_funds", None, Some("team-a"), t), None);
        assert_eq!(
            book.find("transfer_funds", Some("conv-1"), Some("team-b"), t),
            None
        );
        assert_eq!(book.find("transfer_funds", Some("conv-1"), None, t), None);

        let all = book.grant(req(&["*"]), "admin", T0).unwrap();
        assert_eq!(book.find("anything", None, None, t), Some(all.id));
    }

    #[test]
    fn argument_failures_are_overridden_only_when_the_grant_says_so() {
        let p = policy();
        let escape = ToolCall::new(
            "read_file",
            json!({"path": "/srv/app/docs/../../etc/passwd"}),
        );
        let book = BreakGlassBook::default();
        book.grant(req(&["read_file"]), "admin", T0).unwrap();
        let mut d = p.check(&escape, &CallContext::default());
        assert_eq!(d.action, ToolAction::Block);
        assert_eq!(book.apply(&mut d, "read_file", None, None, T0 + 1), None);
        assert_eq!(d.action, ToolAction::Block);

        let mut r = req(&["read_file"]);
        r.override_arguments = true;
        let g = book.grant(r, "admin", T0).unwrap();
        assert_eq!(
            book.apply(&mut d, "read_file", None, None, T0 + 1),
            Some(g.id)
        );
        assert_eq!(d.action, ToolAction::Allow);
    }

    #[test]
    fn unknown_tools_are_overridden() {
        let p = policy();
        let book = BreakGlassBook::default();
        book.grant(req(&["rm_rf"]), "admin", T0).unwrap();
        let mut d = p.check(&ToolCall::new("rm_rf", json!({})), &CallContext::default());
        assert_eq!(d.action, ToolAction::Block);
        assert!(book.apply(&mut d, "rm_rf", None, None, T0 + 1).is_some());
        assert_eq!(d.action, ToolAction::Allow);
    }

    #[test]
    fn revoked_grants_no_longer_apply() {
        let book = BreakGlassBook::default();
        let g = book.grant(req(&["transfer_funds"]), "admin", T0).unwrap();
        assert_eq!(
            book.revoke(&g.id.0, T0 + 1).unwrap().map(|x| x.id),
            Some(g.id.clone())
        );
        assert_eq!(book.revoke(&g.id.0, T0 + 1).unwrap(), None);
        assert_eq!(book.find("transfer_funds", None, None, T0 + 2), None);
    }

    #[test]
    fn requests_are_validated() {
        let book = BreakGlassBook::new(3600);
        let bad = |f: &dyn Fn(&mut GrantRequest)| {
            let mut r = req(&["x"]);
            f(&mut r);
            book.grant(r, "admin", T0).unwrap_err()
        };
        assert!(matches!(
            bad(&|r| r.reason = "  ".into()),
            GrantError::Invalid(_)
        ));
        assert!(matches!(
            bad(&|r| r.incident = String::new()),
            GrantError::Invalid(_)
        ));
        assert!(matches!(
            bad(&|r| r.reason = "x".repeat(MAX_REASON_CHARS + 1)),
            GrantError::Invalid(_)
        ));
        assert!(matches!(bad(&|r| r.tools.clear()), GrantError::Invalid(_)));
        assert!(matches!(
            bad(&|r| r.ttl_seconds = 0),
            GrantError::Invalid(_)
        ));
        assert!(matches!(
            bad(&|r| r.ttl_seconds = 3601),
            GrantError::Invalid(_)
        ));
        let e: Result<GrantRequest, _> = serde_json::from_str(
            r#"{"tools":["x"],"ttl_seconds":5,"reason":"r","incident":"i","scope":"all"}"#,
        );
        assert!(e.is_err());
    }
}
