//! `rampart tools lint`: every error that stops a policy from loading (strict parse with the
//! key meant, version, duplicates, predicates and conditions that do not compile), and
//! warnings, with stable codes, for policies that load but cannot do what they say.

use crate::condition::{Requirement, TimeWindow};
use crate::policy::{
    ConditionSpec, Escalation, FlowSpec, POLICY_VERSION, PolicyFile, PredicateSpec, Risk,
    ToolAction, ToolSpec,
};
use crate::predicate::{Predicate, PredicateError, plain_path};
use crate::{Policy, PolicyError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Error or warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The policy does not load.
    Error,
    /// The policy loads but part of it cannot work as written.
    Warning,
}

/// What a finding is about. The codes (`E001`, `W001`, …) are stable: a new check gets a new
/// code, and a code is never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum LintCode {
    /// E001: not TOML, or a value of the wrong type.
    Syntax,
    /// E002: a key the schema does not have (the key meant is suggested where close).
    UnknownKey,
    /// E003: a value outside a fixed set (`risk = "extreme"`).
    UnknownValue,
    /// E004: an unsupported `version`.
    Version,
    /// E005: a tool defined twice.
    DuplicateTool,
    /// E006: a tool without a name.
    EmptyName,
    /// E007: a predicate that does not compile (bad regex, `range` min > max, an empty
    /// list, a relative or `..` `path_under` root, no constraint).
    BadPredicate,
    /// E008: a flow rule without tools or condition, or with a bad score.
    BadFlow,
    /// E009: a context condition that does not compile (bad clock or offset, nothing
    /// required, no tools).
    BadCondition,
    /// W001: `max_length = 0` on a required argument: only the empty string passes.
    MaxLengthZero,
    /// W002: a `one_of` value that fails the argument's other predicates (it can never pass).
    OneOfValueFails,
    /// W003: a `path_under` root written in a non-normal form (`//`, `/./`,
    /// percent-encoding, look-alike characters), or `/` (every path).
    PathRootNotNormal,
    /// W004: a `url_host_in` entry that is not a bare host (scheme, port, path, user,
    /// wildcard): it never equals a URL's host.
    UrlHostNotAHost,
    /// W005: an `email_domain_in` entry with `@` or blanks: it never equals a domain.
    EmailDomainNotADomain,
    /// W006: a flow or condition names a tool the policy does not define.
    UnknownToolInRule,
    /// W007: a flow, condition, context requirement or rate limit whose action can never
    /// change a decision (the tools concerned already get as much, or none is concerned).
    RuleNeverChanges,
    /// W008: `default = "allow"`: tools nobody reviewed are allowed.
    DefaultAllow,
    /// W009: a critical tool allowed without confirmation, none of whose argument values
    /// must be trusted.
    CriticalAllowed,
    /// W010: a regex that can never match.
    RegexCannotMatch,
    /// W011: `max_calls_per_conversation = 0`: the tool can never be called.
    RateLimitZero,
    /// W012: a time window that is never open (`days = []`, or equal start and end).
    EmptyTimeWindow,
    /// W013: `otherwise` without `requires`, or `over_limit` without a limit, or
    /// `provenance_otherwise` without `provenance`.
    DanglingOption,
    /// E010: a `[provenance]` section or an argument's provenance keys that cannot be used
    /// (a score outside [0, 1], a default that names no tools or no kinds, provenance keys
    /// in a flow's `unless_args`).
    BadProvenance,
}

impl LintCode {
    /// The stable code (`E002`, `W001`, …).
    pub fn code(self) -> &'static str {
        match self {
            LintCode::Syntax => "E001",
            LintCode::UnknownKey => "E002",
            LintCode::UnknownValue => "E003",
            LintCode::Version => "E004",
            LintCode::DuplicateTool => "E005",
            LintCode::EmptyName => "E006",
            LintCode::BadPredicate => "E007",
            LintCode::BadFlow => "E008",
            LintCode::BadCondition => "E009",
            LintCode::MaxLengthZero => "W001",
            LintCode::OneOfValueFails => "W002",
            LintCode::PathRootNotNormal => "W003",
            LintCode::UrlHostNotAHost => "W004",
            LintCode::EmailDomainNotADomain => "W005",
            LintCode::UnknownToolInRule => "W006",
            LintCode::RuleNeverChanges => "W007",
            LintCode::DefaultAllow => "W008",
            LintCode::CriticalAllowed => "W009",
            LintCode::RegexCannotMatch => "W010",
            LintCode::RateLimitZero => "W011",
            LintCode::EmptyTimeWindow => "W012",
            LintCode::DanglingOption => "W013",
            LintCode::BadProvenance => "E010",
        }
    }

    /// A short kebab-case name (`unknown-key`).
    pub fn name(self) -> &'static str {
        match self {
            LintCode::Syntax => "syntax",
            LintCode::UnknownKey => "unknown-key",
            LintCode::UnknownValue => "unknown-value",
            LintCode::Version => "version",
            LintCode::DuplicateTool => "duplicate-tool",
            LintCode::EmptyName => "empty-name",
            LintCode::BadPredicate => "bad-predicate",
            LintCode::BadFlow => "bad-flow",
            LintCode::BadCondition => "bad-condition",
            LintCode::MaxLengthZero => "max-length-zero",
            LintCode::OneOfValueFails => "one-of-value-fails",
            LintCode::PathRootNotNormal => "path-root-not-normal",
            LintCode::UrlHostNotAHost => "url-host-not-a-host",
            LintCode::EmailDomainNotADomain => "email-domain-not-a-domain",
            LintCode::UnknownToolInRule => "unknown-tool-in-rule",
            LintCode::RuleNeverChanges => "rule-never-changes",
            LintCode::DefaultAllow => "default-allow",
            LintCode::CriticalAllowed => "critical-allowed",
            LintCode::RegexCannotMatch => "regex-cannot-match",
            LintCode::RateLimitZero => "rate-limit-zero",
            LintCode::EmptyTimeWindow => "empty-time-window",
            LintCode::DanglingOption => "dangling-option",
            LintCode::BadProvenance => "bad-provenance",
        }
    }

    /// Error or warning.
    pub fn severity(self) -> Severity {
        if self.code().starts_with('E') {
            Severity::Error
        } else {
            Severity::Warning
        }
    }
}

/// A line and column (1-based) in the policy text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column (characters), from 1.
    pub column: usize,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    #[serde(serialize_with = "code_str")]
    pub code: LintCode,
    /// Error or warning.
    pub severity: Severity,
    /// Where in the text, for parse errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Where in the policy (``tools[0] `read_file`, argument `path` ``), for the others.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub place: String,
    /// What is wrong, and what to write instead where known.
    pub message: String,
}

fn code_str<S: serde::Serializer>(c: &LintCode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.code())
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}[{} {}]", self.code.code(), self.code.name())?;
        if let Some(l) = self.location {
            write!(f, " line {}, column {}", l.line, l.column)?;
        }
        if !self.place.is_empty() {
            write!(f, " {}", self.place)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// All findings for one policy text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LintReport {
    /// Errors first, then warnings, each in policy order.
    pub findings: Vec<Finding>,
}

impl LintReport {
    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
    }

    /// Whether there is an error (the policy does not load).
    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    fn push(&mut self, code: LintCode, place: impl Into<String>, message: impl Into<String>) {
        self.findings.push(Finding {
            code,
            severity: code.severity(),
            location: None,
            place: place.into(),
            message: message.into(),
        });
    }
}

/// A parse failure, located, with the key or value meant where one is close.
struct ParseFailure {
    code: LintCode,
    location: Option<Location>,
    message: String,
}

impl ParseFailure {
    fn display(&self) -> String {
        match self.location {
            Some(l) => format!("line {}, column {}: {}", l.line, l.column, self.message),
            None => self.message.clone(),
        }
    }
}

fn parse_detailed(src: &str) -> Result<PolicyFile, ParseFailure> {
    toml::from_str::<PolicyFile>(src).map_err(|e| {
        let location = e.span().map(|s| location_of(src, s.start));
        let raw = e.message().trim_end().to_string();
        let (code, message) = match unknown_name(&raw) {
            Some((kind, found, candidates)) => {
                let code = if kind == "field" {
                    LintCode::UnknownKey
                } else {
                    LintCode::UnknownValue
                };
                let what = if kind == "field" { "key" } else { "value" };
                let mut m = format!("unknown {what} `{found}`");
                match closest(found, &candidates) {
                    Some(s) => m.push_str(&format!(" (did you mean `{s}`?)")),
                    None if !candidates.is_empty() => {
                        m.push_str(&format!("; expected one of {}", candidates.join(", ")));
                    }
                    None => {}
                }
                (code, m)
            }
            None => (LintCode::Syntax, raw),
        };
        ParseFailure {
            code,
            location,
            message,
        }
    })
}

/// Parses a policy file's text strictly; the error names the unknown key and the key meant.
pub(crate) fn parse(src: &str) -> Result<PolicyFile, PolicyError> {
    parse_detailed(src).map_err(|f| PolicyError::Parse(f.display()))
}

fn location_of(src: &str, offset: usize) -> Location {
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, l)| l)
        .chars()
        .count()
        + 1;
    Location { line, column }
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant …"): the kind,
/// the name found and the names expected.
fn unknown_name(msg: &str) -> Option<(&'static str, &str, Vec<&str>)> {
    let (kind, rest) = if let Some(r) = msg.strip_prefix("unknown field `") {
        ("field", r)
    } else if let Some(r) = msg.strip_prefix("unknown variant `") {
        ("variant", r)
    } else {
        return None;
    };
    let (found, tail) = rest.split_once('`')?;
    let candidates = tail.split('`').skip(1).step_by(2).collect();
    Some((kind, found, candidates))
}

/// The candidate closest to `found`, if it is close enough to be the one meant.
fn closest<'a>(found: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let found = found.to_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(&found, c), *c))
        .filter(|(d, c)| *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Lints a policy file's text: errors (it does not load) and warnings.
pub fn lint(src: &str) -> LintReport {
    let mut r = LintReport::default();
    let file = match parse_detailed(src) {
        Ok(f) => f,
        Err(f) => {
            r.findings.push(Finding {
                code: f.code,
                severity: Severity::Error,
                location: f.location,
                place: String::new(),
                message: f.message,
            });
            return r;
        }
    };
    lint_file(&file, &mut r);
    if !r.has_errors()
        && let Err(e) = Policy::compile(file)
    {
        // A check the walk above does not repeat; never silent.
        r.push(LintCode::Syntax, "", e.to_string());
    }
    r.findings.sort_by_key(|f| f.severity);
    r
}

fn tool_place(i: usize, t: &ToolSpec) -> String {
    format!("tools[{i}] `{}`", t.name.trim())
}

fn lint_file(file: &PolicyFile, r: &mut LintReport) {
    if file.version != POLICY_VERSION {
        r.push(
            LintCode::Version,
            "version",
            format!(
                "version {} is not supported (this build reads version {POLICY_VERSION})",
                file.version
            ),
        );
    }
    if file.default == ToolAction::Allow {
        r.push(
            LintCode::DefaultAllow,
            "default",
            "tools the policy does not name are allowed; `block` (or `confirm`) keeps unreviewed tools out",
        );
    }
    let mut seen = BTreeSet::new();
    let mut defined: BTreeMap<&str, &ToolSpec> = BTreeMap::new();
    for (i, t) in file.tools.iter().enumerate() {
        let name = t.name.trim();
        let place = tool_place(i, t);
        if name.is_empty() {
            r.push(LintCode::EmptyName, format!("tools[{i}]"), "empty name");
            continue;
        }
        if !seen.insert(name) {
            r.push(
                LintCode::DuplicateTool,
                &place,
                format!("tool `{name}` is defined twice"),
            );
        }
        defined.entry(name).or_insert(t);
        for (arg, spec) in &t.args {
            let at = format!("{place}, argument `{arg}`");
            if spec.provenance_otherwise.is_some() && spec.provenance.is_none() {
                r.push(
                    LintCode::DanglingOption,
                    &at,
                    "`provenance_otherwise` without `provenance` has no effect",
                );
            }
            // An argument with only provenance keys has no value predicate to compile.
            if spec.checks_value() || spec.provenance.is_none() {
                lint_predicate(spec, &at, r);
            }
        }
        lint_tool(t, &place, provenance_guarded(file, t), r);
    }
    if let Some(p) = &file.provenance {
        lint_provenance(p, &defined, r);
    }
    for (i, f) in file.flows.iter().enumerate() {
        lint_flow(i, f, &defined, r);
    }
    for (i, c) in file.conditions.iter().enumerate() {
        lint_condition(i, c, &defined, r);
    }
}

/// Whether some argument value of the tool must be trusted (or come from a document the
/// user named): an `allow` then only holds for values the user gave.
fn provenance_guarded(file: &PolicyFile, t: &ToolSpec) -> bool {
    use crate::policy::ProvenanceRequirement as R;
    let strict = |r: R| matches!(r, R::Trusted | R::NamedDocument);
    t.args.values().any(|a| a.provenance.is_some_and(strict))
        || file.provenance.iter().flat_map(|p| &p.defaults).any(|d| {
            strict(d.require)
                && (d.tools_at_or_above.is_some_and(|r| t.risk >= r)
                    || d.tools.iter().flatten().any(|n| n.trim() == t.name.trim()))
        })
}

fn lint_tool(t: &ToolSpec, place: &str, guarded: bool, r: &mut LintReport) {
    if t.risk == Risk::Critical && t.action == ToolAction::Allow && !guarded {
        r.push(
            LintCode::CriticalAllowed,
            place,
            "a critical tool with action `allow` and no argument that must be trusted: use `confirm` (or `block`), or a `provenance` requirement",
        );
    }
    match &t.requires {
        Some(req) => {
            lint_requirement(req, place, r);
            let otherwise = ToolAction::from(t.otherwise.unwrap_or_default());
            if otherwise <= t.action {
                r.push(
                    LintCode::RuleNeverChanges,
                    place,
                    format!(
                        "`requires` can never change the decision: the tool's action is already `{}`",
                        t.action.name().to_lowercase()
                    ),
                );
            }
        }
        None if t.otherwise.is_some() => r.push(
            LintCode::DanglingOption,
            place,
            "`otherwise` without `requires` has no effect",
        ),
        None => {}
    }
    match t.max_calls_per_conversation {
        Some(0) => r.push(
            LintCode::RateLimitZero,
            place,
            "`max_calls_per_conversation = 0`: every call is over the limit (use `action = \"block\"` to forbid the tool)",
        ),
        Some(_) => {
            let over = ToolAction::from(t.over_limit.unwrap_or_default());
            if over <= t.action {
                r.push(
                    LintCode::RuleNeverChanges,
                    place,
                    format!(
                        "the rate limit can never change the decision: the tool's action is already `{}`",
                        t.action.name().to_lowercase()
                    ),
                );
            }
        }
        None if t.over_limit.is_some() => r.push(
            LintCode::DanglingOption,
            place,
            "`over_limit` without `max_calls_per_conversation` has no effect",
        ),
        None => {}
    }
}

fn lint_requirement(req: &crate::policy::RequirementSpec, place: &str, r: &mut LintReport) {
    if let Err(e) = Requirement::compile(req) {
        r.push(LintCode::BadCondition, place, e.to_string());
        return;
    }
    if let Some(w) = &req.time
        && let Ok(w) = TimeWindow::compile(w)
        && w.is_empty()
    {
        r.push(
            LintCode::EmptyTimeWindow,
            place,
            "the time window is never open (no day, or the same start and end)",
        );
    }
}

fn lint_predicate(spec: &PredicateSpec, place: &str, r: &mut LintReport) {
    if let Err(e) = Predicate::compile(spec) {
        let hint = match e {
            PredicateError::Root(_) => " (write an absolute path such as `/srv/app/docs`)",
            _ => "",
        };
        r.push(LintCode::BadPredicate, place, format!("{e}{hint}"));
        return;
    }
    if spec.max_length == Some(0) && !spec.optional {
        r.push(
            LintCode::MaxLengthZero,
            place,
            "`max_length = 0` on a required argument: only the empty string passes",
        );
    }
    if let Some(re) = &spec.regex
        && let Ok(hir) = regex_syntax::parse(re)
        && hir.properties().minimum_len().is_none()
    {
        r.push(
            LintCode::RegexCannotMatch,
            place,
            "the regex can never match: every value fails",
        );
    }
    if let Some(values) = &spec.one_of {
        let others = PredicateSpec {
            one_of: None,
            optional: false,
            ..spec.clone()
        };
        if let Ok(p) = Predicate::compile(&others) {
            for v in values {
                if let Err(f) = p.check(Some(&serde_json::Value::String(v.clone()))) {
                    r.push(
                        LintCode::OneOfValueFails,
                        place,
                        format!("one_of value `{v}` fails `{}`: it can never pass", f.name()),
                    );
                }
            }
        }
    }
    for root in spec.path_under.iter().flatten() {
        let Some(parts) = plain_path(root) else {
            continue;
        };
        let normal = format!("/{}", parts.join("/"));
        if parts.is_empty() {
            r.push(
                LintCode::PathRootNotNormal,
                place,
                "path_under root `/` admits every absolute path",
            );
        } else if root.trim_end_matches('/') != normal {
            r.push(
                LintCode::PathRootNotNormal,
                place,
                format!("path_under root `{root}` is not in normal form: write `{normal}`"),
            );
        }
    }
    for host in spec.url_host_in.iter().flatten() {
        let h = host.trim();
        let ipv6 = h.starts_with('[') && h.ends_with(']');
        let bad = h.is_empty()
            || h.contains("://")
            || h.contains(['/', '@', '*', '?', '#'])
            || h.chars().any(char::is_whitespace)
            || (!ipv6 && h.contains(':'));
        if bad {
            r.push(
                LintCode::UrlHostNotAHost,
                place,
                format!(
                    "url_host_in entry `{host}` is not a bare host (no scheme, port, path, user or wildcard): it never matches"
                ),
            );
        }
    }
    for d in spec.email_domain_in.iter().flatten() {
        if d.contains('@') || d.trim().is_empty() || d.chars().any(char::is_whitespace) {
            r.push(
                LintCode::EmailDomainNotADomain,
                place,
                format!(
                    "email_domain_in entry `{d}` is not a bare domain (write `{}`): it never matches",
                    d.rsplit('@').next().unwrap_or(d).trim()
                ),
            );
        }
    }
}

/// The defined tools a rule concerns (by name or risk).
fn concerned<'a>(
    defined: &BTreeMap<&'a str, &'a ToolSpec>,
    names: Option<&Vec<String>>,
    at_or_above: Option<Risk>,
) -> Vec<&'a ToolSpec> {
    defined
        .iter()
        .filter(|(n, t)| {
            at_or_above.is_some_and(|r| t.risk >= r)
                || names.is_some_and(|l| l.iter().any(|x| x.trim() == **n))
        })
        .map(|(_, t)| *t)
        .collect()
}

fn unknown_tools<'a>(
    defined: &BTreeMap<&str, &ToolSpec>,
    names: impl Iterator<Item = &'a String>,
    place: &str,
    r: &mut LintReport,
) {
    for n in names {
        if !defined.contains_key(n.trim()) {
            r.push(
                LintCode::UnknownToolInRule,
                place,
                format!("names tool `{n}`, which the policy does not define"),
            );
        }
    }
}

fn lint_flow(i: usize, f: &FlowSpec, defined: &BTreeMap<&str, &ToolSpec>, r: &mut LintReport) {
    let place = match &f.id {
        Some(id) => format!("flows[{i}] `{id}`"),
        None => format!("flows[{i}]"),
    };
    if f.tools_at_or_above.is_none() && f.tools.as_ref().is_none_or(Vec::is_empty) {
        r.push(
            LintCode::BadFlow,
            &place,
            "names no tools (`tools_at_or_above` or `tools`)",
        );
        return;
    }
    let after = &f.after;
    if after.injection_score_at_least.is_none()
        && after.tool_called.is_none()
        && after.tool_called_any.is_none()
    {
        r.push(LintCode::BadFlow, &place, "`after` has no condition");
        return;
    }
    if after.tool_called_any.as_ref().is_some_and(Vec::is_empty) {
        r.push(
            LintCode::BadFlow,
            &place,
            "`tool_called_any` must not be empty",
        );
    }
    if let Some(s) = after.injection_score_at_least
        && !(0.0..=1.0).contains(&s)
    {
        r.push(
            LintCode::BadFlow,
            &place,
            format!("injection_score_at_least must be in [0, 1], got {s}"),
        );
    }
    for (arg, spec) in &f.unless_args {
        if spec.provenance.is_some() || spec.provenance_otherwise.is_some() {
            r.push(
                LintCode::BadProvenance,
                &place,
                format!("unless_args `{arg}`: provenance keys apply to a tool's `args` only"),
            );
            continue;
        }
        lint_predicate(spec, &format!("{place}, unless_args `{arg}`"), r);
    }
    unknown_tools(
        defined,
        f.tools
            .iter()
            .flatten()
            .chain(after.tool_called.iter())
            .chain(after.tool_called_any.iter().flatten()),
        &place,
        r,
    );
    let tools = concerned(defined, f.tools.as_ref(), f.tools_at_or_above);
    if tools.is_empty() {
        r.push(
            LintCode::RuleNeverChanges,
            &place,
            "concerns no tool the policy defines",
        );
    } else if tools.iter().all(|t| t.action >= f.action) {
        r.push(
            LintCode::RuleNeverChanges,
            &place,
            format!(
                "action `{}` can never change a decision: every tool concerned already gets at least that",
                f.action.name().to_lowercase()
            ),
        );
    }
}

fn lint_provenance(
    p: &crate::policy::ProvenanceSpec,
    defined: &BTreeMap<&str, &ToolSpec>,
    r: &mut LintReport,
) {
    if let Some(e) = crate::origin::section_error(p) {
        r.push(LintCode::BadProvenance, "provenance", e);
        return;
    }
    for (i, d) in p.defaults.iter().enumerate() {
        let place = format!("provenance.defaults[{i}]");
        unknown_tools(defined, d.tools.iter().flatten(), &place, r);
        if concerned(defined, d.tools.as_ref(), d.tools_at_or_above).is_empty() {
            r.push(
                LintCode::RuleNeverChanges,
                &place,
                "concerns no tool the policy defines",
            );
        }
    }
}

fn lint_condition(
    i: usize,
    c: &ConditionSpec,
    defined: &BTreeMap<&str, &ToolSpec>,
    r: &mut LintReport,
) {
    let place = match &c.id {
        Some(id) => format!("conditions[{i}] `{id}`"),
        None => format!("conditions[{i}]"),
    };
    if c.tools_at_or_above.is_none() && c.tools.as_ref().is_none_or(Vec::is_empty) {
        r.push(
            LintCode::BadCondition,
            &place,
            "names no tools (`tools_at_or_above` or `tools`)",
        );
        return;
    }
    lint_requirement(&c.requires, &place, r);
    unknown_tools(defined, c.tools.iter().flatten(), &place, r);
    let tools = concerned(defined, c.tools.as_ref(), c.tools_at_or_above);
    let otherwise = ToolAction::from(c.otherwise);
    if tools.is_empty() {
        r.push(
            LintCode::RuleNeverChanges,
            &place,
            "concerns no tool the policy defines",
        );
    } else if tools.iter().all(|t| t.action >= otherwise) {
        r.push(
            LintCode::RuleNeverChanges,
            &place,
            format!(
                "`otherwise = \"{}\"` can never change a decision: every tool concerned already gets at least that",
                match c.otherwise {
                    Escalation::Confirm => "confirm",
                    Escalation::Block => "block",
                }
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_suggests_only_near_names() {
        let c = ["one_of", "regex", "path_under", "url_host_in"];
        assert_eq!(closest("pth_under", &c), Some("path_under"));
        assert_eq!(closest("Regx", &c), Some("regex"));
        assert_eq!(closest("colour", &c), None);
    }

    #[test]
    fn unknown_name_reads_serde_messages() {
        let (k, f, c) = unknown_name(
            "unknown field `pth_under`, expected one of `one_of`, `regex`, `path_under`",
        )
        .unwrap_or_else(|| panic!("not read"));
        assert_eq!((k, f), ("field", "pth_under"));
        assert_eq!(c, ["one_of", "regex", "path_under"]);
        let (k, f, c) = unknown_name("unknown variant `blok`, expected `allow` or `block`")
            .unwrap_or_else(|| panic!("not read"));
        assert_eq!((k, f, c), ("variant", "blok", vec!["allow", "block"]));
        assert!(unknown_name("invalid type: string").is_none());
    }
}
