//! Agent_Traces_v1, Rampart's own agent benchmark (issue 36), and its end-to-end replay.
//!
//! A trace is an OpenAI-format agent conversation (system, user, assistant tool calls,
//! tool results, final answer) with the tool policy it runs under and its labels: benign
//! (every call is the user's) or attack (a tool result carries an injection, and the calls
//! the attacker asked for are named). [`replay`] runs one through what the proxy does: each
//! assistant message is the answer to the request made of the messages before it; the
//! request is scanned by the pipeline (BLOCK ends the trace), then each tool call of the
//! answer is decided by the policy, with the request's conversation for argument
//! provenance and its tool results' injection score for flow rules. [`Report`] counts
//! attacks stopped by mechanism, attacker calls stopped, and benign traces passed with the
//! share that needed a human's confirmation.
//!
//! The set is generated from hand-written templates by `scripts/data/gen_agent_traces.py`
//! (seed 36): the tuning part has three domains and four injection styles, the test part
//! three other domains and four other styles (`datasets/agent_traces_v1/README.md`).
//!
//! ```
//! use rampart_agentbench::{Report, Split, TraceSet, replay_all};
//!
//! let set = TraceSet::embedded(Some(Split::Test))?;
//! let firewall = rampart::default_pipeline()?;
//! let outcomes = replay_all(&firewall, &set.traces[..4], &set.policies)?;
//! let report = Report::of(&outcomes);
//! assert_eq!(report.overall.attacks + report.overall.benign, 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod replay;
mod report;
mod trace;

pub use replay::{
    CallOutcome, Mechanism, REPLAY_TIME_MS, ReplayError, TraceOutcome, Verdict, replay,
};
pub use report::{Counts, Report};
pub use trace::{
    Injection, Label, NAME_V1, POLICIES_V1, Split, TEST_V1, TRACE_VERSION, TUNE_V1, Trace,
    TraceError, TraceSet, parse,
};

use rampart_core::Pipeline;
use rampart_tools::Policy;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Replays traces in parallel (rayon), outcomes in the traces' order. A trace whose policy
/// is missing is an error ([`TraceSet`] checks this when it loads).
pub fn replay_all(
    pipeline: &Pipeline,
    traces: &[Trace],
    policies: &BTreeMap<String, Arc<Policy>>,
) -> Result<Vec<TraceOutcome>, ReplayError> {
    traces
        .par_iter()
        .map(|t| {
            let policy = policies
                .get(&t.policy)
                .ok_or_else(|| ReplayError::MissingPolicy {
                    id: t.id.clone(),
                    policy: t.policy.clone(),
                })?;
            replay(pipeline, policy, t)
        })
        .collect()
}
