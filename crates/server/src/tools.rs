//! Tool-call governance in the server: the `[tools]` section, the policy compiled once at
//! start, `POST /v1/tools/check`, the break-glass admin endpoints, approval tokens, and the
//! audit row of every tool decision. The proxy's enforcement (plain and streamed answers)
//! is in [`crate::tool_gate`]; one decision is [`rampart_output::tool_gate::ToolGate::decide`]
//! (policy, approval tokens bound to the caller's key and conversation, break-glass).
//! Every decision is written to the audit log's governance chain before it is answered.

use crate::api::{ApiBytes, ApiJson};
use crate::state::{AppState, Caller, ServiceError};
use axum::Json;
use axum::extract::{Extension, Path as AxumPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rampart_audit::{
    ApprovalEvent, ApprovalRefusedEvent, BreakGlassEndEvent, BreakGlassUseEvent, GovernanceEvent,
    GovernanceRecord, ToolCallOrigin, ToolDecisionEvent, ToolEndpoint,
};
use rampart_output::tool_gate::{PendingCall, ToolGate, ToolVerdict, arguments_of, binding};
use rampart_tools::{CallContext, CallerInfo, GrantError, GrantRequest, Policy, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Endpoint label of the check API (metrics, audit).
pub(crate) const EP_TOOLS_CHECK: &str = "/v1/tools/check";
/// Endpoint label of a tool call checked in a proxied answer.
pub(crate) const EP_PROXY_TOOL: &str = "/v1/chat/completions#tool_call";

/// Whose word counts for the caller's role and attributes (context conditions such as
/// `mfa = true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestCaller {
    /// The request's `caller` (check API) or `x-rampart-caller` header (proxy) is used,
    /// and what the API key pins (`[[auth.keys]] caller`) overrides it. Only for clients
    /// trusted to state who their user is (an application server that authenticated the
    /// user itself): any client could claim `{"role": "finance_manager"}`.
    Accept,
    /// Only what the API key pins counts; the request's is ignored (the default: a
    /// client's claim about itself is not evidence).
    #[default]
    Ignore,
}

/// `[tools]`: tool-call governance. Absent: `/v1/tools/check` and `/admin/breakglass`
/// answer 501 and the proxy passes tool calls through unchecked.
///
/// ```toml
/// [tools]
/// policy = "policies/coding_agent.toml"   # relative to this file; compiled once at start
/// approval_ttl_s = 600                    # approval tokens live this long
/// breakglass_max_ttl_s = 3600             # longest break-glass grant
/// max_calls = 64                          # calls per /v1/tools/check request
/// max_pending_approvals = 10000           # tokens issued and not yet used (memory bound)
/// max_pending_approvals_per_key = 1000    # one key's share of them
/// approval_webhook_url = "https://approvals.example/hook"  # optional, POSTed per new CONFIRM
/// request_caller = "ignore"               # ignore | accept (caller attributes from requests)
/// enforce_proxy = true                    # check tool calls in proxied answers
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// The tool policy file (`rampart tools lint` checks it). Relative: against the
    /// configuration file's directory.
    pub policy: PathBuf,
    /// Seconds an approval token is valid. Default 600.
    #[serde(default = "default_approval_ttl")]
    pub approval_ttl_s: u64,
    /// Longest TTL a break-glass grant may ask for, seconds. Default 3600.
    #[serde(default = "default_breakglass_max_ttl")]
    pub breakglass_max_ttl_s: u64,
    /// Most calls in one `/v1/tools/check` request. Default 64.
    #[serde(default = "default_max_calls")]
    pub max_calls: usize,
    /// Most approval tokens pending at once (issued, not used, not expired). Default 10000.
    #[serde(default = "default_max_pending")]
    pub max_pending_approvals: usize,
    /// Most approval tokens one API key may hold pending. Default 1000.
    #[serde(default = "default_max_pending_per_key")]
    pub max_pending_approvals_per_key: usize,
    /// An http(s) URL POSTed a JSON notice for every new pending approval (id, tool, risk,
    /// requesting key, expiry; never argument values), so approvers learn of it. Failures
    /// are logged, not retried: the approval stays listed at `GET /admin/approvals`.
    #[serde(default)]
    pub approval_webhook_url: Option<String>,
    /// Whether caller role and attributes given with a request count. Default `ignore`.
    #[serde(default)]
    pub request_caller: RequestCaller,
    /// Check the tool calls of proxied answers. Default true.
    #[serde(default = "default_true")]
    pub enforce_proxy: bool,
    /// The environment variable holding the approval tokens' key (64 hex digits), the same
    /// on every replica. Only with `[state] backend = "redis"` (where a token's single use
    /// is recorded in Redis); without it each process draws a random key.
    #[serde(default)]
    pub approval_key_env: Option<String>,
}

fn default_approval_ttl() -> u64 {
    600
}
fn default_breakglass_max_ttl() -> u64 {
    3600
}
fn default_max_calls() -> usize {
    64
}
fn default_max_pending() -> usize {
    10_000
}
fn default_max_pending_per_key() -> usize {
    1_000
}
fn default_true() -> bool {
    true
}

impl ToolsSection {
    /// Semantic checks that do not touch the filesystem.
    pub fn validate(&self) -> Result<(), ToolsConfigError> {
        if self.policy.as_os_str().is_empty() {
            return Err(ToolsConfigError::NoPolicy);
        }
        for (name, v) in [
            ("tools.approval_ttl_s", self.approval_ttl_s),
            ("tools.breakglass_max_ttl_s", self.breakglass_max_ttl_s),
            ("tools.max_calls", self.max_calls as u64),
            (
                "tools.max_pending_approvals",
                self.max_pending_approvals as u64,
            ),
            (
                "tools.max_pending_approvals_per_key",
                self.max_pending_approvals_per_key as u64,
            ),
        ] {
            if v == 0 {
                return Err(ToolsConfigError::Zero(name));
            }
        }
        if let Some(u) = &self.approval_webhook_url {
            let ok = url::Url::parse(u)
                .is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.host().is_some());
            if !ok {
                return Err(ToolsConfigError::Webhook(u.clone()));
            }
        }
        Ok(())
    }
}

/// A `[tools]` section that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolsConfigError {
    /// `policy` is empty.
    #[error("tools.policy must name the policy file")]
    NoPolicy,
    /// A count or duration (named) is zero.
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
    /// `approval_webhook_url` is not an http(s) URL.
    #[error("tools.approval_webhook_url `{0}` is not an http(s) URL")]
    Webhook(String),
}

/// Why tool governance could not be set up (a startup error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolsSetupError {
    /// The policy file could not be read.
    #[error("cannot read the tool policy {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The policy file is invalid.
    #[error("invalid tool policy {}", path.display())]
    Policy {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rampart_tools::PolicyError,
    },
    /// No randomness for the approval book's key.
    #[error("cannot create the approval key")]
    Random(#[source] rampart_tools::RandomError),
    /// The approval key variable is unset or not 64 hex digits.
    #[error("[tools] approval_key_env: the variable {0} must hold 64 hex digits (32 bytes)")]
    ApprovalKey(String),
}

/// The server's tool governance: `[tools]` and its gate (the compiled policy, the pending
/// approvals and the active break-glass grants). Lives as long as the process (a reload
/// keeps it).
#[derive(Debug)]
pub(crate) struct ToolGovernance {
    cfg: ToolsSection,
    gate: ToolGate,
}

/// 32 bytes from 64 hex digits.
fn hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    u64::try_from(rampart_audit::now_ms()).unwrap_or(0)
}

impl ToolGovernance {
    /// Builds governance from `[tools]` (none without the section): reads and compiles the
    /// policy; an unreadable or invalid policy is an error naming the file.
    pub(crate) fn from_config(
        cfg: &crate::config::ServerConfig,
        shared: Option<Arc<dyn rampart_state::SharedStore>>,
    ) -> Result<Option<ToolGovernance>, ToolsSetupError> {
        let Some(t) = &cfg.tools else {
            return Ok(None);
        };
        let path = cfg.resolve(&t.policy);
        let src = std::fs::read_to_string(&path).map_err(|source| ToolsSetupError::Read {
            path: path.clone(),
            source,
        })?;
        let policy =
            Policy::from_toml(&src).map_err(|source| ToolsSetupError::Policy { path, source })?;
        let mut builder = ToolGate::builder(policy)
            .approval_ttl_s(t.approval_ttl_s)
            .max_pending_approvals(t.max_pending_approvals)
            .max_pending_approvals_per_key(t.max_pending_approvals_per_key)
            .breakglass_max_ttl_s(t.breakglass_max_ttl_s);
        if let Some(store) = shared {
            let var = t.approval_key_env.clone().unwrap_or_default();
            let key = std::env::var(&var)
                .ok()
                .and_then(|v| hex32(v.trim()))
                .ok_or(ToolsSetupError::ApprovalKey(var))?;
            builder = builder.shared_state(store, key);
        }
        let gate = builder.build().map_err(ToolsSetupError::Random)?;
        Ok(Some(ToolGovernance {
            cfg: t.clone(),
            gate,
        }))
    }

    pub(crate) fn config(&self) -> &ToolsSection {
        &self.cfg
    }

    /// The gate that decides calls and holds approvals and break-glass grants.
    pub(crate) fn gate(&self) -> &ToolGate {
        &self.gate
    }

    /// The caller's role and attributes: the request's (when `request_caller = "accept"`),
    /// overridden by what the API key pins (role, and each pinned attribute).
    pub(crate) fn caller_info(
        &self,
        config: &crate::config::ServerConfig,
        key_id: Option<&str>,
        requested: Option<CallerInfo>,
    ) -> CallerInfo {
        let mut info = match self.cfg.request_caller {
            RequestCaller::Accept => requested.unwrap_or_default(),
            RequestCaller::Ignore => CallerInfo::default(),
        };
        let pinned = key_id.and_then(|id| {
            config
                .auth
                .keys
                .iter()
                .find(|k| k.id == id)
                .and_then(|k| k.caller.clone())
        });
        if let Some(p) = pinned {
            if p.role.is_some() {
                info.role = p.role;
            }
            info.attributes.extend(p.attributes);
        }
        info
    }
}

impl AppState {
    /// Writes one tool decision to the governance audit chain (and counts it), with the
    /// approval issued, redeemed or refused and the break-glass use it involved; an error
    /// when it cannot be written (the caller fails closed).
    pub(crate) async fn record_tool(
        &self,
        caller: &Caller,
        endpoint: ToolEndpoint,
        v: &ToolVerdict,
    ) -> Result<(), ServiceError> {
        self.metrics().observe_tool(
            match endpoint {
                ToolEndpoint::ToolsCheck => EP_TOOLS_CHECK,
                _ => EP_PROXY_TOOL,
            },
            v.action().name(),
        );
        if let Some(a) = v.approval.as_ref().filter(|_| !v.approval_pending) {
            self.notify_approvers(caller, v, a);
        }
        let Some(writer) = self.audit_writer() else {
            return Ok(());
        };
        self.audit_expired_grants(caller, now_ms()).await;
        let hasher = writer.hasher();
        let conversation = v.conversation.as_deref().map(|c| hasher.conversation(c));
        let call = ToolCall::new(v.tool.clone(), v.arguments.clone().unwrap_or(Value::Null));
        let mut events = Vec::with_capacity(3);
        if let Some(e) = &v.approval_error {
            events.push(GovernanceEvent::ApprovalRefused(ApprovalRefusedEvent {
                request_id: caller.request_id.clone(),
                key_id: caller.key_id.clone(),
                conversation: conversation.clone(),
                tool: v.tool.clone(),
                reason: e.name.into(),
            }));
        }
        let approval = |id: String, expires_ms: u64| ApprovalEvent {
            approval_id: id,
            request_id: caller.request_id.clone(),
            key_id: caller.key_id.clone(),
            conversation: conversation.clone(),
            tool: v.tool.clone(),
            arguments_hash: v.arguments_hash.clone(),
            expires_ms,
        };
        if let Some(id) = &v.decision.approval_id {
            events.push(GovernanceEvent::ApprovalRedeemed(approval(
                id.0.clone(),
                v.redeemed_expires_ms,
            )));
        }
        if let (Some(id), Some(overridden)) = (&v.decision.breakglass_id, v.overridden) {
            events.push(GovernanceEvent::BreakglassUsed(BreakGlassUseEvent {
                breakglass_id: id.0.clone(),
                request_id: caller.request_id.clone(),
                key_id: caller.key_id.clone(),
                conversation: conversation.clone(),
                tool: v.tool.clone(),
                overridden,
            }));
        }
        events.push(GovernanceEvent::ToolDecision(ToolDecisionEvent::new(
            &call,
            &v.decision,
            ToolCallOrigin {
                request_id: &caller.request_id,
                key_id: caller.key_id.as_deref(),
                endpoint,
                conversation: v.conversation.as_deref(),
            },
            hasher,
        )));
        if let Some(a) = v.approval.as_ref().filter(|_| !v.approval_pending) {
            events.push(GovernanceEvent::ApprovalIssued(approval(
                a.id.0.clone(),
                a.expires_ms,
            )));
        }
        for e in events {
            self.append_governance(caller, e).await?;
        }
        Ok(())
    }

    /// Appends one governance row; a full (after the configured wait) or closed writer is
    /// 503.
    pub(crate) async fn append_governance(
        &self,
        caller: &Caller,
        event: GovernanceEvent,
    ) -> Result<(), ServiceError> {
        let Some(writer) = self.audit_writer() else {
            return Ok(());
        };
        let rec = GovernanceRecord::new(rampart_audit::now_ms(), event);
        match writer.append_governance(rec).await {
            Ok(_) => {
                self.metrics().audit_ok();
                Ok(())
            }
            Err(e) => {
                let kind = match e {
                    rampart_audit::AuditError::Full => "full",
                    rampart_audit::AuditError::Closed => "closed",
                    _ => "error",
                };
                self.metrics().audit_failed(kind);
                tracing::error!(request_id = %caller.request_id, error = %e, "governance audit append failed");
                Err(ServiceError::Unavailable(format!(
                    "the decision could not be written to the audit log ({kind}); retry later"
                )))
            }
        }
    }

    /// Writes an `EXPIRE` row for each grant that expired since the last look (best
    /// effort: the grant's row already holds its expiry).
    pub(crate) async fn audit_expired_grants(&self, caller: &Caller, now_ms: u64) {
        let Some(gov) = self.tools() else { return };
        for g in gov.gate().take_expired(now_ms) {
            let ev = GovernanceEvent::BreakglassExpired(BreakGlassEndEvent {
                breakglass_id: g.id.0.clone(),
                by: None,
            });
            if let Err(e) = self.append_governance(caller, ev).await {
                tracing::error!(id = %g.id, error = %e, "a break-glass expiry could not be audited");
            }
        }
    }

    fn tools_or_501(&self) -> Result<&Arc<ToolGovernance>, ServiceError> {
        self.tools().ok_or_else(|| {
            ServiceError::NotImplemented(
                "tool governance is not configured: add a [tools] section with a policy".into(),
            )
        })
    }
}

/// One call of a `/v1/tools/check` request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckCall {
    #[serde(default)]
    id: Option<String>,
    tool: String,
    #[serde(default)]
    arguments: Value,
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    context: CheckContext,
    #[serde(default)]
    caller: Option<CallerInfo>,
    #[serde(default)]
    approval_token: Option<String>,
    /// The conversation so far, as OpenAI (or Anthropic) `messages`: argument values are
    /// attributed against it (provenance), its tool results are scanned for the spans and
    /// score flow rules read, and its assistant calls count as `tools_called`.
    #[serde(default)]
    messages: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckContext {
    #[serde(default)]
    max_injection_score: Option<f32>,
    #[serde(default)]
    tools_called: Vec<String>,
}

/// Longest tool name, conversation id or token accepted.
const MAX_NAME_BYTES: usize = 256;
/// Most entries of `context.tools_called`.
const MAX_TOOLS_CALLED: usize = 10_000;

async fn check_one(
    state: &AppState,
    gov: &ToolGovernance,
    caller: &Caller,
    item: Value,
) -> Result<Value, ServiceError> {
    let call: CheckCall = serde_json::from_value(item)
        .map_err(|e| ServiceError::BadRequest(crate::api::json_error_message(&e)))?;
    if call.tool.trim().is_empty() || call.tool.len() > MAX_NAME_BYTES {
        return Err(ServiceError::BadRequest(format!(
            "\"tool\" must be a name of 1 to {MAX_NAME_BYTES} bytes"
        )));
    }
    if call
        .conversation_id
        .as_ref()
        .is_some_and(|c| c.len() > MAX_NAME_BYTES)
        || call
            .approval_token
            .as_ref()
            .is_some_and(|c| c.len() > MAX_NAME_BYTES)
    {
        return Err(ServiceError::BadRequest(format!(
            "\"conversation_id\" and \"approval_token\" are at most {MAX_NAME_BYTES} bytes"
        )));
    }
    if call.context.tools_called.len() > MAX_TOOLS_CALLED {
        return Err(ServiceError::TooLarge(format!(
            "context.tools_called has more than {MAX_TOOLS_CALLED} entries"
        )));
    }
    if call
        .context
        .max_injection_score
        .is_some_and(|s| !(0.0..=1.0).contains(&s))
    {
        return Err(ServiceError::BadRequest(
            "context.max_injection_score must be in [0, 1]".into(),
        ));
    }
    let config = state.config();
    let key = caller.key_id.as_deref();
    let mut context = CallContext {
        max_injection_score: call.context.max_injection_score,
        tools_called: call.context.tools_called,
        caller: gov.caller_info(&config, key, call.caller),
        now_ms: None,
        conversation: None,
    };
    if let Some(messages) = &call.messages {
        read_messages(state, messages, &mut context).await?;
    }
    let tokens: Vec<String> = call.approval_token.into_iter().collect();
    let v = gov.gate().decide(
        PendingCall {
            tool: &call.tool,
            arguments: arguments_of(&call.arguments),
            conversation: call.conversation_id.as_deref(),
            binding: binding(key, call.conversation_id.as_deref()),
            caller_key: key,
            context,
            tokens: &tokens,
        },
        now_ms(),
    );
    // An unrecorded decision is not answered (503).
    state
        .record_tool(caller, ToolEndpoint::ToolsCheck, &v)
        .await?;
    Ok(v.answer(call.id.as_deref()))
}

/// A check call's `messages`: the conversation for provenance, with its tool results and
/// documents scanned by the pipeline (their flagged spans, and the highest score as the
/// floor of `max_injection_score`); its assistant calls join `tools_called`. Messages that
/// are not a conversation, or too large for provenance, are a 400 / 413.
async fn read_messages(
    state: &AppState,
    messages: &Value,
    context: &mut CallContext,
) -> Result<(), ServiceError> {
    use rampart_output::tool_gate::CallConversation;
    use rampart_tools::provenance::ProvenanceError;
    let too_large = |e: ProvenanceError| match e {
        ProvenanceError::TooLarge { .. } => ServiceError::TooLarge(format!("messages: {e}")),
        _ => ServiceError::BadRequest(format!("messages: {e}")),
    };
    let mut read = CallConversation::read(messages).map_err(too_large)?;
    let segments = read.segments();
    let decision = if segments.is_empty() {
        None
    } else {
        Some(
            state
                .scan(rampart_core::ScanRequest::segments(segments))
                .await?
                .decision,
        )
    };
    read.into_context(decision.as_ref(), context)
        .map_err(too_large)?;
    Ok(())
}

/// `POST /v1/tools/check`: one call, or `{"calls": [...]}`.
pub(crate) async fn check(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiBytes(bytes): ApiBytes,
) -> Result<Response, ServiceError> {
    let gov = state.tools_or_501()?.clone();
    // Strict: a key given twice (or two keys equal after case and width folding) would be
    // read one way here and another by the tool.
    let body = rampart_tools::strict::from_slice(&bytes)
        .map_err(|e| ServiceError::BadRequest(crate::api::json_error_message(&e)))?;
    let Value::Object(mut m) = body else {
        return Err(ServiceError::BadRequest(
            "the body must be a call object or {\"calls\": [...]}".into(),
        ));
    };
    let Some(calls) = m.remove("calls") else {
        let v = check_one(&state, &gov, &caller, Value::Object(m)).await?;
        return Ok(Json(v).into_response());
    };
    if !m.is_empty() {
        return Err(ServiceError::BadRequest(
            "a batch is {\"calls\": [...]} with no other field".into(),
        ));
    }
    let Value::Array(calls) = calls else {
        return Err(ServiceError::BadRequest(
            "\"calls\" must be an array".into(),
        ));
    };
    let max = gov.config().max_calls;
    if calls.len() > max {
        return Err(ServiceError::TooLarge(format!(
            "batch has {} calls; the limit is {max} (tools.max_calls)",
            calls.len()
        )));
    }
    if calls.is_empty() {
        return Err(ServiceError::BadRequest("batch has no calls".into()));
    }
    let mut results = Vec::with_capacity(calls.len());
    let mut errors = 0usize;
    for (index, item) in calls.into_iter().enumerate() {
        let item_caller = Caller {
            request_id: format!("{}#{index}", caller.request_id),
            key_id: caller.key_id.clone(),
        };
        match check_one(&state, &gov, &item_caller, item).await {
            Ok(v) => results.push(v),
            Err(e) => {
                errors += 1;
                let mut v = e.body();
                if let Value::Object(m) = &mut v {
                    m.insert("index".into(), index.into());
                    m.insert("status".into(), e.status().as_u16().into());
                }
                results.push(v);
            }
        }
    }
    Ok(Json(json!({"results": results, "errors": errors})).into_response())
}

/// `POST /admin/breakglass`: grants a scoped override (201 with the grant).
pub(crate) async fn breakglass_grant(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<GrantRequest>,
) -> Result<Response, ServiceError> {
    let gov = state.tools_or_501()?.clone();
    let now = now_ms();
    state.audit_expired_grants(&caller, now).await;
    let by = caller.key_id.as_deref().unwrap_or("-");
    let g = gov.gate().grant(req, by, now).map_err(|e| match e {
        GrantError::Invalid(_) => ServiceError::BadRequest(e.to_string()),
        GrantError::Full(_) | GrantError::Unavailable(_) => {
            ServiceError::Unavailable(e.to_string())
        }
        _ => ServiceError::Internal(e.to_string()),
    })?;
    if let Err(e) = state
        .append_governance(&caller, GovernanceEvent::BreakglassGranted(g.clone()))
        .await
    {
        // An unaudited grant must not stay in force.
        if let Err(revoke) = gov.gate().revoke(&g.id.0, now) {
            tracing::error!(id = %g.id, error = %revoke, "an unaudited break-glass grant could not be revoked");
        }
        return Err(e);
    }
    tracing::warn!(id = %g.id, incident = %g.incident, by = ?g.granted_by, "break-glass granted");
    Ok((StatusCode::CREATED, Json(g)).into_response())
}

/// `GET /admin/breakglass`: the active grants.
pub(crate) async fn breakglass_list(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ServiceError> {
    let gov = state.tools_or_501()?;
    let now = now_ms();
    state.audit_expired_grants(&caller, now).await;
    let grants = gov
        .gate()
        .active_grants(now)
        .map_err(|e| ServiceError::Unavailable(e.to_string()))?;
    Ok(Json(json!({ "grants": grants })))
}

/// `DELETE /admin/breakglass/{id}`: revokes a grant (the revoked grant; 404 when unknown).
pub(crate) async fn breakglass_revoke(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    AxumPath(id): AxumPath<String>,
) -> Result<Json<Value>, ServiceError> {
    let gov = state.tools_or_501()?.clone();
    let now = now_ms();
    state.audit_expired_grants(&caller, now).await;
    let revoked = gov
        .gate()
        .revoke(&id, now)
        .map_err(|e| ServiceError::Unavailable(e.to_string()))?;
    let Some(g) = revoked else {
        return Err(ServiceError::UnknownId(format!(
            "no active break-glass grant {id:?}"
        )));
    };
    state
        .append_governance(
            &caller,
            GovernanceEvent::BreakglassRevoked(BreakGlassEndEvent {
                breakglass_id: g.id.0.clone(),
                by: caller.key_id.clone(),
            }),
        )
        .await?;
    tracing::warn!(id = %g.id, "break-glass revoked");
    Ok(Json(json!({"revoked": g})))
}

impl AppState {
    /// POSTs the new pending approval's notice to `[tools] approval_webhook_url`, in the
    /// background (the call's answer does not wait): id, tool, risk, requesting key and
    /// expiry, never argument values. A failure is logged; the approval stays listed.
    fn notify_approvers(&self, caller: &Caller, v: &ToolVerdict, a: &rampart_tools::ApprovalGrant) {
        let Some(url) = self
            .tools()
            .and_then(|g| g.config().approval_webhook_url.clone())
        else {
            return;
        };
        let notice = json!({
            "event": "approval_pending",
            "approval_id": a.id,
            "tool": v.tool,
            "risk": v.decision.risk.map(|r| r.name()),
            "rules": v.decision.rules,
            "requested_by": caller.key_id,
            "request_id": caller.request_id,
            "expires_at_ms": a.expires_ms,
        });
        let client = self.http_client().clone();
        let id = a.id.clone();
        tokio::spawn(async move {
            let sent = client
                .post(&url)
                .timeout(std::time::Duration::from_secs(5))
                .json(&notice)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            if let Err(e) = sent {
                tracing::warn!(approval = %id, error = %e, "approval webhook failed");
            }
        });
    }
}

/// The approval as an approver sees it: the call with its arguments, who asked, where it
/// stands, and its expiry.
fn approval_view(p: &rampart_tools::PendingApproval) -> Value {
    let mut v = json!(p);
    if let Value::Object(m) = &mut v {
        let ms = i64::try_from(p.expires_ms).unwrap_or(i64::MAX);
        m.insert(
            "expires_at".into(),
            json!(
                rampart_core::timefmt::UtcTime::from_unix_ms(ms).map_or_else(
                    || ms.to_string(),
                    |t| t.to_rfc3339(rampart_core::timefmt::Precision::Millis)
                )
            ),
        );
    }
    v
}

/// `GET /admin/approvals`: the approvals waiting for an approver, oldest first, with
/// their arguments (approver and admin keys only).
pub(crate) async fn approvals_list(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ServiceError> {
    let gov = state.tools_or_501()?;
    let pending: Vec<Value> = gov
        .gate()
        .approvals()
        .pending(now_ms())
        .map_err(|e| ServiceError::Unavailable(e.to_string()))?
        .iter()
        .map(approval_view)
        .collect();
    Ok(Json(json!({ "approvals": pending })))
}

/// `POST /admin/approvals/{id}/approve`: the approver's key approves another key's call;
/// its token redeems once.
pub(crate) async fn approval_approve(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    AxumPath(id): AxumPath<String>,
) -> Result<Json<Value>, ServiceError> {
    decide_approval(&state, &caller, &id, true).await
}

/// `POST /admin/approvals/{id}/deny`: the approver's key denies it; its token never
/// redeems.
pub(crate) async fn approval_deny(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    AxumPath(id): AxumPath<String>,
) -> Result<Json<Value>, ServiceError> {
    decide_approval(&state, &caller, &id, false).await
}

async fn decide_approval(
    state: &AppState,
    caller: &Caller,
    id: &str,
    approve: bool,
) -> Result<Json<Value>, ServiceError> {
    use rampart_tools::ApprovalError;
    let gov = state.tools_or_501()?.clone();
    let book = gov.gate().approvals();
    let by = caller.key_id.as_deref().unwrap_or_default();
    let now = now_ms();
    let result = if approve {
        book.approve(id, by, now)
    } else {
        book.deny(id, by, now)
    };
    let p = result.map_err(|e| match e {
        ApprovalError::Unknown => ServiceError::UnknownId(format!("no pending approval {id:?}")),
        ApprovalError::SelfApproval => ServiceError::Forbidden(e.to_string()),
        ApprovalError::AlreadyDecided => ServiceError::Conflict(e.to_string()),
        ApprovalError::Unavailable(_) => ServiceError::Unavailable(e.to_string()),
        other => ServiceError::Internal(other.to_string()),
    })?;
    let event = rampart_audit::ApprovalDecisionEvent {
        approval_id: p.id.0.clone(),
        request_id: caller.request_id.clone(),
        by: caller.key_id.clone(),
        requested_by: p.requested_by.clone(),
        tool: p.tool.clone(),
        arguments_hash: p.arguments_hash.clone(),
    };
    let event = if approve {
        GovernanceEvent::ApprovalApproved(event)
    } else {
        GovernanceEvent::ApprovalDenied(event)
    };
    if let Err(e) = state.append_governance(caller, event).await {
        // An unaudited approval must not stay in force: deny it instead (an approver can
        // ask the agent to call again).
        if approve {
            let _ = book.deny_after_failure(id, now);
        }
        return Err(e);
    }
    tracing::warn!(approval = %p.id, by = %by, approved = approve, "approval decided");
    Ok(Json(json!({ "approval": approval_view(&p) })))
}
