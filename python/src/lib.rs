//! Rampart's Python binding (`rampart._rampart`): the library facade as a Python extension
//! module. The Python package (`python/rampart`) wraps it with the Pythonic API; every
//! decision is made here, by the Rust library, never in Python.
//!
//! * A [`Firewall`] is built once (the embedded default pipeline, a configuration file or
//!   TOML text, optionally a tool policy) and is immutable: one object serves every thread.
//!   Every scan releases the GIL.
//! * Inputs arrive as plain values: text, `(role, text)` pairs, or JSON text for chat
//!   messages and tool arguments (the Python layer turns SDK objects into JSON), so nothing
//!   here walks Python objects while the GIL is released.
//! * Errors are exception classes under `RampartError`; a panic inside the library becomes
//!   `InternalError`, never a `PanicException` crossing into Python.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use rampart::core::{InputError as CoreInputError, Role, ScanOutcome, ScanRequest, Segment};
use rampart::output::tool_gate::{
    PendingCall, ToolGate, arguments_of, binding, conversation_segments,
};
use rampart::output::{
    OutputConfig, OutputContext, OutputOutcome, OutputScanner, PromptIndex,
    canary::{Canary, CanarySet},
};
use rampart::tools::{CallContext, CallerInfo, Policy};
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

create_exception!(
    _rampart,
    RampartError,
    PyException,
    "Base class of every error Rampart raises."
);
create_exception!(
    _rampart,
    ConfigError,
    RampartError,
    "A pipeline configuration or tool policy that cannot be read or built."
);
create_exception!(
    _rampart,
    InputTooLarge,
    RampartError,
    "An input over the configured limits (bytes, segments, conversation size)."
);
create_exception!(
    _rampart,
    InputError,
    RampartError,
    "An input that is not what the call takes (an unknown role, messages that are not a chat)."
);
create_exception!(
    _rampart,
    ToolsNotConfigured,
    RampartError,
    "A tool-call method on a firewall built without a tool policy."
);
create_exception!(
    _rampart,
    ApprovalError,
    RampartError,
    "An approval that cannot be approved or denied (unknown, expired, decided, self-approval)."
);
create_exception!(
    _rampart,
    InternalError,
    RampartError,
    "A bug in Rampart (a panic caught at the binding): please report it."
);

/// Runs `f` with panics caught: a panic becomes [`InternalError`].
fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(InternalError::new_err(format!(
                "internal error (please report it): {msg}"
            )))
        }
    }
}

/// Runs `f` with the GIL released and panics caught.
fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> PyResult<T> + Send) -> PyResult<T> {
    py.detach(|| guarded(f))
}

fn input_error(e: CoreInputError) -> PyErr {
    match e {
        CoreInputError::TooLarge { .. } | CoreInputError::TooManySegments { .. } => {
            InputTooLarge::new_err(e.to_string())
        }
        other => InputError::new_err(other.to_string()),
    }
}

fn parse_json(what: &str, text: &str) -> PyResult<Value> {
    serde_json::from_str(text).map_err(|e| InputError::new_err(format!("{what}: {e}")))
}

fn role(name: &str) -> PyResult<Role> {
    serde_json::from_value(Value::String(name.to_string())).map_err(|_| {
        InputError::new_err(format!(
            "unknown role `{name}` (system, developer, user, assistant, tool, retrieved)"
        ))
    })
}

/// One decision: the action, and the evidence as the CLI's JSON (`rampart scan --json`).
#[pyclass(frozen, module = "rampart._rampart", name = "NativeDecision")]
struct NativeDecision {
    action: &'static str,
    risk: String,
    json: String,
}

impl NativeDecision {
    /// Serialized as `rampart scan --json` writes a decision: the decision as it is, or,
    /// with the sanitized segments, through a JSON value with `sanitized` added.
    fn of(outcome: &ScanOutcome, sanitized: bool) -> PyResult<Self> {
        let d = &outcome.decision;
        let internal = |e: serde_json::Error| InternalError::new_err(e.to_string());
        let json = match (&outcome.sanitized, sanitized) {
            (Some(s), true) => {
                let mut v = serde_json::to_value(d).map_err(internal)?;
                if let Value::Object(m) = &mut v {
                    m.insert(
                        "sanitized".into(),
                        serde_json::to_value(s).map_err(internal)?,
                    );
                }
                v.to_string()
            }
            _ => serde_json::to_string(d).map_err(internal)?,
        };
        Ok(NativeDecision {
            action: d.action.name(),
            risk: d.risk.name().to_string(),
            json,
        })
    }
}

impl NativeDecision {
    /// An output scan's decision, with the sanitized response as the one sanitized segment.
    fn of_output(o: &OutputOutcome) -> PyResult<Self> {
        let outcome = ScanOutcome {
            decision: o.decision.clone(),
            sanitized: o.sanitized.clone().map(|s| vec![s]),
        };
        Self::of(&outcome, true)
    }
}

#[pymethods]
impl NativeDecision {
    /// `ALLOW`, `SANITIZE` or `BLOCK`.
    #[getter]
    fn action(&self) -> &'static str {
        self.action
    }

    /// The risk class (`low_risk`, `medium_risk`, `high_risk`).
    #[getter]
    fn risk(&self) -> &str {
        &self.risk
    }

    /// The decision as JSON text, as `rampart scan --json` prints it.
    fn to_json(&self) -> &str {
        &self.json
    }
}

/// The compiled pipeline, its output scanner, and the tool gate when a policy was given.
#[pyclass(frozen, module = "rampart._rampart", name = "NativeFirewall")]
struct NativeFirewall {
    pipeline: rampart::Pipeline,
    output: Arc<OutputScanner>,
    gate: Option<Arc<ToolGate>>,
}

fn build(builder: rampart::Builder, policy: Option<&str>) -> PyResult<NativeFirewall> {
    let config = builder
        .config()
        .map_err(|e| ConfigError::new_err(e.to_string()))?;
    let output = OutputScanner::build(&config, &OutputConfig::default())
        .map_err(|e| ConfigError::new_err(e.to_string()))?;
    let pipeline = builder
        .build()
        .map_err(|e| ConfigError::new_err(e.to_string()))?;
    let gate = policy
        .map(|src| -> PyResult<Arc<ToolGate>> {
            let p = Policy::from_toml(src).map_err(|e| ConfigError::new_err(e.to_string()))?;
            let g = ToolGate::builder(p)
                .build()
                .map_err(|e| InternalError::new_err(e.to_string()))?;
            Ok(Arc::new(g))
        })
        .transpose()?;
    Ok(NativeFirewall {
        pipeline,
        output: Arc::new(output),
        gate,
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl NativeFirewall {
    fn gate(&self) -> PyResult<&ToolGate> {
        self.gate.as_deref().ok_or_else(|| {
            ToolsNotConfigured::new_err(
                "this firewall has no tool policy: build it with tools_policy=…",
            )
        })
    }

    fn run(
        &self,
        mut req: ScanRequest,
        sanitize: bool,
        id: Option<String>,
    ) -> PyResult<NativeDecision> {
        req.id = id;
        let outcome = self.pipeline.scan(&req).map_err(input_error)?;
        NativeDecision::of(&outcome, sanitize)
    }
}

#[pymethods]
impl NativeFirewall {
    /// Builds a firewall: `config` is `None` (the embedded default), `("file", path)` or
    /// `("toml", text)`; `policy` the tool policy's TOML text.
    #[new]
    #[pyo3(signature = (config=None, policy=None))]
    fn new(config: Option<(String, String)>, policy: Option<String>) -> PyResult<Self> {
        guarded(|| {
            let builder = match config {
                None => rampart::Builder::new(),
                Some((kind, v)) if kind == "file" => rampart::Builder::from_file(v),
                Some((kind, v)) if kind == "toml" => rampart::Builder::from_toml(v, "<python>"),
                Some((kind, _)) => {
                    return Err(InputError::new_err(format!("unknown config kind `{kind}`")));
                }
            };
            build(builder, policy.as_deref())
        })
    }

    /// Scans one text as a user message.
    #[pyo3(signature = (text, sanitize=false, id=None))]
    fn scan_text(
        &self,
        py: Python<'_>,
        text: String,
        sanitize: bool,
        id: Option<String>,
    ) -> PyResult<NativeDecision> {
        detached(py, || self.run(ScanRequest::text(text), sanitize, id))
    }

    /// Scans `(role, text)` segments as one request.
    #[pyo3(signature = (segments, sanitize=false, id=None))]
    fn scan_segments(
        &self,
        py: Python<'_>,
        segments: Vec<(String, String)>,
        sanitize: bool,
        id: Option<String>,
    ) -> PyResult<NativeDecision> {
        let segs = segments
            .into_iter()
            .map(|(r, t)| Ok(Segment::new(role(&r)?, t)))
            .collect::<PyResult<Vec<_>>>()?;
        detached(py, || self.run(ScanRequest::segments(segs), sanitize, id))
    }

    /// Scans chat messages (OpenAI or Anthropic, as JSON text): each text a segment of its
    /// role (tool results, and Anthropic `tool_result` blocks, as `tool`).
    #[pyo3(signature = (messages_json, sanitize=false, id=None))]
    fn scan_messages(
        &self,
        py: Python<'_>,
        messages_json: String,
        sanitize: bool,
        id: Option<String>,
    ) -> PyResult<NativeDecision> {
        detached(py, || {
            let messages = parse_json("messages", &messages_json)?;
            let (_, segs) = chat_segments(&messages)?;
            self.run(ScanRequest::segments(segs), sanitize, id)
        })
    }

    /// Scans texts, each as a user message, in order (one GIL release for all).
    #[pyo3(signature = (texts, sanitize=false))]
    fn scan_batch(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        sanitize: bool,
    ) -> PyResult<Vec<NativeDecision>> {
        detached(py, || {
            texts
                .into_iter()
                .map(|t| self.run(ScanRequest::text(t), sanitize, None))
                .collect()
        })
    }

    /// Decides a tool call as the service does (policy, provenance against `messages_json`,
    /// approval tokens); the answer's JSON (no argument values).
    #[pyo3(signature = (tool, arguments_json, messages_json=None, conversation=None, caller_json=None, requester=None, approval_token=None))]
    #[allow(clippy::too_many_arguments)] // the Python keyword arguments, one to one
    fn check_tool_call(
        &self,
        py: Python<'_>,
        tool: String,
        arguments_json: String,
        messages_json: Option<String>,
        conversation: Option<String>,
        caller_json: Option<String>,
        requester: Option<String>,
        approval_token: Option<String>,
    ) -> PyResult<String> {
        detached(py, || {
            let gate = self.gate()?;
            let arguments = parse_json("arguments", &arguments_json)?;
            let caller: CallerInfo = match caller_json {
                Some(c) => serde_json::from_value(parse_json("caller", &c)?)
                    .map_err(|e| InputError::new_err(format!("caller: {e}")))?,
                None => CallerInfo::default(),
            };
            let mut context = CallContext {
                caller,
                ..CallContext::default()
            };
            if let Some(m) = messages_json {
                let messages = parse_json("messages", &m)?;
                rampart::read_conversation(&self.pipeline, &messages, &mut context).map_err(
                    |e| match e {
                        rampart::ToolCheckError::Scan(s) => input_error(s),
                        other => InputError::new_err(other.to_string()),
                    },
                )?;
            }
            let tokens: Vec<String> = approval_token.into_iter().collect();
            let key = requester.as_deref().unwrap_or("python");
            let v = gate.decide(
                PendingCall {
                    tool: &tool,
                    arguments: arguments_of(&arguments),
                    conversation: conversation.as_deref(),
                    binding: binding(Some(key), conversation.as_deref()),
                    caller_key: Some(key),
                    context,
                    tokens: &tokens,
                },
                now_ms(),
            );
            Ok(v.answer(None).to_string())
        })
    }

    /// Whether a tool policy was given.
    fn has_tools(&self) -> bool {
        self.gate.is_some()
    }

    /// The approvals waiting for an approver, as JSON (tool, arguments, who asked, expiry).
    fn pending_approvals(&self) -> PyResult<String> {
        guarded(|| {
            let p = self
                .gate()?
                .approvals()
                .pending(now_ms())
                .map_err(|e| InternalError::new_err(e.to_string()))?;
            serde_json::to_string(&p).map_err(|e| InternalError::new_err(e.to_string()))
        })
    }

    /// `approver` approves (or denies) the pending approval `id`; the approval as JSON.
    fn decide_approval(&self, id: String, approver: String, approve: bool) -> PyResult<String> {
        guarded(|| {
            let book = self.gate()?.approvals();
            let r = if approve {
                book.approve(&id, &approver, now_ms())
            } else {
                book.deny(&id, &approver, now_ms())
            };
            let a = r.map_err(|e| ApprovalError::new_err(e.to_string()))?;
            serde_json::to_string(&a).map_err(|e| InternalError::new_err(e.to_string()))
        })
    }

    /// Scans a model's answer: credentials and secrets, the `canaries` planted in the
    /// request, the `system_prompt` leaked (at least the output configuration's
    /// `system_prompt_min_words` of it in a row).
    #[pyo3(signature = (text, system_prompt=None, canaries=Vec::new()))]
    fn scan_output(
        &self,
        py: Python<'_>,
        text: String,
        system_prompt: Option<String>,
        canaries: Vec<String>,
    ) -> PyResult<NativeDecision> {
        detached(py, || {
            let planted = canaries
                .into_iter()
                .map(Canary::from_text)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| InputError::new_err(format!("canary: {e}")))?;
            let min_words = self.output.config().system_prompt_min_words;
            let ctx = OutputContext {
                canaries: CanarySet::new(planted.iter()),
                system_prompt: system_prompt
                    .as_deref()
                    .and_then(|p| PromptIndex::new(p, min_words)),
            };
            let o = self.output.scan(&text, &ctx, None).map_err(input_error)?;
            NativeDecision::of_output(&o)
        })
    }

    /// Scans chat messages and, on SANITIZE, writes each sanitized text back where it came
    /// from (a string content, a text part, a tool result); the decision and the messages
    /// (JSON) to forward.
    #[pyo3(signature = (messages_json))]
    fn sanitize_messages(
        &self,
        py: Python<'_>,
        messages_json: String,
    ) -> PyResult<(NativeDecision, String)> {
        detached(py, || {
            let mut messages = parse_json("messages", &messages_json)?;
            let (c, segs) = chat_segments(&messages)?;
            let outcome = self
                .pipeline
                .scan(&ScanRequest::segments(segs))
                .map_err(input_error)?;
            for s in outcome.sanitized.iter().flatten() {
                if let Some(e) = c.entries().get(s.segment) {
                    write_back(&mut messages, e.message, e.part, &s.text);
                }
            }
            Ok((NativeDecision::of(&outcome, true)?, messages.to_string()))
        })
    }

    /// A fresh canary (random, prefixed), to plant in a system prompt and look for in answers.
    #[staticmethod]
    fn generate_canary() -> PyResult<String> {
        guarded(|| {
            Canary::generate("RAMPART-CANARY")
                .map(|c| c.expose().to_string())
                .map_err(|e| InternalError::new_err(e.to_string()))
        })
    }

    /// A panic inside the library, for the test that shows it arrives as `InternalError`.
    fn _panic_for_test(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || -> PyResult<()> {
            panic!("injected by the binding's test");
        })
    }
}

/// Chat messages (OpenAI or Anthropic) read as a conversation, and its texts as the segments
/// of one scan, as the proxy reads a chat request.
fn chat_segments(
    messages: &Value,
) -> PyResult<(rampart::tools::provenance::Conversation, Vec<Segment>)> {
    let c = rampart::tools::provenance::Conversation::from_messages(messages)
        .map_err(|e| InputError::new_err(e.to_string()))?;
    let (segs, _) = conversation_segments(&c);
    Ok((c, segs))
}

/// Puts a sanitized text back in its place in chat messages. Tool-call arguments are left
/// as they are (the tool gate decides those).
fn write_back(
    messages: &mut Value,
    message: usize,
    part: rampart::tools::provenance::Part,
    text: &str,
) {
    use rampart::tools::provenance::Part;
    let Some(m) = messages.get_mut(message) else {
        return;
    };
    let slot = match part {
        Part::Content => m.get_mut("content"),
        Part::Part(j) => m
            .get_mut("content")
            .and_then(|c| c.get_mut(j))
            .and_then(|p| {
                if p.get("type").and_then(Value::as_str) == Some("tool_result") {
                    p.get_mut("content")
                } else {
                    p.get_mut("text")
                }
            }),
        Part::ToolCall(_) => None,
    };
    if let Some(v) = slot
        && v.is_string()
    {
        *v = Value::String(text.to_string());
    }
}

/// The extension module.
#[pymodule]
fn _rampart(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<NativeFirewall>()?;
    m.add_class::<NativeDecision>()?;
    m.add("RampartError", py.get_type::<RampartError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("InputTooLarge", py.get_type::<InputTooLarge>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("ToolsNotConfigured", py.get_type::<ToolsNotConfigured>())?;
    m.add("ApprovalError", py.get_type::<ApprovalError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
