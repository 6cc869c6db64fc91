//! Provenance requirements (issue 36): where a call's argument values must come from,
//! checked against the conversation the server read ([`crate::CallContext::conversation`]).
//! The attribution itself is `rampart-provenance`'s.

use crate::policy::{
    Escalation, ProvenanceDefault, ProvenanceRequirement, ProvenanceSpec, RECIPIENT_KINDS, Risk,
    ToolAction,
};
use crate::{ToolDecision, escalate};
use rampart_provenance::{
    ArgumentProvenance, Conversation, Kind, NamedDocument, Origin, unattested,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Rule id of an argument whose value does not come from where the policy requires.
pub const RULE_PROVENANCE: &str = "TOOL_PROVENANCE";

/// The conversation a call belongs to, as the server read it from the request (never from
/// the client's `context`). Compared by identity.
#[derive(Debug, Clone)]
pub struct SharedConversation(pub Arc<Conversation>);

impl PartialEq for SharedConversation {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// One argument value checked for provenance: its place, kind, origin and the requirement
/// (never the value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvenanceCheck {
    /// The value, as a JSON pointer into the arguments (`/to`, `/recipients/1`).
    pub argument: String,
    /// How it was matched.
    pub kind: Kind,
    /// What the policy requires of it.
    pub requirement: ProvenanceRequirement,
    /// Whether it holds.
    pub passed: bool,
    /// Where the value came from (message indices as in the request's `messages`).
    #[serde(flatten)]
    pub origin: Origin,
    /// The document the user named that vouches for an untrusted value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named_document: Option<NamedDocument>,
}

#[derive(Debug, Clone)]
struct CompiledDefault {
    tools_at_or_above: Option<Risk>,
    tools: Vec<String>,
    kinds: Vec<Kind>,
    require: ProvenanceRequirement,
    otherwise: ToolAction,
}

/// The policy's provenance settings, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Provenance {
    flagged_at_least: f32,
    trusted_values: Vec<String>,
    defaults: Vec<CompiledDefault>,
    /// Tools that fetch one document, with the argument that names it.
    documents: BTreeMap<String, String>,
}

/// Why a `[provenance]` section cannot be compiled.
pub(crate) fn section_error(spec: &ProvenanceSpec) -> Option<String> {
    if !(0.0..=1.0).contains(&spec.flagged_at_least) {
        return Some(format!(
            "flagged_at_least must be in [0, 1], got {}",
            spec.flagged_at_least
        ));
    }
    spec.defaults
        .iter()
        .enumerate()
        .find_map(|(i, d)| default_error(d).map(|e| format!("defaults[{i}]: {e}")))
}

fn default_error(d: &ProvenanceDefault) -> Option<&'static str> {
    if d.tools_at_or_above.is_none() && d.tools.as_ref().is_none_or(Vec::is_empty) {
        return Some("names no tools (`tools_at_or_above` or `tools`)");
    }
    if d.kinds.as_ref().is_some_and(Vec::is_empty) {
        return Some("`kinds` must not be empty");
    }
    None
}

impl Provenance {
    /// Compiles a checked section (see [`section_error`]) with the policy's document tools.
    pub(crate) fn compile(
        spec: Option<&ProvenanceSpec>,
        documents: BTreeMap<String, String>,
    ) -> Self {
        let Some(spec) = spec else {
            return Provenance {
                flagged_at_least: 0.5,
                trusted_values: Vec::new(),
                defaults: Vec::new(),
                documents,
            };
        };
        Provenance {
            documents,
            flagged_at_least: spec.flagged_at_least,
            trusted_values: spec.trusted_values.clone(),
            defaults: spec
                .defaults
                .iter()
                .map(|d| CompiledDefault {
                    tools_at_or_above: d.tools_at_or_above,
                    tools: d.tools.clone().unwrap_or_default(),
                    kinds: d.kinds.clone().unwrap_or_else(|| RECIPIENT_KINDS.to_vec()),
                    require: d.require,
                    otherwise: d.otherwise.into(),
                })
                .collect(),
        }
    }

    /// The defaults that concern a tool.
    fn defaults_for<'a>(
        &'a self,
        name: &'a str,
        risk: Risk,
    ) -> impl Iterator<Item = &'a CompiledDefault> + 'a {
        self.defaults.iter().filter(move |d| {
            d.tools_at_or_above.is_some_and(|r| risk >= r) || d.tools.iter().any(|t| t == name)
        })
    }

    /// Checks the provenance of a call's arguments: each string and number value gets the
    /// requirement of its argument's own `provenance`, else of the first default that
    /// concerns the tool and the value's kind. A failed requirement escalates to its
    /// `otherwise`; a value taken from a flagged span BLOCKs.
    pub(crate) fn check(
        &self,
        d: &mut ToolDecision,
        name: &str,
        risk: Risk,
        own: &BTreeMap<String, (ProvenanceRequirement, ToolAction)>,
        arguments: &Value,
        conversation: Option<&SharedConversation>,
    ) -> ControlFlow<()> {
        if !arguments.is_object() {
            return ControlFlow::Continue(());
        }
        let mut defaults = self.defaults_for(name, risk).peekable();
        if own.is_empty() && defaults.peek().is_none() {
            return ControlFlow::Continue(());
        }
        let requirement = |p: &ArgumentProvenance| {
            let top = top_level(&p.argument);
            own.get(&top).copied().or_else(|| {
                self.defaults_for(name, risk)
                    .find(|x| x.kinds.contains(&p.kind))
                    .map(|x| (x.require, x.otherwise))
            })
        };
        let (attributed, why_none) = match conversation {
            Some(c) => match c
                .0
                .attribute(arguments, &self.trusted_values, &self.documents)
            {
                Ok(p) => (p, None),
                Err(e) => (unattested(arguments), Some(e.to_string())),
            },
            None => (
                unattested(arguments),
                Some("no conversation was given with the call".to_string()),
            ),
        };
        for p in attributed {
            let Some((require, otherwise)) = requirement(&p) else {
                continue;
            };
            if require == ProvenanceRequirement::Any {
                continue;
            }
            let flagged = matches!(&p.origin, Origin::Untrusted { score: Some(s), .. } if *s >= self.flagged_at_least);
            let passed = match (&p.origin, require) {
                // Without a readable conversation nothing is attributed: every requirement
                // but `any` fails closed.
                (_, _) if why_none.is_some() => false,
                (_, ProvenanceRequirement::Any) => true,
                (Origin::Trusted { .. }, _) => true,
                (_, ProvenanceRequirement::Trusted) => false,
                (Origin::Untrusted { .. }, ProvenanceRequirement::NamedDocument) => {
                    p.named_document.is_some() && !flagged
                }
                (Origin::Unattested, ProvenanceRequirement::NamedDocument) => false,
                (Origin::Untrusted { .. }, ProvenanceRequirement::NotUntrusted) => false,
                (Origin::Unattested, ProvenanceRequirement::NotUntrusted) => true,
                (_, ProvenanceRequirement::NotFlagged) => !flagged,
            };
            if !passed {
                let action = if flagged {
                    ToolAction::Block
                } else {
                    otherwise
                };
                let reason = failure_reason(&p, require, why_none.as_deref());
                escalate(d, action, crate::RULE_PROVENANCE, reason);
                if d.failed_argument.is_none() {
                    d.failed_argument = Some(top_level(&p.argument));
                    d.failed_check = Some("provenance".into());
                }
            }
            d.provenance.push(ProvenanceCheck {
                argument: p.argument,
                kind: p.kind,
                requirement: require,
                passed,
                origin: p.origin,
                named_document: p.named_document,
            });
            if d.action == ToolAction::Block {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// The requirement an argument's own keys give (`provenance`, `provenance_otherwise`).
pub(crate) fn own_requirement(
    spec: &crate::PredicateSpec,
) -> Option<(ProvenanceRequirement, ToolAction)> {
    spec.provenance.map(|r| {
        (
            r,
            spec.provenance_otherwise
                .unwrap_or(Escalation::Confirm)
                .into(),
        )
    })
}

/// The argument's name: the first step of a JSON pointer, unescaped.
fn top_level(pointer: &str) -> String {
    pointer
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("")
        .replace("~1", "/")
        .replace("~0", "~")
}

/// The reason of a failed requirement: the argument, the kind, where the value came from
/// (message, span, score), what was required. Never the value.
fn failure_reason(
    p: &ArgumentProvenance,
    require: ProvenanceRequirement,
    why_none: Option<&str>,
) -> String {
    let origin = match (&p.origin, why_none) {
        (_, Some(why)) => format!("not attributed ({why})"),
        (
            Origin::Untrusted {
                message,
                span,
                score,
            },
            _,
        ) => {
            let score =
                score.map_or_else(|| "not flagged".to_string(), |s| format!("flagged {s:.2}"));
            let named = if p.named_document.is_some() {
                ", in a document the user named"
            } else {
                ""
            };
            format!(
                "came from untrusted message {message}, bytes {}..{} ({score}){named}",
                span.start, span.end
            )
        }
        (Origin::Unattested, _) => "occurs in no message (unattested)".to_string(),
        (Origin::Trusted { .. }, _) => "is trusted".to_string(),
    };
    format!(
        "argument `{}` ({}) {origin}; the policy requires `{}`",
        p.argument,
        p.kind.name(),
        require.name()
    )
}
