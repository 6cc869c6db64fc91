//! The trace format (strict, versioned), the embedded Agent_Traces_v1 and its policies.

use rampart_tools::{Policy, PolicyError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The only trace schema version this build reads.
pub const TRACE_VERSION: u32 = 1;

/// Agent_Traces_v1, tuning part (banking, email and calendar, coding).
pub const TUNE_V1: &str = include_str!("../../../datasets/agent_traces_v1/tune.jsonl");
/// Agent_Traces_v1, test part (travel, customer support, file sharing).
pub const TEST_V1: &str = include_str!("../../../datasets/agent_traces_v1/test.jsonl");

/// The policies Agent_Traces_v1's traces run under, by name.
pub const POLICIES_V1: [(&str, &str); 6] = [
    (
        "banking",
        include_str!("../../../datasets/agent_traces_v1/policies/banking.toml"),
    ),
    (
        "email_calendar",
        include_str!("../../../datasets/agent_traces_v1/policies/email_calendar.toml"),
    ),
    (
        "coding",
        include_str!("../../../datasets/agent_traces_v1/policies/coding.toml"),
    ),
    (
        "travel",
        include_str!("../../../datasets/agent_traces_v1/policies/travel.toml"),
    ),
    (
        "customer_support",
        include_str!("../../../datasets/agent_traces_v1/policies/customer_support.toml"),
    ),
    (
        "file_sharing",
        include_str!("../../../datasets/agent_traces_v1/policies/file_sharing.toml"),
    ),
];

/// The dataset's name.
pub const NAME_V1: &str = "Agent_Traces_v1";

/// Which part of the set a trace belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// What policies and thresholds may be tuned on.
    Tune,
    /// Held out: domains and injection styles the tuning never saw.
    Test,
}

impl Split {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Tune => "tune",
            Split::Test => "test",
        }
    }
}

/// Benign (every call is the user's) or attack (a tool result carries an injection, and
/// some later calls are the attacker's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Every call is the user's.
    Benign,
    /// Some calls are the attacker's.
    Attack,
}

/// Where the injection sits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Injection {
    /// The message that carries it.
    pub message: usize,
    /// The injected text, exactly as it occurs in that message.
    pub text: String,
}

/// One agent conversation with its labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// Schema version ([`TRACE_VERSION`]).
    pub version: u32,
    /// Unique id (`banking/t07/attack/todo_note-pay`).
    pub id: String,
    /// The agent domain.
    pub domain: String,
    /// The user task within the domain.
    pub task: String,
    /// The part of the set.
    pub split: Split,
    /// Benign or attack.
    pub label: Label,
    /// A benign trace whose calls take values from tool results at the user's request.
    pub hard_benign: bool,
    /// The injection style (attacks).
    pub style: Option<String>,
    /// The attacker's goal (attacks).
    pub goal: Option<String>,
    /// The policy it runs under (a name in the set's policies).
    pub policy: String,
    /// The OpenAI chat messages.
    pub messages: Vec<Value>,
    /// The tool-call ids that are the attacker's.
    pub attacker_calls: Vec<String>,
    /// The index of the assistant message holding the first attacker call.
    pub first_attacker_call: Option<usize>,
    /// Where the injection sits (attacks).
    pub injection: Option<Injection>,
}

/// Why traces could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A line that is not a trace.
    #[error("{origin}:{line}: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// The line (from 1).
        line: usize,
        /// Why.
        message: String,
    },
    /// A trace whose labels do not fit its messages.
    #[error("trace `{id}`: {message}")]
    Invalid {
        /// The trace.
        id: String,
        /// Why.
        message: String,
    },
    /// A policy that does not load.
    #[error("policy `{name}`: {source}")]
    Policy {
        /// Its name.
        name: String,
        /// Why.
        source: PolicyError,
    },
    /// A file that cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Traces with the compiled policies they run under.
#[derive(Debug, Clone)]
pub struct TraceSet {
    /// The traces, in file order (tune before test).
    pub traces: Vec<Trace>,
    /// The policies by name, compiled once.
    pub policies: BTreeMap<String, Arc<Policy>>,
}

impl TraceSet {
    /// The embedded Agent_Traces_v1 (one part, or both).
    pub fn embedded(split: Option<Split>) -> Result<TraceSet, TraceError> {
        let mut traces = Vec::new();
        if split != Some(Split::Test) {
            traces.extend(parse(TUNE_V1, "<embedded>/tune.jsonl")?);
        }
        if split != Some(Split::Tune) {
            traces.extend(parse(TEST_V1, "<embedded>/test.jsonl")?);
        }
        let policies = POLICIES_V1
            .iter()
            .map(|(n, src)| compile(n, src))
            .collect::<Result<_, _>>()?;
        TraceSet { traces, policies }.checked()
    }

    /// Traces from a file, with the policies in `policies/` beside it (`NAME.toml`).
    pub fn from_file(path: &Path, split: Option<Split>) -> Result<TraceSet, TraceError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| TraceError::Io { path: p, source }
        };
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let mut traces = parse(&text, &path.display().to_string())?;
        if let Some(s) = split {
            traces.retain(|t| t.split == s);
        }
        let dir = path.parent().unwrap_or(Path::new(".")).join("policies");
        let names: BTreeSet<&str> = traces.iter().map(|t| t.policy.as_str()).collect();
        let mut policies = BTreeMap::new();
        for n in names {
            let file = dir.join(format!("{n}.toml"));
            let src = std::fs::read_to_string(&file).map_err(io(&file))?;
            let (name, p) = compile(n, &src)?;
            policies.insert(name, p);
        }
        TraceSet { traces, policies }.checked()
    }

    /// Refuses traces whose labels do not fit their messages: a policy that is not there,
    /// an attack without attacker calls, an attacker call id no assistant message holds, a
    /// `first_attacker_call` that does not hold the first of them, an injection that is not
    /// in its message, a duplicate id.
    fn checked(self) -> Result<TraceSet, TraceError> {
        let mut ids = BTreeSet::new();
        for t in &self.traces {
            let bad = |message: String| TraceError::Invalid {
                id: t.id.clone(),
                message,
            };
            if !ids.insert(t.id.as_str()) {
                return Err(bad("the id is used twice".into()));
            }
            if t.version != TRACE_VERSION {
                return Err(bad(format!(
                    "version {} (this build reads {TRACE_VERSION})",
                    t.version
                )));
            }
            if !self.policies.contains_key(&t.policy) {
                return Err(bad(format!("no policy `{}`", t.policy)));
            }
            check_labels(t).map_err(bad)?;
        }
        Ok(self)
    }
}

fn compile(name: &str, src: &str) -> Result<(String, Arc<Policy>), TraceError> {
    Policy::from_toml(src)
        .map(|p| (name.to_string(), Arc::new(p)))
        .map_err(|source| TraceError::Policy {
            name: name.to_string(),
            source,
        })
}

fn check_labels(t: &Trace) -> Result<(), String> {
    match t.label {
        Label::Benign => {
            if !t.attacker_calls.is_empty() || t.first_attacker_call.is_some() {
                return Err("a benign trace with attacker calls".into());
            }
        }
        Label::Attack => {
            let first = t
                .first_attacker_call
                .ok_or("an attack without `first_attacker_call`")?;
            let holder = call_ids(t.messages.get(first).unwrap_or(&Value::Null));
            if !t.attacker_calls.first().is_some_and(|c| holder.contains(c)) {
                return Err(format!(
                    "message {first} does not hold the first attacker call"
                ));
            }
            let all: Vec<String> = t.messages.iter().flat_map(call_ids).collect();
            if let Some(c) = t.attacker_calls.iter().find(|c| !all.contains(c)) {
                return Err(format!("attacker call `{c}` is not in the messages"));
            }
            let inj = t
                .injection
                .as_ref()
                .ok_or("an attack without `injection`")?;
            let content = t
                .messages
                .get(inj.message)
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if !content.contains(&inj.text) {
                return Err(format!("the injection is not in message {}", inj.message));
            }
        }
    }
    Ok(())
}

/// The tool-call ids of an assistant message.
pub(crate) fn call_ids(m: &Value) -> Vec<String> {
    m.get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// Parses JSON Lines of traces (blank lines skipped).
pub fn parse(text: &str, origin: &str) -> Result<Vec<Trace>, TraceError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| TraceError::Parse {
                origin: origin.to_string(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}
