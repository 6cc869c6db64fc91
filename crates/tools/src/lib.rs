//! Rampart's tool-call governance (issue 21): a strict, versioned policy of tools, typed
//! argument predicates, context conditions, rate limits and flow rules, compiled once and
//! checked per call.
//!
//! Deny by default: a tool the policy does not name gets `default` (shipped: `block`); a
//! constrained argument that is missing fails; a context condition that cannot be evaluated
//! (a time window and no time) fails; arguments nested deeper than [`MAX_ARGUMENT_DEPTH`] or
//! larger than [`MAX_ARGUMENT_BYTES`] BLOCK. Every decision says which rules decided, which
//! argument failed (by name and check, never its value) and the tool's risk. `DESIGN.md`
//! has the order of a check and the language.
//!
//! ```
//! use rampart_tools::{CallContext, CallerInfo, Policy, ToolAction, ToolCall, lint};
//! use serde_json::json;
//!
//! let src = r#"
//! version = 1
//!
//! [[tools]]
//! name = "read_file"
//! risk = "low"
//! action = "allow"
//! args.path = { path_under = ["/srv/app/docs"] }
//!
//! [[tools]]
//! name = "transfer_funds"
//! risk = "critical"
//! action = "confirm"
//! args.amount = { range = [0.01, 10000] }
//! max_calls_per_conversation = 3           # TOOL_RATE
//! requires = { role_in = ["treasurer"], attributes = { mfa = true } }   # TOOL_CONTEXT
//!
//! [[flows]]                                # no transfer after reading a file
//! id = "NO_TRANSFER_AFTER_READ"
//! after = { tool_called = "read_file" }
//! tools = ["transfer_funds"]
//! action = "block"
//! "#;
//! assert!(lint(src).findings.is_empty());
//! let policy = Policy::from_toml(src)?;
//!
//! let ok = ToolCall::new("read_file", json!({"path": "/srv/app/docs/a.md"}));
//! assert_eq!(policy.check(&ok, &CallContext::default()).action, ToolAction::Allow);
//! let escape = ToolCall::new("read_file", json!({"path": "/srv/app/docs/%2e%2e/%2e%2e/secrets"}));
//! let d = policy.check(&escape, &CallContext::default());
//! assert_eq!((d.action, d.failed_argument.as_deref()), (ToolAction::Block, Some("path")));
//! let unknown = ToolCall::new("rm_rf", json!({}));
//! assert_eq!(policy.check(&unknown, &CallContext::default()).action, ToolAction::Block);
//!
//! // Context: the caller's role and attributes come with the request.
//! let transfer = ToolCall::new("transfer_funds", json!({"amount": 250}));
//! let mut ctx = CallContext {
//!     caller: CallerInfo {
//!         role: Some("treasurer".into()),
//!         attributes: [("mfa".to_string(), json!(true))].into(),
//!     },
//!     ..CallContext::default()
//! };
//! assert_eq!(policy.check(&transfer, &ctx).action, ToolAction::Confirm);
//! ctx.caller.attributes.insert("mfa".into(), json!(false));
//! assert_eq!(policy.check(&transfer, &ctx).rules, ["TOOL_ACTION", "TOOL_CONTEXT"]);
//! ctx.caller.attributes.insert("mfa".into(), json!(true));
//! // The conversation so far (the server keeps it): a file was read, so no transfer.
//! ctx.tools_called.push("read_file".into());
//! assert_eq!(policy.check(&transfer, &ctx).action, ToolAction::Block);
//!
//! // OpenAI's `function.arguments` text: parsed with bounds; garbage BLOCKs.
//! let d = policy.check_raw("read_file", "{\"path\": ", &CallContext::default());
//! assert_eq!(d.rules, ["TOOL_ACTION", "TOOL_ARGS_SHAPE"]);
//!
//! // A typo is named, with the key meant.
//! let e = Policy::from_toml("version = 1\ndefualt = \"block\"").unwrap_err();
//! assert!(e.to_string().contains("did you mean `default`?"));
//! # Ok::<(), rampart_tools::PolicyError>(())
//! ```

mod approval;
mod breakglass;
mod origin;
mod policy;
mod predicate;

pub use approval::{
    ApprovalBook, ApprovalError, ApprovalGrant, ApprovalId, ApprovalState, DEFAULT_APPROVAL_TTL_MS,
    MAX_OUTSTANDING, PendingApproval, RULE_APPROVED, RandomError, TOKEN_PREFIX, apply_approval,
    argument_hashes, arguments_hash, canonical_arguments, random_key,
};
pub use breakglass::{
    ALL_TOOLS, BreakGlassBook, BreakGlassGrant, BreakGlassId, BreakGlassScope,
    DEFAULT_MAX_TTL_SECONDS, GrantError, GrantRequest, MAX_ACTIVE_GRANTS, MAX_GRANT_TOOLS,
    MAX_INCIDENT_CHARS, MAX_REASON_CHARS, MAX_SCOPE_CHARS, RULE_BREAK_GLASS, apply_breakglass,
};
pub use origin::{ProvenanceCheck, RULE_PROVENANCE, SharedConversation};
pub use policy::{
    FlowCondition, FlowSpec, POLICY_VERSION, PolicyFile, PredicateSpec, ProvenanceDefault,
    ProvenanceRequirement, ProvenanceSpec, RECIPIENT_KINDS, Risk, ToolAction, ToolSpec,
};
pub use predicate::{Failure, Predicate, PredicateError, plain_path};
/// The attribution engine the provenance requirements use.
pub use rampart_provenance as provenance;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::ControlFlow;

mod arguments;
mod condition;
mod lint;
pub mod strict;

pub use arguments::{ArgumentsError, MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH, parse_arguments};
pub use condition::ConditionError;
pub use lint::{Finding, LintCode, LintReport, Location, Severity, lint};
pub use policy::{
    AttributeMatch, ConditionSpec, Escalation, RequirementSpec, TimeWindowSpec, Weekday,
};

/// Rule id of the default for tools the policy does not name.
pub const RULE_UNKNOWN_TOOL: &str = "TOOL_UNKNOWN";
/// Rule id of a tool's own action.
pub const RULE_TOOL_ACTION: &str = "TOOL_ACTION";
/// Rule id of an argument that failed its predicate.
pub const RULE_ARGUMENT: &str = "TOOL_ARG";
/// Rule id of arguments that are not a JSON object, or nested too deep, or too large.
pub const RULE_ARGUMENTS_SHAPE: &str = "TOOL_ARGS_SHAPE";
/// Rule id of a tool's own context condition (`requires`) that did not hold.
pub const RULE_CONTEXT: &str = "TOOL_CONTEXT";
/// Rule id of a call over the tool's `max_calls_per_conversation`.
pub const RULE_RATE: &str = "TOOL_RATE";

/// Why a policy could not be built. Every message names where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Not valid TOML, or not the schema (unknown keys are errors).
    #[error("policy: {0}")]
    Parse(String),
    /// An unsupported schema version.
    #[error("policy: version {found} is not supported (this build reads version {POLICY_VERSION})")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// A tool without a name.
    #[error("policy: tools[{0}] has an empty name")]
    EmptyName(usize),
    /// Two tools with one name.
    #[error("policy: tool `{0}` is defined twice")]
    Duplicate(String),
    /// A predicate that cannot be compiled.
    #[error("policy: tool `{tool}`, argument `{arg}`: {source}")]
    Predicate {
        /// The tool.
        tool: String,
        /// The argument.
        arg: String,
        /// Why.
        source: PredicateError,
    },
    /// A flow rule that concerns no tool, or has no condition.
    #[error("policy: flows[{index}]: {message}")]
    Flow {
        /// Its index.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A context condition that cannot be compiled (a tool's `requires`, or
    /// `conditions[i]`).
    #[error("policy: {place}: {source}")]
    Condition {
        /// Where: ``tool `x` `` or `conditions[i]`.
        place: String,
        /// Why.
        source: ConditionError,
    },
    /// A `[[conditions]]` entry that concerns no tool.
    #[error("policy: conditions[{0}] names no tools (`tools_at_or_above` or `tools`)")]
    ConditionTools(usize),
    /// A `[provenance]` section, or an argument's provenance keys, that cannot be used.
    #[error("policy: provenance: {0}")]
    Provenance(String),
}

/// One call to check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's name.
    pub tool: String,
    /// The arguments (a JSON object). Read strictly: a key given twice, or two keys equal
    /// after case and width folding, is an error ([`strict`]).
    #[serde(default, deserialize_with = "strict::deserialize")]
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// A call.
    pub fn new(tool: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self {
            tool: tool.into(),
            arguments,
        }
    }
}

/// What is known about the conversation the call belongs to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallContext {
    /// The highest injection score of any tool result or retrieved document so far.
    #[serde(default)]
    pub max_injection_score: Option<f32>,
    /// Tools called earlier in the conversation, in order (rate limits count these).
    #[serde(default)]
    pub tools_called: Vec<String>,
    /// Who is calling: role and attributes given with the request (context conditions).
    #[serde(default)]
    pub caller: CallerInfo,
    /// The time of the call, Unix milliseconds (time-window conditions). The server and the
    /// CLI always set it; a policy with a time window and no time given fails closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now_ms: Option<u64>,
    /// The conversation the call belongs to, as the server read it from the request:
    /// provenance requirements attribute argument values against it. Never read from a
    /// client's `context` (a client could call anything trusted); without it every
    /// requirement but `any` fails closed.
    #[serde(skip)]
    pub conversation: Option<SharedConversation>,
}

/// The caller's role and attributes, as the application states them (for example
/// `{"role": "admin", "attributes": {"mfa": true}}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerInfo {
    /// The caller's role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Attributes: scalars (bool, number, string).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, serde_json::Value>,
}

/// The answer for one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDecision {
    /// ALLOW, CONFIRM or BLOCK.
    pub action: ToolAction,
    /// The tool's risk (`None`: the policy does not name it).
    pub risk: Option<Risk>,
    /// The rules that decided (ids), in the order they were applied.
    pub rules: Vec<String>,
    /// The first argument that failed, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_argument: Option<String>,
    /// The check it failed (`path_under`, `missing`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_check: Option<String>,
    /// One line per rule that applied (no argument values).
    pub reasons: Vec<String>,
    /// The redeemed approval that turned CONFIRM into ALLOW.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<ApprovalId>,
    /// The break-glass grant that overrode the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakglass_id: Option<BreakGlassId>,
    /// The argument values a provenance requirement concerned: where each came from and
    /// whether it held (never the value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<ProvenanceCheck>,
}

#[derive(Debug, Clone)]
struct CompiledTool {
    risk: Risk,
    action: ToolAction,
    args: BTreeMap<String, Predicate>,
    /// The constrained arguments' names folded (`strict::fold_key`), with the name.
    folded_args: Vec<(String, String)>,
    requires: Option<(condition::Requirement, ToolAction)>,
    rate: Option<(usize, ToolAction)>,
    /// Arguments' own provenance requirements.
    provenance: BTreeMap<String, (ProvenanceRequirement, ToolAction)>,
}

#[derive(Debug, Clone)]
struct CompiledFlow {
    id: String,
    spec: FlowSpec,
    unless_args: BTreeMap<String, Predicate>,
}

#[derive(Debug, Clone)]
struct CompiledCondition {
    id: String,
    tools_at_or_above: Option<Risk>,
    tools: Vec<String>,
    requires: condition::Requirement,
    otherwise: ToolAction,
}

/// A compiled policy. Immutable, `Send + Sync`: build once, share in an `Arc`.
#[derive(Debug, Clone)]
pub struct Policy {
    default: ToolAction,
    tools: BTreeMap<String, CompiledTool>,
    flows: Vec<CompiledFlow>,
    conditions: Vec<CompiledCondition>,
    provenance: origin::Provenance,
}

fn compile_args(
    specs: &BTreeMap<String, PredicateSpec>,
    tool: &str,
) -> Result<BTreeMap<String, Predicate>, PolicyError> {
    specs
        .iter()
        // An argument with only provenance keys has no value predicate.
        .filter(|(_, spec)| spec.checks_value() || spec.provenance.is_none())
        .map(|(arg, spec)| {
            Predicate::compile(spec)
                .map(|p| (arg.clone(), p))
                .map_err(|source| PolicyError::Predicate {
                    tool: tool.to_string(),
                    arg: arg.clone(),
                    source,
                })
        })
        .collect()
}

impl Policy {
    /// The names of the tools the policy lists, sorted.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Parses and compiles a policy file's text. An unknown key is named, with the key
    /// meant where one is close (`pth_under`: did you mean `path_under`?).
    pub fn from_toml(src: &str) -> Result<Self, PolicyError> {
        Self::compile(lint::parse(src)?)
    }

    /// Compiles a parsed policy (the checks `rampart tools lint` reports).
    pub fn compile(file: PolicyFile) -> Result<Self, PolicyError> {
        if file.version != POLICY_VERSION {
            return Err(PolicyError::Version {
                found: file.version,
            });
        }
        let documents = file
            .tools
            .iter()
            .filter_map(|t| {
                t.document_argument
                    .as_ref()
                    .map(|a| (t.name.trim().to_string(), a.clone()))
            })
            .collect();
        let mut tools = BTreeMap::new();
        for (i, t) in file.tools.into_iter().enumerate() {
            let name: String = t.name.trim().to_string();
            if name.is_empty() {
                return Err(PolicyError::EmptyName(i));
            }
            let args = compile_args(&t.args, &name)?;
            let requires = t
                .requires
                .as_ref()
                .map(|r| {
                    condition::Requirement::compile(r)
                        .map(|c| (c, t.otherwise.unwrap_or_default().into()))
                        .map_err(|source| PolicyError::Condition {
                            place: format!("tool `{name}`"),
                            source,
                        })
                })
                .transpose()?;
            let rate = t.max_calls_per_conversation.map(|n| {
                (
                    usize::try_from(n).unwrap_or(usize::MAX),
                    t.over_limit.unwrap_or_default().into(),
                )
            });
            let folded_args = args
                .keys()
                .map(|a| (strict::fold_key(a).into_owned(), a.clone()))
                .collect();
            let provenance = t
                .args
                .iter()
                .filter_map(|(a, spec)| origin::own_requirement(spec).map(|r| (a.clone(), r)))
                .collect();
            let compiled = CompiledTool {
                risk: t.risk,
                action: t.action,
                args,
                folded_args,
                requires,
                rate,
                provenance,
            };
            if tools.insert(name.clone(), compiled).is_some() {
                return Err(PolicyError::Duplicate(name));
            }
        }
        let mut flows = Vec::new();
        for (index, f) in file.flows.into_iter().enumerate() {
            let flow_err = |message: String| PolicyError::Flow { index, message };
            if f.tools_at_or_above.is_none() && f.tools.as_ref().is_none_or(Vec::is_empty) {
                return Err(flow_err(
                    "names no tools (`tools_at_or_above` or `tools`)".into(),
                ));
            }
            if f.after.injection_score_at_least.is_none()
                && f.after.tool_called.is_none()
                && f.after.tool_called_any.is_none()
            {
                return Err(flow_err("`after` has no condition".into()));
            }
            if f.after.tool_called_any.as_ref().is_some_and(Vec::is_empty) {
                return Err(flow_err("`tool_called_any` must not be empty".into()));
            }
            if let Some(s) = f.after.injection_score_at_least
                && !(0.0..=1.0).contains(&s)
            {
                return Err(flow_err(format!(
                    "injection_score_at_least must be in [0, 1], got {s}"
                )));
            }
            if let Some(arg) = f
                .unless_args
                .iter()
                .find(|(_, p)| p.provenance.is_some() || p.provenance_otherwise.is_some())
                .map(|(a, _)| a)
            {
                return Err(flow_err(format!(
                    "unless_args `{arg}`: provenance keys apply to a tool's `args` only"
                )));
            }
            let unless_args = f
                .unless_args
                .iter()
                .map(|(arg, spec)| {
                    Predicate::compile(spec)
                        .map(|p| (arg.clone(), p))
                        .map_err(|e| flow_err(format!("unless_args `{arg}`: {e}")))
                })
                .collect::<Result<BTreeMap<_, _>, _>>()?;
            flows.push(CompiledFlow {
                id: f.id.clone().unwrap_or_else(|| format!("FLOW_{index}")),
                spec: f,
                unless_args,
            });
        }
        if let Some(e) = file.provenance.as_ref().and_then(origin::section_error) {
            return Err(PolicyError::Provenance(e));
        }
        let provenance = origin::Provenance::compile(file.provenance.as_ref(), documents);
        let mut conditions = Vec::new();
        for (index, c) in file.conditions.into_iter().enumerate() {
            let tools = c.tools.unwrap_or_default();
            if c.tools_at_or_above.is_none() && tools.is_empty() {
                return Err(PolicyError::ConditionTools(index));
            }
            let requires = condition::Requirement::compile(&c.requires).map_err(|source| {
                PolicyError::Condition {
                    place: format!("conditions[{index}]"),
                    source,
                }
            })?;
            conditions.push(CompiledCondition {
                id: c.id.unwrap_or_else(|| format!("CONTEXT_{index}")),
                tools_at_or_above: c.tools_at_or_above,
                tools,
                requires,
                otherwise: c.otherwise.into(),
            });
        }
        Ok(Self {
            default: file.default,
            tools,
            flows,
            conditions,
            provenance,
        })
    }

    /// Checks one call, escalating only (a later rule never lowers an earlier action):
    /// the tool's own action (or the default for unknown tools); the arguments' shape
    /// (depth, size) and predicates (any failure BLOCKs); the provenance of their values
    /// (`TOOL_PROVENANCE`, against [`CallContext::conversation`]); the tool's context condition
    /// (`TOOL_CONTEXT`) and the policy's `[[conditions]]`; the tool's rate limit
    /// (`TOOL_RATE`); then the flow rules. Stops at the first BLOCK.
    pub fn check(&self, call: &ToolCall, ctx: &CallContext) -> ToolDecision {
        let mut d = ToolDecision {
            action: ToolAction::Allow,
            risk: None,
            rules: Vec::new(),
            failed_argument: None,
            failed_check: None,
            reasons: Vec::new(),
            approval_id: None,
            breakglass_id: None,
            provenance: Vec::new(),
        };
        // `Break` is the first BLOCK; `d` holds the decision either way.
        let _ = self.check_steps(&mut d, call, ctx);
        d
    }

    /// The steps of [`Policy::check`], in order, until one BLOCKs.
    fn check_steps(
        &self,
        d: &mut ToolDecision,
        call: &ToolCall,
        ctx: &CallContext,
    ) -> ControlFlow<()> {
        let name = call.tool.as_str();
        if !plain_tool_name(name) {
            d.action = ToolAction::Block;
            d.rules.push(RULE_UNKNOWN_TOOL.into());
            d.rules.push(RULE_ARGUMENTS_SHAPE.into());
            d.reasons.push(
                "tool name is empty or has surrounding space or control characters: BLOCK".into(),
            );
            return ControlFlow::Break(());
        }
        let Some(tool) = self.tools.get(name) else {
            d.action = self.default;
            d.rules.push(RULE_UNKNOWN_TOOL.into());
            d.reasons.push(format!(
                "tool not in the policy: default {}",
                self.default.name()
            ));
            // Fail closed on hostile arguments even where unknown tools are allowed.
            block_on_bad_shape(d, &call.arguments);
            return ControlFlow::Break(());
        };
        d.risk = Some(tool.risk);
        d.action = tool.action;
        d.rules.push(RULE_TOOL_ACTION.into());
        d.reasons.push(format!(
            "tool `{name}` ({} risk): {}",
            tool.risk.name(),
            tool.action.name()
        ));
        if block_on_bad_shape(d, &call.arguments) {
            return ControlFlow::Break(());
        }
        let args = arguments_object(d, &call.arguments)?;
        check_arguments(d, tool, args)?;
        self.provenance.check(
            d,
            name,
            tool.risk,
            &tool.provenance,
            &call.arguments,
            ctx.conversation.as_ref(),
        )?;
        self.check_context(d, tool, name, ctx)?;
        check_rate(d, tool, name, ctx)?;
        self.apply_flows(d, tool, name, ctx, args);
        ControlFlow::Continue(())
    }

    /// The tool's context condition, then the policy's `[[conditions]]` that concern it.
    fn check_context(
        &self,
        d: &mut ToolDecision,
        tool: &CompiledTool,
        name: &str,
        ctx: &CallContext,
    ) -> ControlFlow<()> {
        if let Some((req, otherwise)) = &tool.requires
            && let Err(f) = req.evaluate(ctx)
        {
            escalate(d, *otherwise, RULE_CONTEXT, f.reason());
            blocked(d)?;
        }
        for c in &self.conditions {
            let concerned = c.tools_at_or_above.is_some_and(|r| tool.risk >= r)
                || c.tools.iter().any(|t| t == name);
            if !concerned {
                continue;
            }
            if let Err(f) = c.requires.evaluate(ctx) {
                escalate(d, c.otherwise, &c.id, f.reason());
                blocked(d)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// The flow rules that concern the tool and hold in the context, unless the arguments
    /// exempt the call.
    fn apply_flows(
        &self,
        d: &mut ToolDecision,
        tool: &CompiledTool,
        name: &str,
        ctx: &CallContext,
        args: Option<&serde_json::Map<String, serde_json::Value>>,
    ) {
        for f in &self.flows {
            if !flow_concerns(&f.spec, name, tool.risk)
                || !flow_holds(&f.spec.after, ctx)
                || exempt_by_args(&f.unless_args, args)
            {
                continue;
            }
            if f.spec.action > d.action {
                d.action = f.spec.action;
            }
            d.rules.push(f.id.clone());
            d.reasons
                .push(format!("flow {}: {}", f.id, f.spec.action.name()));
        }
    }
}

/// A tool name matched as written: not empty, no surrounding white space (an agent
/// framework that trims would run a tool the policy never matched), no control character.
fn plain_tool_name(name: &str) -> bool {
    !name.is_empty() && name.trim() == name && !name.chars().any(char::is_control)
}

/// `Break` when the decision is BLOCK (the check stops there).
fn blocked(d: &ToolDecision) -> ControlFlow<()> {
    if d.action == ToolAction::Block {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

/// The arguments as an object (`None` for null); anything else BLOCKs.
fn arguments_object<'a>(
    d: &mut ToolDecision,
    arguments: &'a serde_json::Value,
) -> ControlFlow<(), Option<&'a serde_json::Map<String, serde_json::Value>>> {
    match arguments {
        serde_json::Value::Object(m) => ControlFlow::Continue(Some(m)),
        serde_json::Value::Null => ControlFlow::Continue(None),
        _ => {
            d.action = ToolAction::Block;
            d.rules.push(RULE_ARGUMENTS_SHAPE.into());
            d.reasons.push("arguments are not a JSON object".into());
            ControlFlow::Break(())
        }
    }
}

/// The tool's argument predicates; the first failure BLOCKs. A key that is not a
/// constrained argument's name but equal to it after case and width folding (`PATH` for
/// `path`) BLOCKs too: a tool that looks names up loosely would read the unchecked one.
fn check_arguments(
    d: &mut ToolDecision,
    tool: &CompiledTool,
    args: Option<&serde_json::Map<String, serde_json::Value>>,
) -> ControlFlow<()> {
    if let Some(m) = args {
        for key in m.keys() {
            if tool.args.contains_key(key) {
                continue;
            }
            let folded = strict::fold_key(key);
            if let Some((_, arg)) = tool.folded_args.iter().find(|(f, _)| *f == folded) {
                d.action = ToolAction::Block;
                d.rules.push(RULE_ARGUMENT.into());
                d.failed_argument = Some(arg.clone());
                d.failed_check = Some("alias".into());
                d.reasons.push(format!(
                    "argument `{arg}` is also given under a key equal to it after case and width folding"
                ));
                return ControlFlow::Break(());
            }
        }
    }
    for (arg, p) in &tool.args {
        if let Err(f) = p.check(args.and_then(|m| m.get(arg))) {
            d.action = ToolAction::Block;
            d.rules.push(RULE_ARGUMENT.into());
            d.failed_argument = Some(arg.clone());
            d.failed_check = Some(f.name().into());
            d.reasons
                .push(format!("argument `{arg}` failed `{}`", f.name()));
            return ControlFlow::Break(());
        }
    }
    ControlFlow::Continue(())
}

/// The tool's rate limit: calls of it earlier in the conversation.
fn check_rate(
    d: &mut ToolDecision,
    tool: &CompiledTool,
    name: &str,
    ctx: &CallContext,
) -> ControlFlow<()> {
    if let Some((max, over)) = tool.rate {
        let earlier = ctx.tools_called.iter().filter(|t| t.trim() == name).count();
        if earlier >= max {
            escalate(
                d,
                over,
                RULE_RATE,
                format!("`{name}` called {earlier} times in this conversation (limit {max})"),
            );
            blocked(d)?;
        }
    }
    ControlFlow::Continue(())
}

impl Policy {
    /// Checks a call whose arguments arrive as text (OpenAI's `function.arguments`): parsed
    /// with [`parse_arguments`]; arguments that are not a JSON object, or too deep, or too
    /// large, BLOCK (rule `TOOL_ARGS_SHAPE`, the parse error as the reason, no value), for
    /// unknown tools too.
    pub fn check_raw(&self, tool: &str, raw_arguments: &str, ctx: &CallContext) -> ToolDecision {
        match parse_arguments(raw_arguments) {
            Ok(arguments) => self.check(
                &ToolCall {
                    tool: tool.to_string(),
                    arguments,
                },
                ctx,
            ),
            Err(e) => {
                let name = tool.trim();
                let (risk, rule) = match self.tools.get(name) {
                    Some(t) => (Some(t.risk), RULE_TOOL_ACTION),
                    None => (None, RULE_UNKNOWN_TOOL),
                };
                ToolDecision {
                    action: ToolAction::Block,
                    risk,
                    rules: vec![rule.into(), RULE_ARGUMENTS_SHAPE.into()],
                    failed_argument: None,
                    failed_check: None,
                    reasons: vec![e.to_string()],
                    approval_id: None,
                    breakglass_id: None,
                    provenance: Vec::new(),
                }
            }
        }
    }
}

/// Records a rule that applied and raises the action to it (never lowers).
pub(crate) fn escalate(d: &mut ToolDecision, action: ToolAction, rule: &str, reason: String) {
    d.action = d.action.max(action);
    d.rules.push(rule.to_string());
    d.reasons
        .push(format!("{rule}: {reason}: {}", action.name()));
}

/// A flow's `unless_args` all pass: the call is out of the flow's scope.
fn exempt_by_args(
    preds: &BTreeMap<String, Predicate>,
    args: Option<&serde_json::Map<String, serde_json::Value>>,
) -> bool {
    !preds.is_empty()
        && preds
            .iter()
            .all(|(arg, p)| p.check(args.and_then(|m| m.get(arg))).is_ok())
}

/// BLOCKs (rule `TOOL_ARGS_SHAPE`) arguments nested deeper than [`MAX_ARGUMENT_DEPTH`] or
/// larger than [`MAX_ARGUMENT_BYTES`]; true when it did.
fn block_on_bad_shape(d: &mut ToolDecision, args: &serde_json::Value) -> bool {
    let why = match arguments::value_shape(args) {
        Ok(()) => return false,
        Err(arguments::ValueShape::TooDeep) => {
            format!("arguments are nested deeper than {MAX_ARGUMENT_DEPTH}")
        }
        Err(arguments::ValueShape::TooLarge) => {
            format!("arguments are larger than {MAX_ARGUMENT_BYTES} bytes")
        }
        Err(arguments::ValueShape::FoldedKeys) => {
            "arguments have two keys equal after case and width folding".into()
        }
    };
    d.action = ToolAction::Block;
    d.rules.push(RULE_ARGUMENTS_SHAPE.into());
    d.reasons.push(why);
    true
}

fn flow_concerns(f: &FlowSpec, tool: &str, risk: Risk) -> bool {
    f.tools_at_or_above.is_some_and(|r| risk >= r)
        || f.tools
            .as_ref()
            .is_some_and(|l| l.iter().any(|t| t == tool))
}

fn flow_holds(c: &FlowCondition, ctx: &CallContext) -> bool {
    let score = c
        .injection_score_at_least
        .is_none_or(|t| ctx.max_injection_score.is_some_and(|s| s >= t));
    let called = c
        .tool_called
        .as_ref()
        .is_none_or(|t| ctx.tools_called.iter().any(|x| x == t));
    let called_any = c
        .tool_called_any
        .as_ref()
        .is_none_or(|ts| ctx.tools_called.iter().any(|x| ts.contains(x)));
    score && called && called_any
}
