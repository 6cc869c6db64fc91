//! The llm backend: one model call per prompt layer through `rampart-llm`.
//!
//! - **Round 1** ([`Evaluator::assess`]): the user layer gets the relational prompt (does it
//!   take part in a reciprocal exchange with the deployer's instructions, which it sees as
//!   context?), each trusted layer the coherence prompt (is it coherent, non-manipulative
//!   deployer text?). Every text is fenced with a per-call random nonce and described as
//!   data ([`crate::prompt`]). The answer is a JSON object checked against a schema; its
//!   numbers go through [`Neutrosophic::checked`]; its violation names become
//!   [`TrustViolation`]s of the user layer (a trusted layer is never accused of violating
//!   itself); its reasoning is redacted ([`rampart_llm::redact_copied`]) and capped.
//! - **Circle rounds** ([`Evaluator::observe`], [`Evaluator::conclude`]): round 2 shows the
//!   model the peers' round-1 numbers and violation names (never their reasoning) and asks
//!   for pattern names; round 3 asks each layer's final triple given the agreed patterns.
//! - **Outcomes** ([`OutcomeMap`]): what a call that gave no usable triple MEANS is
//!   configuration, never a neutral default. A refusal is a violation by default (judge
//!   models refuse to score offensive text: fail closed, the layer's triple is (0, 0, 1));
//!   unparseable, empty, truncated answers and invalid triples fail the evaluation by
//!   default; each may be set to `fail`, `violation` or `indeterminate` (0, 1, 0). Timeouts,
//!   HTTP errors and spent budgets always fail. A mapping applied is recorded
//!   (`"refused→violation"`) in the assessment and the layer's evidence.
//! - **Cost**: every call that reached the server counts, with its tokens and cost, per
//!   model; a failure carries the cost spent before it.
//! - **Deadline**: each call gets what is left of the layer's deadline as its timeout.

use crate::evaluator::{
    Assessment, Evaluator, EvaluatorError, LayerText, Observation, PeerView, RelateInput,
    implied_patterns,
};
use crate::model::normalize_violations;
use crate::prompt::{self, AnswerError, Round3, Shown, TripleAnswer};
use crate::{Backend, LayerAssessment, Neutrosophic, PromptLayer, RelationalCost, TrustViolation};
use rampart_llm::{
    ChatRequest, Completion, Endpoint, EndpointEnv, EndpointError, LlmClient, Message, Outcome,
    redact_copied,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Time kept back from the layer's deadline, so a call that runs out of time ends as a
/// `timeout` outcome before the pipeline's own budget check.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);

/// What an outcome that gave no usable triple means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeAction {
    /// The evaluation fails: no label; the pipeline layer's fail mode decides.
    Fail,
    /// The layer's triple is (0, 0, 1): a violation (fail closed).
    Violation,
    /// The layer's triple is (0, 1, 0): nothing is known.
    Indeterminate,
}

impl OutcomeAction {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            OutcomeAction::Fail => "fail",
            OutcomeAction::Violation => "violation",
            OutcomeAction::Indeterminate => "indeterminate",
        }
    }

    /// The triple it stands for (`None` for `fail`).
    pub fn triple(self) -> Option<Neutrosophic> {
        match self {
            OutcomeAction::Fail => None,
            OutcomeAction::Violation => Some(Neutrosophic::from_evidence(1.0, 0.0)),
            OutcomeAction::Indeterminate => Some(Neutrosophic::from_evidence(0.0, 1.0)),
        }
    }
}

fn violation() -> OutcomeAction {
    OutcomeAction::Violation
}
fn fail() -> OutcomeAction {
    OutcomeAction::Fail
}

/// What each outcome without a usable triple means (`outcomes = { … }`). Timeouts, HTTP
/// errors and spent budgets are not here: they always fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeMap {
    /// The model declined. Default `violation`: judge models refuse to score offensive
    /// text, so a refusal is read as a violation (fail closed).
    #[serde(default = "violation")]
    pub refused: OutcomeAction,
    /// No JSON object of the schema could be read. Default `fail`.
    #[serde(default = "fail")]
    pub unparseable: OutcomeAction,
    /// The reply had no content. Default `fail`.
    #[serde(default = "fail")]
    pub empty: OutcomeAction,
    /// The reply hit the output-token limit. Default `fail`.
    #[serde(default = "fail")]
    pub truncated: OutcomeAction,
    /// The numbers are not a triple (out of [0, 1], not finite, or a sum more than 0.25
    /// from 1). Default `fail`.
    #[serde(default = "fail")]
    pub invalid_triple: OutcomeAction,
}

impl Default for OutcomeMap {
    fn default() -> Self {
        Self {
            refused: violation(),
            unparseable: fail(),
            empty: fail(),
            truncated: fail(),
            invalid_triple: fail(),
        }
    }
}

impl OutcomeMap {
    /// The action for `outcome`; `fail` for outcomes outside the map (timeout, HTTP
    /// error, budget exhausted).
    pub fn action(&self, outcome: &str) -> OutcomeAction {
        match outcome {
            "refused" => self.refused,
            "unparseable" => self.unparseable,
            "empty" => self.empty,
            "truncated" => self.truncated,
            "invalid_triple" => self.invalid_triple,
            _ => OutcomeAction::Fail,
        }
    }
}

/// Options of the llm backend (`[layers.llm]`, or a circle member's `llm` table).
///
/// ```toml
/// [layers.llm]
/// llm = { protocol = "openai", base_url = "http://127.0.0.1:8080/v1", model = "smollm2-135m" }
/// base_url_env = "RAMPART_RELATIONAL_URL"
/// model_env = "RAMPART_RELATIONAL_MODEL"
/// max_chars = 6000
/// max_tokens = 256
/// outcomes = { refused = "violation", unparseable = "fail", invalid_triple = "indeterminate" }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmEvaluatorOptions {
    /// The model endpoint. `base_url` and `model` may be left out when `base_url_env` /
    /// `model_env` name variables that are set.
    pub llm: Endpoint,
    /// An environment variable that, when set and not empty, replaces `llm.base_url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url_env: Option<String>,
    /// An environment variable that, when set and not empty, replaces `llm.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_env: Option<String>,
    /// Most characters of each prompt layer shown to the model (cut at a character
    /// boundary; the prompt says when it was). Default 6000.
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
    /// Output-token limit of each call. Default 256.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// What an answer without a usable triple means.
    #[serde(default)]
    pub outcomes: OutcomeMap,
    /// Triples whose sum is more than 0.25 from 1: `strict` (default) makes them
    /// `invalid_triple`; `rescale` divides them by their sum (each component still has to be
    /// in [0, 1], and a sum under 0.05 stays invalid), for small models that do not keep the
    /// sum. A rescaled answer is named in the layer's evidence (`triple_sum→rescale:S`).
    #[serde(default)]
    pub triple_sum: TripleSum,
}

/// How a triple whose components do not sum to about 1 is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TripleSum {
    /// Refused (`invalid_triple`).
    #[default]
    Strict,
    /// Divided by the sum (recorded).
    Rescale,
}

fn default_max_chars() -> usize {
    6000
}
fn default_max_tokens() -> u32 {
    256
}

impl LlmEvaluatorOptions {
    /// Options for the endpoint `llm` with every default.
    pub fn new(llm: Endpoint) -> Self {
        Self {
            llm,
            base_url_env: None,
            model_env: None,
            max_chars: default_max_chars(),
            max_tokens: default_max_tokens(),
            outcomes: OutcomeMap::default(),
            triple_sum: TripleSum::Strict,
        }
    }

    /// The variables that override the endpoint's `base_url` and `model`.
    pub fn endpoint_env(&self) -> EndpointEnv<'_> {
        EndpointEnv {
            base_url_env: self.base_url_env.as_deref(),
            model_env: self.model_env.as_deref(),
        }
    }

    /// Checks the limits.
    pub fn validate(&self) -> Result<(), LlmEvaluatorError> {
        for (key, zero) in [
            ("max_chars", self.max_chars == 0),
            ("max_tokens", self.max_tokens == 0),
        ] {
            if zero {
                return Err(LlmEvaluatorError::Zero(key));
            }
        }
        Ok(())
    }
}

/// Why an llm evaluator could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmEvaluatorError {
    /// The evaluator has no name.
    #[error("the evaluator's name must not be empty")]
    EmptyName,
    /// A limit is 0: its key.
    #[error("{0} must be > 0")]
    Zero(&'static str),
    /// The endpoint, with its environment overrides, cannot be used.
    #[error("llm: {0}")]
    Endpoint(EndpointError),
}

/// An evaluator backed by an LLM. Built once, shared across threads.
#[derive(Debug)]
pub struct LlmEvaluator {
    name: String,
    opts: LlmEvaluatorOptions,
    client: LlmClient,
}

/// How one call ended, before the outcome map.
enum Answer {
    /// A JSON object that passed the schema check.
    Value(Value),
    /// No usable answer: the outcome's name and what happened (no input text).
    Failed(&'static str, String),
}

/// The outcome of a call that gave a usable object, or the mapped meaning of one that did
/// not.
enum Mapped<T> {
    Answer(T),
    /// The outcome map turned `outcome` into `action`.
    As {
        outcome: &'static str,
        action: OutcomeAction,
    },
}

impl LlmEvaluator {
    /// Builds the evaluator: checks the options and builds the client.
    pub fn new(
        name: impl Into<String>,
        opts: LlmEvaluatorOptions,
    ) -> Result<Self, LlmEvaluatorError> {
        let name = name.into();
        if name.is_empty() {
            return Err(LlmEvaluatorError::EmptyName);
        }
        opts.validate()?;
        let config = opts
            .llm
            .resolve(opts.endpoint_env())
            .map_err(LlmEvaluatorError::Endpoint)?;
        let client = LlmClient::new(config).map_err(|e| LlmEvaluatorError::Endpoint(e.into()))?;
        Ok(Self { name, opts, client })
    }

    /// The options.
    pub fn options(&self) -> &LlmEvaluatorOptions {
        &self.opts
    }

    /// The client's warnings (an API-key variable that is not set, a model without a
    /// price).
    pub fn warnings(&self) -> &[String] {
        self.client.warnings()
    }

    fn model_name(&self) -> &str {
        &self.client.config().model
    }

    fn error(&self, outcome: &str, detail: String, cost: &RelationalCost) -> EvaluatorError {
        EvaluatorError::Outcome {
            outcome: outcome.into(),
            detail,
            cost: Box::new(cost.clone()),
        }
    }

    /// One call: the request with what is left of the deadline, its cost added to `cost`,
    /// its outcome named.
    fn call(
        &self,
        system: String,
        messages: Vec<Message>,
        schema: Value,
        deadline: Instant,
        cost: &mut RelationalCost,
        texts: &[&str],
    ) -> Answer {
        let left = deadline.saturating_duration_since(Instant::now() + DEADLINE_MARGIN);
        if left.is_zero() {
            return Answer::Failed("timeout", "the deadline passed before the call".into());
        }
        let cfg_timeout = self.client.config().timeout_ms;
        let timeout_ms =
            cfg_timeout.min(u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1));
        let done: Completion = self.client.complete(&ChatRequest {
            system,
            messages,
            schema: Some(schema),
            max_tokens: Some(self.opts.max_tokens),
            timeout_ms: Some(timeout_ms),
            top_logprobs: None,
        });
        if done.attempts > 0 || done.usage.is_some() {
            let u = done.usage.unwrap_or_default();
            cost.add_call(
                self.model_name(),
                u.input_tokens,
                u.output_tokens,
                done.cost_usd,
            );
        }
        match done.outcome {
            Outcome::Ok { value, .. } => Answer::Value(value),
            Outcome::Refused { reason } => Answer::Failed("refused", reason),
            Outcome::Unparseable { detail } => Answer::Failed("unparseable", detail),
            Outcome::Empty => Answer::Failed("empty", "the reply had no content".into()),
            Outcome::Truncated => Answer::Failed(
                "truncated",
                format!("the reply hit the {}-token limit", self.opts.max_tokens),
            ),
            Outcome::Timeout => {
                Answer::Failed("timeout", format!("no answer within {timeout_ms} ms"))
            }
            Outcome::HttpError { status, detail } => {
                // A server's error message may echo the prompt.
                let detail = redact_copied(&detail, texts);
                Answer::Failed(
                    "http_error",
                    match status {
                        Some(s) => format!("HTTP {s}: {detail}"),
                        None => detail,
                    },
                )
            }
            Outcome::BudgetExhausted {
                window,
                resource,
                limit,
                used,
            } => {
                let (window, resource) = (window.name(), resource.name());
                Answer::Failed(
                    "budget_exhausted",
                    format!("{window} {resource} budget spent ({used} of {limit}); no call made"),
                )
            }
        }
    }

    /// Applies the outcome map: a usable answer, a mapped meaning, or the failure.
    fn map<T>(
        &self,
        r: Result<T, (&'static str, String)>,
        what: &str,
        cost: &RelationalCost,
    ) -> Result<Mapped<T>, EvaluatorError> {
        match r {
            Ok(t) => Ok(Mapped::Answer(t)),
            Err((outcome, detail)) => match self.opts.outcomes.action(outcome) {
                OutcomeAction::Fail => Err(self.error(outcome, format!("{what}: {detail}"), cost)),
                action => Ok(Mapped::As { outcome, action }),
            },
        }
    }

    /// Rounds 1 and 3: one call per layer.
    fn triples(
        &self,
        input: &RelateInput<'_>,
        round3: Option<(&Assessment, &[String])>,
    ) -> Result<Assessment, EvaluatorError> {
        let shown: Vec<Shown> = input
            .layers
            .iter()
            .map(|l| Shown::of(l, self.opts.max_chars))
            .collect();
        let texts = segment_texts(input);
        let mut cost = RelationalCost::default();
        let mut layers = Vec::with_capacity(input.layers.len());
        let mut violations = Vec::new();
        let mut mapped: Vec<String> = Vec::new();
        for (l, s) in input.layers.iter().zip(&shown) {
            let nonce =
                prompt::nonce(&texts).map_err(|e| self.error("failed", e.to_string(), &cost))?;
            let r3 = round3.map(|(own, patterns)| Round3 {
                patterns,
                first: own
                    .layers
                    .iter()
                    .find(|x| x.layer == l.layer)
                    .map(|x| &x.value),
            });
            let answer = self.call(
                prompt::triple_system(l.layer),
                triple_messages(l.layer, &nonce, s, &shown, r3),
                prompt::triple_schema(),
                input.deadline,
                &mut cost,
                &texts,
            );
            let checked = self.check_triple(answer);
            let what = format!("{} layer", l.layer);
            let mut evidence = vec![prompt::prompt_evidence()];
            let (value, reasoning) = self.layer_value(
                l,
                self.map(checked, &what, &cost)?,
                &texts,
                &mut evidence,
                &mut mapped,
                &mut violations,
            );
            layers.push(LayerAssessment {
                layer: l.layer,
                segments: l.segments.clone(),
                bytes: l.bytes(),
                value,
                evidence,
                reasoning,
            });
        }
        mapped.sort();
        mapped.dedup();
        Ok(Assessment {
            layers,
            violations: normalize_violations(violations),
            patterns: Vec::new(),
            model: Some(self.model_name().to_string()),
            outcome: (!mapped.is_empty()).then(|| mapped.join(",")),
            cost,
        })
    }

    /// The triple of an answer, or the outcome that stands for a missing or bad one.
    fn check_triple(&self, answer: Answer) -> Result<TripleAnswer, (&'static str, String)> {
        match answer {
            Answer::Value(v) => {
                prompt::parse_triple(&v, self.opts.triple_sum == TripleSum::Rescale).map_err(|e| {
                    match e {
                        AnswerError::Shape(d) => ("unparseable", d),
                        AnswerError::Triple(t) => ("invalid_triple", t.to_string()),
                    }
                })
            }
            Answer::Failed(o, d) => Err((o, d)),
        }
    }

    /// A layer's triple and reasoning from its mapped answer: the answer's own (its
    /// violations, of an untrusted layer, added to `violations`), or the triple the outcome
    /// map gives. A rescaled or mapped answer is noted in the layer's `evidence` and in
    /// `mapped`.
    fn layer_value(
        &self,
        l: &LayerText<'_>,
        answer: Mapped<TripleAnswer>,
        texts: &[&str],
        evidence: &mut Vec<String>,
        mapped: &mut Vec<String>,
        violations: &mut Vec<TrustViolation>,
    ) -> (Neutrosophic, Option<String>) {
        match answer {
            Mapped::Answer(a) => {
                if let Some(sum) = a.rescaled_from {
                    let m = format!("triple_sum→rescale:{sum:.2}");
                    evidence.push(m.clone());
                    mapped.push(m);
                }
                if !l.layer.is_trusted() {
                    violations.extend(a.violations.iter().map(|&kind| TrustViolation {
                        kind,
                        layer: l.layer,
                        evidence: vec![format!("llm:{}", self.name)],
                    }));
                }
                let r = redact_copied(&a.reasoning, texts);
                let r = prompt::cap_chars(r.trim(), prompt::MAX_REASONING);
                (a.value, (!r.is_empty()).then_some(r))
            }
            Mapped::As { outcome, action } => {
                let m = format!("{outcome}→{}", action.name());
                evidence.push(m.clone());
                mapped.push(m);
                // `As` is never built for `fail`.
                let v = action
                    .triple()
                    .unwrap_or_else(|| Neutrosophic::from_evidence(1.0, 0.0));
                (v, None)
            }
        }
    }
}

/// The messages of a layer's triple call: the layer's worked examples, then the question.
fn triple_messages(
    layer: PromptLayer,
    nonce: &str,
    target: &Shown,
    shown: &[Shown],
    round3: Option<Round3<'_>>,
) -> Vec<Message> {
    prompt::triple_examples(layer)
        .into_iter()
        .flat_map(|(q, a)| [Message::user(q), Message::assistant(a)])
        .chain([Message::user(prompt::triple_user(
            nonce, target, shown, round3,
        ))])
        .collect()
}

/// The request's texts indexed by segment index ("" for segments outside the layers), so a
/// redaction's span references name the request's segments.
fn segment_texts<'a>(input: &RelateInput<'a>) -> Vec<&'a str> {
    let n = input
        .layers
        .iter()
        .flat_map(|l| l.segments.iter().copied())
        .max()
        .map_or(0, |m| m + 1);
    let mut out = vec![""; n];
    for l in input.layers {
        for (&i, &t) in l.segments.iter().zip(&l.texts) {
            out[i] = t;
        }
    }
    out
}

impl Evaluator for LlmEvaluator {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> Backend {
        Backend::Llm
    }

    fn model(&self) -> Option<&str> {
        Some(self.model_name())
    }

    fn assess(&self, input: &RelateInput<'_>) -> Result<Assessment, EvaluatorError> {
        self.triples(input, None)
    }

    /// Round 2: one call showing the layers and every member's round-1 numbers and
    /// violation names; the answer's pattern names are cleaned ([`prompt::clean_pattern`]),
    /// those that copy 20 or more characters of the input are dropped, at most
    /// [`prompt::MAX_PATTERNS`] are kept. An outcome the map turns into `violation` or
    /// `indeterminate` reports the patterns the member's own round-1 assessment implies.
    fn observe(
        &self,
        input: &RelateInput<'_>,
        own: &Assessment,
        peers: &[PeerView<'_>],
    ) -> Result<Observation, EvaluatorError> {
        let shown: Vec<Shown> = input
            .layers
            .iter()
            .map(|l| Shown::of(l, self.opts.max_chars))
            .collect();
        let texts = segment_texts(input);
        let mut cost = RelationalCost::default();
        let nonce =
            prompt::nonce(&texts).map_err(|e| self.error("failed", e.to_string(), &cost))?;
        let answer = self.call(
            prompt::observe_system(),
            vec![Message::user(prompt::observe_user(
                &nonce, &shown, own, peers,
            ))],
            prompt::patterns_schema(),
            input.deadline,
            &mut cost,
            &texts,
        );
        let read = match answer {
            Answer::Value(v) => v
                .get("patterns")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .ok_or((
                    "unparseable",
                    "patterns missing or not an array".to_string(),
                )),
            Answer::Failed(o, d) => Err((o, d)),
        };
        let patterns = match self.map(read, "round 2", &cost)? {
            Mapped::Answer(raw) => {
                let mut out: Vec<String> = Vec::new();
                for p in raw.iter().filter_map(|p| prompt::clean_pattern(p)) {
                    let copied =
                        redact_copied(&p.replace(['_', ':'], " "), &texts).contains("[input s");
                    if !copied && !out.contains(&p) {
                        out.push(p);
                    }
                    if out.len() == prompt::MAX_PATTERNS {
                        break;
                    }
                }
                out.sort();
                out
            }
            Mapped::As { .. } => implied_patterns(own),
        };
        Ok(Observation { patterns, cost })
    }

    /// Round 3: each layer's final triple, asked with the agreed patterns and the member's
    /// round-1 triple (the same prompt, schema and outcome map as round 1).
    fn conclude(
        &self,
        input: &RelateInput<'_>,
        own: &Assessment,
        consensus: &[String],
    ) -> Result<Assessment, EvaluatorError> {
        self.triples(input, Some((own, consensus)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn options_default_and_refuse_unknown_fields() {
        let o: LlmEvaluatorOptions = toml::from_str(
            "llm = { protocol = \"openai\", base_url = \"http://x/v1\", model = \"m\" }",
        )
        .unwrap();
        assert_eq!(o.max_chars, 6000);
        assert_eq!(o.max_tokens, 256);
        assert_eq!(o.outcomes, OutcomeMap::default());
        assert_eq!(o.outcomes.refused, OutcomeAction::Violation);
        assert_eq!(o.outcomes.action("timeout"), OutcomeAction::Fail);
        assert_eq!(o.outcomes.action("http_error"), OutcomeAction::Fail);
        for bad in [
            "llm = {}\nsurprise = 1",
            "llm = {}\noutcomes = { timeout = \"violation\" }",
            "llm = {}\noutcomes = { refused = \"neutral\" }",
        ] {
            assert!(toml::from_str::<LlmEvaluatorOptions>(bad).is_err(), "{bad}");
        }
        let o: LlmEvaluatorOptions = toml::from_str(
            "llm = {}\noutcomes = { refused = \"fail\", invalid_triple = \"indeterminate\" }",
        )
        .unwrap();
        assert_eq!(o.outcomes.refused, OutcomeAction::Fail);
        assert_eq!(o.outcomes.invalid_triple, OutcomeAction::Indeterminate);
        assert_eq!(o.outcomes.empty, OutcomeAction::Fail);
    }

    #[test]
    fn actions_are_the_promised_triples() {
        let v = OutcomeAction::Violation.triple().unwrap();
        assert_eq!((v.truth, v.indeterminacy, v.falsehood), (0.0, 0.0, 1.0));
        let i = OutcomeAction::Indeterminate.triple().unwrap();
        assert_eq!((i.truth, i.indeterminacy, i.falsehood), (0.0, 1.0, 0.0));
        assert_eq!(OutcomeAction::Fail.triple(), None);
    }

    #[test]
    fn bad_options_do_not_build() {
        let llm: Endpoint = toml::from_str(
            "protocol = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"",
        )
        .unwrap();
        let mut o = LlmEvaluatorOptions::new(llm.clone());
        assert!(LlmEvaluator::new("a", o.clone()).is_ok());
        assert!(LlmEvaluator::new("", o.clone()).is_err());
        o.max_chars = 0;
        assert!(
            LlmEvaluator::new("a", o)
                .unwrap_err()
                .to_string()
                .contains("max_chars")
        );
        let mut o = LlmEvaluatorOptions::new(llm);
        o.max_tokens = 0;
        assert!(
            LlmEvaluator::new("a", o)
                .unwrap_err()
                .to_string()
                .contains("max_tokens")
        );
        let o = LlmEvaluatorOptions::new(Endpoint::default());
        assert!(
            LlmEvaluator::new("a", o)
                .unwrap_err()
                .to_string()
                .starts_with("llm:")
        );
    }
}
