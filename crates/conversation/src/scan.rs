//! Scanning a conversation: the per-turn decision of the newest call plus the
//! per-conversation part (risk and its history), from a pipeline and the conversation state.
//!
//! A conversation request carries every message so far. Its *calls* are the points where a
//! client would have asked for an answer: the end of each run of non-assistant messages.
//! The newest call is always scanned; earlier calls the state has not seen (history sent for
//! the first time, or a stateless scan) are replayed in order, at most `max_replay` of them,
//! so a conversation judged once in full gets the same risk as one followed call by call.
//!
//! Each call is scanned twice at most: the call's own messages (under the trusted system
//! and developer prompts), and a *window* of the recent user turns joined, with quoted and
//! encoded-looking fragments reassembled, which is where payloads split over turns become
//! one text again. The per-turn risk is the higher of the two.

use crate::agreement::AgreementDetector;
use crate::ledger::{AssistantLedger, HIST_FORGED, HistoryPolicy, apply_history_policy};
use crate::refusal::RefusalDetector;
use crate::risk::OptionsError;
use crate::shared::SharedConversations;
use crate::store::{
    ConversationState, ConversationStore, ObserveError, StoreOptions, TenantStore, TurnVerdict,
};
use crate::{ConversationFinding, ConversationReport, HistoryReport, StateMode, TurnRisk};
use crate::{LedgerOptions, ledger::HistoryCheck};
use rampart_core::conversation::{
    ConversationContext, ConversationEvidence, ConversationRequest, DEFAULT_MAX_TURNS, Turn,
};
use rampart_core::{
    Action, Decision, InputError, LayerResult, LayerStatus, Pipeline, RiskClass, Role,
    SanitizedSegment, ScanRequest, Segment, Trust,
};
use rampart_rules::plans::Compile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use thiserror::Error;

/// Name of the conversation layer in decisions.
pub const CONVERSATION_LAYER: &str = "conversation";
/// Finding: the conversation risk reached `block_at`.
pub const CONV_RISK: &str = "CONV_001";
/// Finding: repeated near-identical rephrasings of a blocked turn.
pub const CONV_REPHRASE: &str = "CONV_002";
/// Finding: the window of recent turns, joined, was flagged.
pub const CONV_WINDOW: &str = "CONV_003";
/// Finding: the model refused several turns of this conversation.
pub const CONV_REFUSALS: &str = "CONV_004";
/// Finding: the fabricated-agreement classifier fired on a user turn (the rules report
/// their own ids, `HIST_002`…`HIST_011`).
pub const HIST_AGREEMENT_MODEL: &str = "HIST_020";

/// Default conversation risk at which the conversation part blocks.
pub const DEFAULT_BLOCK_AT: f32 = 0.8;
/// Default rephrasings of a blocked turn (in the lineage) at which the conversation blocks.
pub const DEFAULT_MAX_REPHRASINGS: u32 = 2;
/// Default refusals in a lineage at which the conversation blocks.
pub const DEFAULT_MAX_REFUSALS: u32 = 2;
/// Default per-turn risk of a rephrasing of a blocked or refused turn.
pub const DEFAULT_REPHRASE_RISK: f32 = 0.8;
/// Default user turns joined in the window view.
pub const DEFAULT_WINDOW_TURNS: usize = 4;
/// Default earlier calls replayed when the state has not seen them.
pub const DEFAULT_MAX_REPLAY: usize = 16;

/// Options of conversation scanning (`[conversation]`), with the store's and the ledger's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConversationOptions {
    /// Conversation risk at which the conversation part blocks.
    pub block_at: f32,
    /// Near-identical rephrasings of blocked turns in the lineage at which it blocks.
    pub max_rephrasings: u32,
    /// Refusals by the model in the lineage at which the conversation blocks (0: never).
    pub max_refusals: u32,
    /// Per-turn risk of a near-identical rephrasing of a turn that was blocked or that the
    /// model refused (rewind and retry).
    pub rephrase_risk: f32,
    /// User turns joined in the window view (below 2: no window scan).
    pub window_turns: usize,
    /// Earlier calls replayed when the state has not seen them.
    pub max_replay: usize,
    /// Most messages in one request.
    pub max_turns: usize,
    /// Earlier messages handed to layers that look at the conversation (the judge).
    pub context_messages: usize,
    /// Bytes of those messages, at most (each message is cut at a character boundary).
    pub context_bytes: usize,
    /// The state: size, time to live and scoring.
    pub store: StoreOptions,
    /// The assistant ledger (forged history), where answers are recorded.
    pub ledger: LedgerOptions,
    /// Look for claims of an earlier agreement the assistant never gave (`HIST_002`…).
    pub agreement: bool,
    /// When the agreement pack's regexes compile (`at_build` when unset; see
    /// [`Compile`]). `rampart scan` sets `first_use`; `rampart serve` compiles at build
    /// whatever this says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<Compile>,
}

impl Default for ConversationOptions {
    fn default() -> Self {
        Self {
            block_at: DEFAULT_BLOCK_AT,
            max_rephrasings: DEFAULT_MAX_REPHRASINGS,
            rephrase_risk: DEFAULT_REPHRASE_RISK,
            max_refusals: DEFAULT_MAX_REFUSALS,
            window_turns: DEFAULT_WINDOW_TURNS,
            max_replay: DEFAULT_MAX_REPLAY,
            max_turns: DEFAULT_MAX_TURNS,
            context_messages: 8,
            context_bytes: 8192,
            store: StoreOptions::default(),
            ledger: LedgerOptions::default(),
            agreement: true,
            compile: None,
        }
    }
}

impl ConversationOptions {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if !(self.block_at.is_finite() && self.block_at > 0.0 && self.block_at <= 1.0) {
            return Err(OptionsError::BlockAt(self.block_at));
        }
        if self.max_turns == 0 {
            return Err(OptionsError::MaxTurns(self.max_turns));
        }
        if !(0.0..=1.0).contains(&self.rephrase_risk) {
            return Err(OptionsError::Weight {
                field: "rephrase_risk",
                value: self.rephrase_risk,
            });
        }
        self.store.validate()?;
        self.ledger.validate()
    }
}

/// Why a conversation could not be scanned. Nothing is recorded for a refused request.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ConversationError {
    /// No messages.
    #[error("a conversation needs at least one message in `turns`")]
    Empty,
    /// Too many messages.
    #[error("conversation has {found} messages; the limit is {limit}")]
    TooManyTurns {
        /// Messages sent.
        found: usize,
        /// The configured limit.
        limit: usize,
    },
    /// Too many bytes.
    #[error("conversation is {found} bytes; the limit is {limit} bytes (input is never truncated)")]
    TooLarge {
        /// Bytes sent.
        found: usize,
        /// The pipeline's limit.
        limit: usize,
    },
    /// The pipeline refused a call's request.
    #[error("message {message}: {source}")]
    Input {
        /// Index of the call's last message.
        message: usize,
        /// Why.
        source: InputError,
    },
    /// The state refused an observation.
    #[error(transparent)]
    Observe(#[from] ObserveError),
    /// The options are invalid.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The shared state (`[state] backend = "redis"`) could not be read or written: the
    /// request is not judged without its conversation (fail closed).
    #[error("the shared conversation state is unavailable: {0}")]
    SharedState(String),
}

/// What scanning a conversation returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationOutcome {
    /// The newest call's decision, with the per-conversation part in `conversation`.
    pub decision: Decision,
    /// Sanitized segments of the newest call (SANITIZE only); `segment_messages` in the
    /// report maps them to messages.
    pub sanitized: Option<Vec<SanitizedSegment>>,
    /// Messages to remove before forwarding (forged assistant turns, policy `drop`).
    pub drop_messages: Vec<usize>,
}

/// Scans conversations against one pipeline and one state. Built once, shared.
#[derive(Debug)]
pub struct ConversationScanner {
    pipeline: Arc<Pipeline>,
    options: ConversationOptions,
    mode: StateMode,
    store: Option<Arc<ConversationStore>>,
    ledger: Option<Arc<AssistantLedger>>,
    refusals: RefusalDetector,
    agreement: Option<Arc<AgreementDetector>>,
    /// The partition of the store this scanner reads and writes (an API key id).
    tenant: Option<Arc<str>>,
    /// The shared state, when the store and the ledger live there (several replicas).
    shared: Option<Arc<SharedConversations>>,
}

/// Key material of the throwaway state of a stateless scan: never persisted, never shared,
/// so it needs no secrecy.
const STATELESS_KEY: &[u8] = b"rampart stateless conversation scan";

impl ConversationScanner {
    /// A stateless scanner: each request is judged on its own turns only, every call in it
    /// replayed (`rampart scan`, `rampart eval`).
    pub fn stateless(
        pipeline: Arc<Pipeline>,
        options: ConversationOptions,
    ) -> Result<Self, OptionsError> {
        options.validate()?;
        let agreement = agreement_of(&options)?;
        Ok(Self {
            pipeline,
            options,
            mode: StateMode::Stateless,
            store: None,
            ledger: None,
            refusals: RefusalDetector::new(),
            agreement,
            tenant: None,
            shared: None,
        })
    }

    /// A stateful scanner over a shared store and, where assistant answers are recorded (the
    /// proxy), a ledger.
    pub fn stateful(
        pipeline: Arc<Pipeline>,
        options: ConversationOptions,
        store: Arc<ConversationStore>,
        ledger: Option<Arc<AssistantLedger>>,
    ) -> Result<Self, OptionsError> {
        options.validate()?;
        let agreement = agreement_of(&options)?;
        Ok(Self {
            pipeline,
            options,
            mode: StateMode::Stateful,
            store: Some(store),
            ledger,
            refusals: RefusalDetector::new(),
            agreement,
            tenant: None,
            shared: None,
        })
    }

    /// A stateful scanner over another state, sharing everything compiled (pipeline,
    /// detectors): cheap, for one state per conversation (evaluation replay).
    pub fn with_state(
        &self,
        store: Arc<ConversationStore>,
        ledger: Option<Arc<AssistantLedger>>,
    ) -> Self {
        Self {
            pipeline: self.pipeline.clone(),
            options: self.options.clone(),
            mode: StateMode::Stateful,
            store: Some(store),
            ledger,
            refusals: self.refusals.clone(),
            agreement: self.agreement.clone(),
            tenant: self.tenant.clone(),
            shared: None,
        }
    }

    /// The same scanner over the partition of `tenant` (an API key id) of its store:
    /// cheap (everything compiled is shared), one per request in the service, so one key's
    /// conversations never meet another's.
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        Self {
            pipeline: self.pipeline.clone(),
            options: self.options.clone(),
            mode: self.mode,
            store: self.store.clone(),
            ledger: self.ledger.clone(),
            refusals: self.refusals.clone(),
            agreement: self.agreement.clone(),
            tenant: tenant.map(Arc::from),
            shared: self.shared.clone(),
        }
    }

    /// The same scanner with its store and ledger in `shared` (every replica's): each scan
    /// reads the rows its conversation needs from there and merges its changes back; the
    /// scanner's own store and ledger are not used. A stateless scanner stays stateless.
    pub fn with_shared(mut self, shared: Arc<SharedConversations>) -> Self {
        if self.mode == StateMode::Stateful {
            self.shared = Some(shared);
        }
        self
    }

    /// Whether the state is shared ([`with_shared`](Self::with_shared)): scans and
    /// recorded answers then do blocking I/O.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The partition this scanner reads and writes (an API key id; `None`: the default).
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether `answer` reads as a refusal.
    pub(crate) fn is_refusal(&self, answer: &Turn) -> bool {
        self.refusals.is_refusal(&answer.text)
    }

    /// [`record_answer`](Self::record_answer), reporting a failure of the shared state
    /// (the in-process state cannot fail).
    pub fn try_record_answer(&self, sent: &[Turn], answer: &Turn) -> Result<(), ConversationError> {
        match &self.shared {
            Some(shared) => shared.record_answer(self, sent, answer),
            None => {
                self.record_answer(sent, answer);
                Ok(())
            }
        }
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// The options.
    pub fn options(&self) -> &ConversationOptions {
        &self.options
    }

    /// The shared store (stateful scanners).
    pub fn store(&self) -> Option<&Arc<ConversationStore>> {
        self.store.as_ref()
    }

    /// The ledger, if answers are recorded.
    pub fn ledger(&self) -> Option<&Arc<AssistantLedger>> {
        self.ledger.as_ref()
    }

    /// Records an answer returned to the client for `sent` (the messages forwarded): the
    /// ledger learns it (forged-history detection) and a refusal becomes lineage evidence.
    pub fn record_answer(&self, sent: &[Turn], answer: &Turn) {
        if let Some(shared) = &self.shared {
            // Infallible here: a shared state that fails loses the entry (logged by callers
            // that use `try_record_answer`).
            let _ = shared.record_answer(self, sent, answer);
            return;
        }
        let contents: Vec<String> = sent.iter().map(Turn::content).collect();
        let msgs = as_messages(sent, &contents);
        let answer_text = answer.content();
        if let Some(ledger) = &self.ledger {
            ledger.record_for(self.tenant.as_deref(), &msgs, &answer_text);
        }
        if let Some(store) = &self.store
            && self.refusals.is_refusal(&answer.text)
        {
            store.tenant(self.tenant.as_deref()).note_refusal(&msgs);
        }
    }

    /// Scans a conversation. See the module docs for what is scanned.
    pub fn scan(
        &self,
        req: &ConversationRequest,
    ) -> Result<ConversationOutcome, ConversationError> {
        self.check(req)?;
        if let Some(shared) = &self.shared {
            return shared.scan(self, req);
        }
        let started = Instant::now();
        let contents: Vec<String> = req.turns.iter().map(Turn::content).collect();
        let msgs = as_messages(&req.turns, &contents);

        // A stateless scan gets a throwaway store of its own.
        let owned;
        let shared: &ConversationStore = match &self.store {
            Some(s) => s,
            None => {
                owned = ConversationStore::new(self.options.store.clone(), STATELESS_KEY)?;
                &owned
            }
        };
        // The caller's own partition (per API key in the service).
        let tenant_store = shared.tenant(self.tenant.as_deref());
        let store = &tenant_store;

        let history = self
            .ledger
            .as_ref()
            .map(|l| l.check_for(self.tenant.as_deref(), &msgs));
        let forged: Vec<usize> = history
            .as_ref()
            .map(|h| h.forged.clone())
            .unwrap_or_default();
        let calls = call_ends(&req.turns);
        let known = match self.mode {
            StateMode::Stateful => store
                .lookup(&msgs)
                .map_or(0, |s| s.inherited_from_prefix_len),
            StateMode::Stateless => 0,
        };
        let newest = *calls.last().unwrap_or(&(msgs.len() - 1));
        let pending: Vec<usize> = calls
            .iter()
            .copied()
            .filter(|&b| b + 1 > known || b == newest)
            .collect();
        let skip = pending.len().saturating_sub(self.options.max_replay.max(1));
        let (unscanned, pending) = (skip, &pending[skip..]);
        self.note_history_refusals(store, &req.turns, &msgs, &calls, pending);

        let mut scanned = Vec::with_capacity(pending.len());
        let mut claims = Vec::new();
        let mut last = None;
        for &end in pending {
            let mut step = self.scan_call(store, req, &msgs, &calls, end, &forged)?;
            claims.append(&mut step.claims);
            scanned.push(TurnRisk {
                message: end,
                risk: step.risk,
                action: step.outcome.decision.action,
                window_risk: step.window.as_ref().map(|w| w.risk),
                conversation_risk: step.state.risk,
            });
            last = Some(step);
        }
        let mut step = last.ok_or(ConversationError::Empty)?;
        // The claims of every call scanned now, not only the newest one's.
        step.claims = claims;
        Ok(self.conclude(req, step, scanned, unscanned, history, started))
    }

    fn check(&self, req: &ConversationRequest) -> Result<(), ConversationError> {
        if req.turns.is_empty() {
            return Err(ConversationError::Empty);
        }
        if req.turns.len() > self.options.max_turns {
            return Err(ConversationError::TooManyTurns {
                found: req.turns.len(),
                limit: self.options.max_turns,
            });
        }
        let bytes: usize = req.turns.iter().map(Turn::bytes).sum();
        let limit = self.pipeline.config().limits.max_bytes;
        if bytes > limit {
            return Err(ConversationError::TooLarge {
                found: bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Refusals in the history (answers to earlier calls) become lineage evidence; noting one
    /// is idempotent, so re-sent history is not counted twice. Only the answers around the
    /// calls scanned now are looked at.
    fn note_history_refusals(
        &self,
        store: &TenantStore<'_>,
        turns: &[Turn],
        msgs: &[(Role, &str)],
        calls: &[usize],
        pending: &[usize],
    ) {
        if self.mode == StateMode::Stateless {
            return; // replayed calls take their refusal from the history directly
        }
        let first = pending.first().copied().unwrap_or(0);
        let before = calls.iter().rev().find(|&&c| c < first).copied();
        for &c in before.iter().chain(pending.iter()) {
            if turns
                .get(c + 1)
                .is_some_and(|t| t.role == Role::Assistant && self.refusals.is_refusal(&t.text))
            {
                store.note_refusal(&msgs[..=c]);
            }
        }
    }

    /// Scans one call and records it in the state.
    fn scan_call(
        &self,
        store: &TenantStore<'_>,
        req: &ConversationRequest,
        msgs: &[(Role, &str)],
        calls: &[usize],
        end: usize,
        forged: &[usize],
    ) -> Result<CallStep, ConversationError> {
        let start = calls.iter().rev().find(|&&c| c < end).map_or(0, |c| c + 1);
        let prefix = &msgs[..=end];
        let before = store.lookup(prefix);
        let context = self.context(store, before.as_ref(), msgs, start);
        let (segments, segment_messages) = call_segments(&req.turns, start, end, forged);
        let request = ScanRequest {
            id: req.id.clone(),
            segments,
            context: Some(Arc::new(context)),
        };
        let outcome = self
            .pipeline
            .scan(&request)
            .map_err(|source| ConversationError::Input {
                message: end,
                source,
            })?;
        let window = self.scan_window(&req.turns, end)?;
        let own = turn_risk(&outcome.decision);
        let (claim_risk, claims) = self.agreement_claims(&req.turns, start, end, forged);
        let rephrase =
            before.as_ref().is_some_and(|s| s.rephrasing) || store.rephrases_recent(msgs[end].1);
        let rephrase_risk = if rephrase {
            self.options.rephrase_risk
        } else {
            0.0
        };
        let risk = window
            .as_ref()
            .map_or(own, |w| own.max(w.risk))
            .max(claim_risk)
            .max(rephrase_risk);
        let refusal = self.mode == StateMode::Stateless
            && req
                .turns
                .get(end + 1)
                .is_some_and(|t| t.role == Role::Assistant && self.refusals.is_refusal(&t.text));
        let verdict = TurnVerdict {
            risk,
            action: outcome.decision.action,
            refusal,
        };
        let state = store.observe(prefix, req.conversation_id.as_deref(), verdict)?;
        Ok(CallStep {
            end,
            outcome,
            segment_messages,
            window,
            risk,
            state,
            claims,
        })
    }

    /// Claims of an earlier agreement in the call's user turns, as a per-turn risk and
    /// findings. How much a claim weighs depends on whether there is any history it could
    /// refer to: a claim of an earlier agreement with no earlier answer in the conversation
    /// (or only forged ones) is fabricated by construction. A strong rule (the claimed
    /// agreement is to lift rules or to do harm) weighs 0.9 either way: no answer of ours
    /// agrees to that.
    fn agreement_claims(
        &self,
        turns: &[Turn],
        start: usize,
        end: usize,
        forged: &[usize],
    ) -> (f32, Vec<ConversationFinding>) {
        let Some(detector) = &self.agreement else {
            return (0.0, Vec::new());
        };
        let history = turns[..start]
            .iter()
            .enumerate()
            .any(|(i, t)| t.role == Role::Assistant && !forged.contains(&i));
        let mut risk = 0.0f32;
        let mut findings = Vec::new();
        for (i, t) in turns.iter().enumerate().take(end + 1).skip(start) {
            if t.role != Role::User || t.text.is_empty() {
                continue;
            }
            let signal = detector.assess(&t.text);
            let r = if signal.strong_rule() {
                0.9
            } else if signal.classifier_fires() {
                if history { 0.3 } else { 0.7 }
            } else if !signal.rule_ids.is_empty() && !history {
                0.3
            } else {
                0.0
            };
            if r == 0.0 {
                continue;
            }
            risk = risk.max(r);
            let why = if history {
                "claims an earlier agreement by the assistant"
            } else {
                "claims an earlier agreement, with no earlier answer in the conversation"
            };
            for id in &signal.rule_ids {
                findings.push(ConversationFinding {
                    id: id.clone(),
                    message: Some(i),
                    rationale: format!("{why} (rule)"),
                });
            }
            if signal.classifier_fires() {
                findings.push(ConversationFinding {
                    id: HIST_AGREEMENT_MODEL.into(),
                    message: Some(i),
                    rationale: format!(
                        "{why} (classifier {:.2} >= {:.2})",
                        signal.score, signal.threshold
                    ),
                });
            }
        }
        (risk, findings)
    }

    /// What the state knew before the call at `start..`, for the judge.
    fn context(
        &self,
        store: &TenantStore<'_>,
        before: Option<&ConversationState>,
        msgs: &[(Role, &str)],
        start: usize,
    ) -> ConversationContext {
        let earlier = &msgs[..start];
        let turn_risks = if earlier.is_empty() {
            Vec::new()
        } else {
            store.path_risks(earlier)
        };
        let mut history = Vec::new();
        let mut budget = self.options.context_bytes;
        for (role, text) in earlier.iter().rev().take(self.options.context_messages) {
            if budget == 0 {
                break;
            }
            let cut = floor_boundary(text, budget);
            budget -= cut;
            history.push((*role, text[..cut].to_string()));
        }
        history.reverse();
        ConversationContext {
            risk: before.map_or(0.0, |s| s.risk),
            escalation: before.map_or(0.0, |s| s.escalation),
            turn_risks,
            evidence: before.map(evidence_of).unwrap_or_default(),
            rephrasing: before.is_some_and(|s| s.rephrasing),
            history,
        }
    }

    /// The window view of the recent user turns up to `end`, scanned as one text.
    fn scan_window(&self, turns: &[Turn], end: usize) -> Result<Option<Window>, ConversationError> {
        if self.options.window_turns < 2 {
            return Ok(None);
        }
        let users: Vec<&str> = turns[..=end]
            .iter()
            .filter(|t| t.role == Role::User)
            .map(|t| t.text.as_str())
            .collect();
        if users.len() < 2 {
            return Ok(None);
        }
        let recent = &users[users.len().saturating_sub(self.options.window_turns)..];
        let text = window_text(recent);
        let outcome = self
            .pipeline
            .scan(&ScanRequest::text(text))
            .map_err(|source| ConversationError::Input {
                message: end,
                source,
            })?;
        let d = &outcome.decision;
        let rules: Vec<String> = d
            .findings
            .iter()
            .filter(|f| f.counted && f.points > 0 && f.layer == RULES_LAYER)
            .map(|f| f.rule_id.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        Ok(Some(Window {
            risk: rule_risk(d),
            action: if rules.is_empty() {
                Action::Allow
            } else {
                d.action
            },
            rules,
        }))
    }

    /// Puts the per-conversation part on the newest call's decision.
    fn conclude(
        &self,
        req: &ConversationRequest,
        step: CallStep,
        scanned: Vec<TurnRisk>,
        unscanned: usize,
        history: Option<HistoryCheck>,
        started: Instant,
    ) -> ConversationOutcome {
        let CallStep {
            end,
            outcome,
            segment_messages,
            window,
            risk: _,
            state,
            claims,
        } = step;
        let (mut action, mut findings) = self.state_findings(end, &state);
        findings.extend(
            window
                .as_ref()
                .filter(|w| w.action != Action::Allow)
                .map(|w| window_finding(end, w)),
        );
        findings.extend(claims);
        let mut drop_messages = Vec::new();
        let history =
            history.map(|h| self.history_report(h, &mut findings, &mut action, &mut drop_messages));
        let reasons: Vec<String> = findings
            .iter()
            .map(|f| format!("{}: {}", f.id, f.rationale))
            .collect();

        let mut decision = outcome.decision;
        let mut sanitized = outcome.sanitized;
        let per_turn = decision.action;
        if action > per_turn {
            decision.action = action;
            decision.risk = RiskClass::HighRisk;
            sanitized = None;
        }
        decision.reasons.extend(reasons.iter().cloned());
        decision
            .layers
            .push(layer_result(action, state.risk, findings.len(), started));
        decision.elapsed_us = started.elapsed().as_micros() as u64;
        let report = ConversationReport {
            state: self.mode,
            messages: req.turns.len(),
            risk: state.risk,
            peak: state.peak,
            accumulated: state.accumulated,
            escalation: state.escalation,
            turns: state.turns,
            scanned,
            unscanned,
            evidence: evidence_of(&state),
            rephrasing: state.rephrasing,
            inherited_from_prefix_len: state.inherited_from_prefix_len,
            hint_matched: state.hint_matched,
            history,
            segment_messages,
            findings,
            action,
            reasons,
        };
        if let Err(e) = decision.reports.insert(&report) {
            decision.reasons.push(format!("{e}: not recorded"));
        }
        ConversationOutcome {
            decision,
            sanitized,
            drop_messages,
        }
    }

    /// The findings of the conversation state (risk, rephrasings, refusals) at the call
    /// ending at `end`, and the action they call for.
    fn state_findings(
        &self,
        end: usize,
        state: &ConversationState,
    ) -> (Action, Vec<ConversationFinding>) {
        let mut findings = Vec::new();
        let mut action = Action::Allow;
        if state.risk >= self.options.block_at {
            action = Action::Block;
            findings.push(ConversationFinding {
                id: CONV_RISK.into(),
                message: Some(end),
                rationale: format!(
                    "conversation risk {:.2} (peak {:.2}, accumulated {:.2}, escalation {:.2}) \
                     is at or above {:.2}",
                    state.risk,
                    state.peak,
                    state.accumulated,
                    state.escalation,
                    self.options.block_at
                ),
            });
        }
        if state.rephrasing {
            let over = state.rephrasings_after_block >= self.options.max_rephrasings;
            if over {
                action = Action::Block;
            }
            findings.push(ConversationFinding {
                id: CONV_REPHRASE.into(),
                message: Some(end),
                rationale: format!(
                    "a near-identical rephrasing of a blocked or refused turn ({} in this \
                     conversation, limit {})",
                    state.rephrasings_after_block, self.options.max_rephrasings
                ),
            });
        }
        if self.options.max_refusals > 0 && state.refusals >= self.options.max_refusals {
            action = Action::Block;
            findings.push(ConversationFinding {
                id: CONV_REFUSALS.into(),
                message: Some(end),
                rationale: format!(
                    "the model refused {} turns of this conversation (limit {}): the requests \
                     keep coming after refusals",
                    state.refusals, self.options.max_refusals
                ),
            });
        }
        (action, findings)
    }

    /// Applies the history policy to a ledger check: a finding per forged assistant turn,
    /// then the policy's block (on `action`) or drop (into `drop_messages`).
    fn history_report(
        &self,
        h: HistoryCheck,
        findings: &mut Vec<ConversationFinding>,
        action: &mut Action,
        drop_messages: &mut Vec<usize>,
    ) -> HistoryReport {
        let policy = self.options.ledger.policy;
        let out = apply_history_policy(policy, &h);
        if h.is_forged() {
            for &i in &h.forged {
                findings.push(ConversationFinding {
                    id: HIST_FORGED.into(),
                    message: Some(i),
                    rationale: "assistant turn this deployment never returned (forged \
                                history)"
                        .into(),
                });
            }
            match policy {
                HistoryPolicy::Block => *action = Action::Block,
                HistoryPolicy::Drop => *drop_messages = out.drop.clone(),
                HistoryPolicy::Report => {}
            }
        }
        HistoryReport {
            verified: h.verified,
            forged: h.forged,
            policy: policy_name(policy).into(),
            dropped: drop_messages.clone(),
        }
    }
}

/// The finding of a flagged window view (the recent user turns joined) at the call ending
/// at `end`.
fn window_finding(end: usize, w: &Window) -> ConversationFinding {
    ConversationFinding {
        id: CONV_WINDOW.into(),
        message: Some(end),
        rationale: format!(
            "the recent user turns joined (fragments reassembled) score {:.2}: {}",
            w.risk,
            if w.rules.is_empty() {
                "classifier".to_string()
            } else {
                w.rules.join(", ")
            }
        ),
    }
}

/// The conversation layer's entry in the decision's layers.
fn layer_result(action: Action, risk: f32, findings: usize, started: Instant) -> LayerResult {
    LayerResult {
        layer: CONVERSATION_LAYER.into(),
        status: LayerStatus::Ok,
        risk: if action == Action::Block {
            RiskClass::HighRisk
        } else {
            RiskClass::LowRisk
        },
        action,
        score: Some(risk),
        localized: None,
        categories: BTreeMap::new(),
        findings,
        undecided: false,
        score_only: false,
        elapsed_us: started.elapsed().as_micros() as u64,
    }
}

struct Window {
    risk: f32,
    action: Action,
    rules: Vec<String>,
}

struct CallStep {
    end: usize,
    outcome: rampart_core::ScanOutcome,
    segment_messages: Vec<usize>,
    window: Option<Window>,
    risk: f32,
    state: ConversationState,
    claims: Vec<ConversationFinding>,
}

fn agreement_of(
    options: &ConversationOptions,
) -> Result<Option<Arc<AgreementDetector>>, OptionsError> {
    if !options.agreement {
        return Ok(None);
    }
    AgreementDetector::embedded(options.compile.unwrap_or_default())
        .map(Some)
        .map_err(|e| OptionsError::Agreement(e.to_string()))
}

fn policy_name(p: HistoryPolicy) -> &'static str {
    match p {
        HistoryPolicy::Report => "report",
        HistoryPolicy::Drop => "drop",
        HistoryPolicy::Block => "block",
    }
}

fn evidence_of(s: &ConversationState) -> ConversationEvidence {
    ConversationEvidence {
        blocks: s.blocks,
        sanitizes: s.sanitizes,
        refusals: s.refusals,
        rephrasings_after_block: s.rephrasings_after_block,
    }
}

pub(crate) fn as_messages<'a>(turns: &[Turn], contents: &'a [String]) -> Vec<(Role, &'a str)> {
    turns
        .iter()
        .zip(contents)
        .map(|(t, c)| (t.role, c.as_str()))
        .collect()
}

/// The largest `n <= max` that is a character boundary of `s` (and `<= s.len()`).
fn floor_boundary(s: &str, max: usize) -> usize {
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// Indexes of the calls: the last message of each run of messages that are neither
/// assistant answers nor system / developer prompts, where the next message (if any) is an
/// assistant answer. A conversation with no such run has one call, its last message.
pub fn call_ends(turns: &[Turn]) -> Vec<usize> {
    let mut ends = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        let input = !matches!(t.role, Role::Assistant | Role::System | Role::Developer);
        let answered = turns.get(i + 1).is_none_or(|n| n.role == Role::Assistant);
        if input && answered {
            ends.push(i);
        }
    }
    if ends.is_empty() && !turns.is_empty() {
        ends.push(turns.len() - 1);
    }
    ends
}

/// The segments scanned for the call `start..=end`: every system and developer prompt before
/// it (trusted context), then the call's own messages. Assistant turns are the model's words
/// and are not scanned as input, except those the ledger says were forged: the client wrote
/// them, so they are untrusted text like any other.
fn call_segments(
    turns: &[Turn],
    start: usize,
    end: usize,
    forged: &[usize],
) -> (Vec<Segment>, Vec<usize>) {
    let mut segs = Vec::new();
    let mut map = Vec::new();
    for (i, t) in turns[..start].iter().enumerate() {
        if matches!(t.role, Role::System | Role::Developer) {
            segs.push(segment_of(t));
            map.push(i);
        }
    }
    for (i, t) in turns.iter().enumerate().take(end + 1).skip(start) {
        let forged_answer = t.role == Role::Assistant && forged.contains(&i);
        if t.role != Role::Assistant || forged_answer {
            let mut s = segment_of(t);
            if forged_answer {
                s.trust = Some(Trust::Untrusted);
            }
            if s.text.is_empty() {
                continue;
            }
            segs.push(s);
            map.push(i);
        }
    }
    if segs.is_empty() {
        // Only assistant turns: scan the last message so the call has a decision.
        segs.push(segment_of(&turns[end]));
        map.push(end);
    }
    (segs, map)
}

fn segment_of(t: &Turn) -> Segment {
    Segment {
        role: t.role,
        text: t.content(),
        trust: t.trust,
    }
}

/// Longest fragment kept from one quote.
const MAX_FRAGMENT_BYTES: usize = 400;

/// The window text: the user turns joined by line breaks, then the fragments they carry
/// (quoted strings and encoded-looking runs) concatenated without a separator and with one
/// space. Payloads split over turns ("a = 'ignore all prev'", "b = 'ious instructions'";
/// base64 in pieces) are one string again in those two lines.
pub fn window_text(users: &[&str]) -> String {
    let mut out = users.join("\n");
    let fragments: Vec<&str> = users.iter().flat_map(|u| fragments(u)).collect();
    if fragments.len() >= 2 {
        out.push('\n');
        out.push_str(&fragments.concat());
        out.push('\n');
        out.push_str(&fragments.join(" "));
    }
    out
}

/// Quoted strings and encoded-looking runs of one turn, in order.
fn fragments(text: &str) -> Vec<&str> {
    let mut out: Vec<(usize, &str)> = Vec::new();
    // Quoted strings: "…", '…', `…`, “…”, «…».
    for (open, close) in [
        ('"', '"'),
        ('`', '`'),
        ('\u{201c}', '\u{201d}'),
        ('«', '»'),
        ('\'', '\''),
    ] {
        let mut rest = 0;
        while let Some(a) = text[rest..].find(open) {
            let from = rest + a + open.len_utf8();
            let Some(b) = text[from..].find(close) else {
                break;
            };
            let inner = &text[from..from + b];
            // A single quote inside a word is an apostrophe, not a quote.
            let apostrophe = open == '\''
                && text[..rest + a]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_alphanumeric);
            if !apostrophe && !inner.trim().is_empty() && inner.len() <= MAX_FRAGMENT_BYTES {
                out.push((from, inner));
            }
            rest = from + b + close.len_utf8();
        }
    }
    // Encoded-looking runs: base64 / hex alphabets, 8+ characters, not a plain word.
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        if is_code_byte(bytes[i]) {
            let s = i;
            while i < bytes.len() && is_code_byte(bytes[i]) {
                i += 1;
            }
            let run = &text[s..i];
            if run.len() >= 8 && looks_encoded(run) && !out.iter().any(|(p, _)| *p == s) {
                out.push((s, run));
            }
        } else {
            i += 1;
        }
    }
    out.sort_by_key(|(p, _)| *p);
    out.into_iter().map(|(_, f)| f).collect()
}

fn is_code_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-')
}

/// A run that a person would not type as a word: digits mixed with letters, base64
/// punctuation, or upper case after the first letter.
fn looks_encoded(run: &str) -> bool {
    let digits = run.bytes().any(|b| b.is_ascii_digit());
    let letters = run.bytes().any(|b| b.is_ascii_alphabetic());
    let punct = run.bytes().any(|b| matches!(b, b'+' | b'/' | b'='));
    let inner_upper = run.bytes().skip(1).any(|b| b.is_ascii_uppercase())
        && run.bytes().any(|b| b.is_ascii_lowercase());
    let all_hex = run.bytes().all(|b| b.is_ascii_hexdigit());
    (digits && letters) || punct || inner_upper || (all_hex && run.len() >= 16)
}

/// Name of the rules layer, whose findings are the window's evidence.
const RULES_LAYER: &str = "rules";

/// The window's risk, from rule findings only: two or more strong ones (or a strong one of
/// high severity) 0.9, one strong 0.6, weak ones 0.2. The classifiers' scores of a window
/// are not used: joined long turns drift upwards in score without any new evidence (measured
/// on ShareGPT validation conversations), while the window exists for what only joining
/// reveals, which the decoders and rules see.
fn rule_risk(d: &Decision) -> f32 {
    let counted = || {
        d.findings
            .iter()
            .filter(|f| f.counted && f.points > 0 && f.layer == RULES_LAYER)
    };
    let strong: Vec<_> = counted()
        .filter(|f| f.strength == rampart_core::Strength::Strong)
        .collect();
    if strong.len() >= 2 || strong.iter().any(|f| f.severity == RiskClass::HighRisk) {
        0.9
    } else if !strong.is_empty() {
        0.6
    } else if counted().next().is_some() {
        0.2
    } else {
        0.0
    }
}

/// A decision's risk as one number in `[0, 1]`: the highest score any layer gave (classifier
/// and fused probabilities), floored by what was decided (BLOCK 0.9, SANITIZE 0.6, high risk
/// 0.85, medium risk 0.5) and by rule signal strength (0.2 per level).
pub fn turn_risk(d: &Decision) -> f32 {
    let scores = d
        .layers
        .iter()
        .filter(|l| matches!(l.status, LayerStatus::Ok) && !l.score_only)
        .filter_map(|l| l.score)
        .filter(|s| s.is_finite())
        .fold(0.0f32, f32::max);
    let action = match d.action {
        Action::Block => 0.9,
        Action::Sanitize => 0.6,
        Action::Allow => 0.0,
    };
    let class = match d.risk {
        RiskClass::HighRisk => 0.85,
        RiskClass::MediumRisk => 0.5,
        RiskClass::LowRisk => 0.0,
    };
    let strength = d.categories.values().copied().max().unwrap_or(0) as f32 * 0.2;
    scores.max(action).max(class).max(strength).clamp(0.0, 1.0)
}

/// Why a conversation configuration file could not be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadOptionsError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid `[conversation]` table.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: Box<toml::de::Error>,
    },
    /// The file has no `[conversation]` table.
    #[error("{path}: no `[conversation]` table")]
    Missing {
        /// The file.
        path: std::path::PathBuf,
    },
    /// A value is out of range.
    #[error("{path}: {source}")]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: OptionsError,
    },
}

/// Keys of the `[conversation]` table that belong to the service (`rampart serve`), not to
/// these options: [`ConversationOptions::from_toml_str`] skips them, so one file serves both.
pub const SERVICE_KEYS: [&str; 4] = ["enabled", "key_env", "persist_path", "flush_seconds"];

impl ConversationOptions {
    /// Reads the `[conversation]` table of a TOML file (`configs/conversation.toml`, or a
    /// server configuration as it is); see [`ConversationOptions::from_toml_str`].
    pub fn load(path: &std::path::Path) -> Result<Self, LoadOptionsError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadOptionsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text).map_err(|e| match e {
            LoadOptionsError::Parse { source, .. } => LoadOptionsError::Parse {
                path: path.to_path_buf(),
                source,
            },
            LoadOptionsError::Invalid { source, .. } => LoadOptionsError::Invalid {
                path: path.to_path_buf(),
                source,
            },
            LoadOptionsError::Missing { .. } => LoadOptionsError::Missing {
                path: path.to_path_buf(),
            },
            other => other,
        })
    }

    /// The `[conversation]` table of a TOML document: every field optional, unknown fields
    /// refused (the service's own keys, [`SERVICE_KEYS`], are skipped; other top-level tables
    /// are ignored), values validated.
    pub fn from_toml_str(src: &str) -> Result<Self, LoadOptionsError> {
        let parse = |source: toml::de::Error| LoadOptionsError::Parse {
            path: std::path::PathBuf::from("[conversation]"),
            source: Box::new(source),
        };
        let mut doc: toml::Table = toml::from_str(src).map_err(parse)?;
        let Some(toml::Value::Table(mut table)) = doc.remove("conversation") else {
            return Err(LoadOptionsError::Missing {
                path: std::path::PathBuf::from("[conversation]"),
            });
        };
        for k in SERVICE_KEYS {
            table.remove(k);
        }
        let options: Self = table.try_into().map_err(parse)?;
        options
            .validate()
            .map_err(|source| LoadOptionsError::Invalid {
                path: std::path::PathBuf::from("[conversation]"),
                source,
            })?;
        Ok(options)
    }
}
