//! The policy file: strict TOML, versioned. Parsed into [`PolicyFile`], compiled once into
//! [`crate::Policy`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The only policy schema version this build reads.
pub const POLICY_VERSION: u32 = 1;

/// A tool's risk level. Ordered: `low < medium < high < critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads public or the caller's own data.
    Low,
    /// Reaches outside (network), or reads data of others.
    Medium,
    /// Changes or sends things (files, email).
    High,
    /// Moves money, grants access, cannot be undone.
    Critical,
}

impl Risk {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

/// What happens to a call. Ordered: `allow < confirm < block` (the ratchet is `max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolAction {
    /// The call goes ahead.
    Allow,
    /// A human approves it first.
    Confirm,
    /// The call is refused.
    Block,
}

impl ToolAction {
    /// The upper-case name used in answers (`ALLOW`, `CONFIRM`, `BLOCK`).
    pub fn name(self) -> &'static str {
        match self {
            ToolAction::Allow => "ALLOW",
            ToolAction::Confirm => "CONFIRM",
            ToolAction::Block => "BLOCK",
        }
    }
}

/// The policy file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Schema version; must be [`POLICY_VERSION`].
    pub version: u32,
    /// The action for tools the policy does not name. Default `block`.
    #[serde(default = "default_unknown")]
    pub default: ToolAction,
    /// The tools.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Flow rules over the conversation.
    #[serde(default)]
    pub flows: Vec<FlowSpec>,
    /// Context conditions over several tools (by name or risk): the caller's role and
    /// attributes, time windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionSpec>,
    /// Where argument values must come from (issue 36): the operator's trusted values, the
    /// score at which a span is flagged, per-risk defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceSpec>,
}

/// Where an argument's value must come from (`provenance = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvenanceRequirement {
    /// It occurs in a system, developer or user message, or is an operator's trusted
    /// value. Untrusted and unattested values fail.
    Trusted,
    /// Trusted, or taken from a document the user named (the result of a call whose
    /// arguments the user wrote, holding exactly one untrusted value of that kind), from
    /// a span not flagged: "pay the bill in bills/march.txt".
    NamedDocument,
    /// It does not come only from untrusted content (free text: no run of 6 words found
    /// only there). Values the model wrote or computed pass.
    NotUntrusted,
    /// It does not come from a span the detectors flagged.
    NotFlagged,
    /// No requirement (overrides a default).
    Any,
}

impl ProvenanceRequirement {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ProvenanceRequirement::Trusted => "trusted",
            ProvenanceRequirement::NamedDocument => "named_document",
            ProvenanceRequirement::NotUntrusted => "not_untrusted",
            ProvenanceRequirement::NotFlagged => "not_flagged",
            ProvenanceRequirement::Any => "any",
        }
    }
}

/// The policy's `[provenance]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceSpec {
    /// A span the detectors scored at least this is flagged (default 0.5): a value taken
    /// from it BLOCKs whatever the requirement's `otherwise`.
    #[serde(default = "default_flagged_at_least")]
    pub flagged_at_least: f32,
    /// Values the operator trusts wherever they appear (the user's own accounts, the
    /// company's domains), matched on their canonical forms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_values: Vec<String>,
    /// Requirements on argument values by the tool's risk (or name) and the value's kind,
    /// for arguments without their own `provenance`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defaults: Vec<ProvenanceDefault>,
}

fn default_flagged_at_least() -> f32 {
    0.5
}

/// The kinds a provenance default concerns when it names none: values that say where
/// something goes or who gets it.
pub const RECIPIENT_KINDS: [rampart_provenance::Kind; 5] = [
    rampart_provenance::Kind::Email,
    rampart_provenance::Kind::Iban,
    rampart_provenance::Kind::Url,
    rampart_provenance::Kind::Host,
    rampart_provenance::Kind::Phone,
];

/// A default requirement: for the tools concerned, every argument value of these kinds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceDefault {
    /// Tools of at least this risk are concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_at_or_above: Option<Risk>,
    /// These tools are concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The value kinds concerned (default: email, iban, url, host, phone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<rampart_provenance::Kind>>,
    /// What the values must satisfy.
    pub require: ProvenanceRequirement,
    /// The action when they do not (default `confirm`; a value from a flagged span always
    /// BLOCKs).
    #[serde(default = "default_provenance_otherwise")]
    pub otherwise: Escalation,
}

fn default_provenance_otherwise() -> Escalation {
    Escalation::Confirm
}

fn default_unknown() -> ToolAction {
    ToolAction::Block
}

/// One tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// Its risk level.
    pub risk: Risk,
    /// What happens to a call whose arguments pass.
    pub action: ToolAction,
    /// Constraints on named arguments. A constrained argument that is missing fails (unless
    /// its predicate says `optional = true`).
    #[serde(default)]
    pub args: BTreeMap<String, PredicateSpec>,
    /// A context condition for this tool (rule `TOOL_CONTEXT`): who may call it, when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<RequirementSpec>,
    /// The action when `requires` does not hold (default `block`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<Escalation>,
    /// At most this many calls of the tool per conversation (rule `TOOL_RATE`), counted in
    /// [`crate::CallContext::tools_called`], which the caller (the server) supplies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_conversation: Option<u32>,
    /// The action for a call over `max_calls_per_conversation` (default `block`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit: Option<Escalation>,
    /// The tool returns one document named by this argument (`read_file`: `path`): when the
    /// user wrote that argument, its result may vouch for a value (`provenance =
    /// "named_document"`). Tools without it (searches, listings, inboxes) never vouch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_argument: Option<String>,
}

/// The action a failed condition or an exceeded limit imposes: never `allow`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Escalation {
    /// A human approves the call first.
    Confirm,
    /// The call is refused.
    #[default]
    Block,
}

impl From<Escalation> for ToolAction {
    fn from(e: Escalation) -> Self {
        match e {
            Escalation::Confirm => ToolAction::Confirm,
            Escalation::Block => ToolAction::Block,
        }
    }
}

/// Who may call, and when. Every part given must hold; a part that cannot be evaluated
/// (a time window and no time given, an attribute the caller did not send) fails.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementSpec {
    /// The caller's role is one of these (exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_in: Option<Vec<String>>,
    /// The caller's attributes have these values (`mfa = true`, `tier = 2`,
    /// `department = ["finance", "treasury"]` for one of several strings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, AttributeMatch>,
    /// The call's time is inside this window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeWindowSpec>,
}

/// The value an attribute must have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AttributeMatch {
    /// Exactly this boolean.
    Bool(bool),
    /// This integer (a JSON number equal to it).
    Integer(i64),
    /// This number.
    Float(f64),
    /// Exactly this string.
    Text(String),
    /// One of these strings.
    AnyOf(Vec<String>),
}

/// Days of the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weekday {
    /// Monday.
    #[serde(alias = "monday")]
    Mon,
    /// Tuesday.
    #[serde(alias = "tuesday")]
    Tue,
    /// Wednesday.
    #[serde(alias = "wednesday")]
    Wed,
    /// Thursday.
    #[serde(alias = "thursday")]
    Thu,
    /// Friday.
    #[serde(alias = "friday")]
    Fri,
    /// Saturday.
    #[serde(alias = "saturday")]
    Sat,
    /// Sunday.
    #[serde(alias = "sunday")]
    Sun,
}

/// A weekly time window at a fixed UTC offset (no daylight-saving rules: give the offset
/// in force, or two policies).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeWindowSpec {
    /// The days (local to `utc_offset`) the window is open. Default: every day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<Vec<Weekday>>,
    /// `["HH:MM", "HH:MM"]`: from (inclusive) to (exclusive), local to `utc_offset`; a
    /// start after the end spans midnight (`["22:00", "06:00"]`). Default: all day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<[String; 2]>,
    /// The fixed offset from UTC the window is written in: `"+01:00"`, `"-05:30"`, `"Z"`.
    /// Default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset: Option<String>,
}

/// A context condition over several tools: calls of the named tools, or of tools at or
/// above a risk, need `requires` to hold, else get `otherwise`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionSpec {
    /// Rule id in answers (default `CONTEXT_<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tools of at least this risk are concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_at_or_above: Option<Risk>,
    /// These tools are concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// What must hold.
    pub requires: RequirementSpec,
    /// The action when it does not (default `block`).
    #[serde(default)]
    pub otherwise: Escalation,
}

/// Constraints on one argument; every one given must hold. Strings are NFKC-normalized
/// before any check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredicateSpec {
    /// The value is one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<String>>,
    /// The whole value matches this regular expression (anchored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// At most this many characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    /// A number in `[min, max]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    /// An http(s) URL whose host is one of these (exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_host_in: Option<Vec<String>>,
    /// A path under one of these directories after normalization (percent-decoding,
    /// NFKC, look-alike slashes and dots, `.` and `..` resolved; an escape fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_under: Option<Vec<String>>,
    /// Email addresses (one, or several separated by commas) whose domains are all in this
    /// list (exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_domain_in: Option<Vec<String>>,
    /// The value contains none of these (case-insensitive, after NFKC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_contains: Option<Vec<String>>,
    /// A missing argument passes (default false: missing fails). An argument with only
    /// `provenance` keys may be missing.
    #[serde(default)]
    pub optional: bool,
    /// Where the value must come from (every string and number in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceRequirement>,
    /// The action when it does not (default `confirm`; a value from a flagged span always
    /// BLOCKs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance_otherwise: Option<Escalation>,
}

impl PredicateSpec {
    /// Whether any check of the value itself is given (not only `provenance` keys).
    pub fn checks_value(&self) -> bool {
        self.one_of.is_some()
            || self.regex.is_some()
            || self.max_length.is_some()
            || self.range.is_some()
            || self.url_host_in.is_some()
            || self.path_under.is_some()
            || self.email_domain_in.is_some()
            || self.not_contains.is_some()
    }
}

/// A flow rule: after something happened in the conversation, some tools get an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Rule id in answers (default `FLOW_<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The condition.
    pub after: FlowCondition,
    /// Tools of at least this risk are concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_at_or_above: Option<Risk>,
    /// These tools are concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The action for concerned calls.
    pub action: ToolAction,
    /// The rule does not apply to a call whose arguments all pass these predicates (for
    /// example `to = { email_domain_in = ["example.com"] }`: only mail to other domains is
    /// concerned). A missing argument does not pass.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unless_args: BTreeMap<String, PredicateSpec>,
}

/// What must have happened earlier in the conversation; every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowCondition {
    /// A tool result (untrusted data) scored at least this for injection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injection_score_at_least: Option<f32>,
    /// This tool was called earlier in the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_called: Option<String>,
    /// One of these tools was called earlier in the conversation (for example the tools
    /// that bring in untrusted content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_called_any: Option<Vec<String>>,
}
