//! Conversation risk from the per-turn risks along one path.
//!
//! The defaults are named constants chosen by reasoning, not yet on data: they are to be
//! chosen on the conversation dataset later and recorded in DESIGN.md.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Default half-life of the accumulation, in turns. Not yet chosen on data.
pub const DEFAULT_HALF_LIFE_TURNS: f32 = 3.0;
/// Default weight of the decayed accumulation. Not yet chosen on data.
pub const DEFAULT_ACCUMULATION_WEIGHT: f32 = 0.4;
/// Default weight of the escalation term (per unit of slope, risk per turn). Not yet chosen on data.
pub const DEFAULT_ESCALATION_WEIGHT: f32 = 0.1;
/// Default number of recent turns the escalation slope is fitted on. Not yet chosen on data.
pub const DEFAULT_ESCALATION_WINDOW: usize = 3;
/// Default largest Hamming distance (of 64 bits) at which a turn is a rephrasing of a
/// blocked one. Not yet chosen on data.
pub const DEFAULT_REPHRASE_DISTANCE: u32 = 10;

/// Scoring parameters (`[conversation.risk]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RiskParams {
    /// Half-life of the accumulation, in turns (> 0).
    pub half_life_turns: f32,
    /// Weight of the decayed accumulation (>= 0).
    pub accumulation_weight: f32,
    /// Weight of the escalation term (>= 0).
    pub escalation_weight: f32,
    /// Turns the escalation slope is fitted on (>= 2).
    pub escalation_window: usize,
    /// Rephrase distance D, in bits (<= 64).
    pub rephrase_distance: u32,
}

impl Default for RiskParams {
    fn default() -> Self {
        Self {
            half_life_turns: DEFAULT_HALF_LIFE_TURNS,
            accumulation_weight: DEFAULT_ACCUMULATION_WEIGHT,
            escalation_weight: DEFAULT_ESCALATION_WEIGHT,
            escalation_window: DEFAULT_ESCALATION_WINDOW,
            rephrase_distance: DEFAULT_REPHRASE_DISTANCE,
        }
    }
}

/// An invalid option, naming the field and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OptionsError {
    /// `half_life_turns` must be finite and > 0.
    #[error("risk.half_life_turns must be a finite number > 0, got {0}")]
    HalfLife(f32),
    /// A weight must be finite and >= 0.
    #[error("risk.{field} must be a finite number >= 0, got {value}")]
    Weight {
        /// Which weight.
        field: &'static str,
        /// The value given.
        value: f32,
    },
    /// `escalation_window` must be >= 2 (a slope needs two points).
    #[error("risk.escalation_window must be >= 2 (a slope needs two turns), got {0}")]
    EscalationWindow(usize),
    /// `rephrase_distance` must be <= 64.
    #[error("risk.rephrase_distance must be <= 64 bits, got {0}")]
    RephraseDistance(u32),
    /// `max_entries` must be >= 1.
    #[error("max_entries must be >= 1, got {0}")]
    MaxEntries(usize),
    /// `max_entries` must be >= 1 (assistant ledger).
    #[error("ledger.max_entries must be >= 1, got {0}")]
    LedgerMaxEntries(usize),
    /// `ttl_seconds` must be >= 1 (assistant ledger).
    #[error("ledger.ttl_seconds must be >= 1, got {0}")]
    LedgerTtl(u64),
    /// `ttl_seconds` must be >= 1.
    #[error("ttl_seconds must be >= 1, got {0}")]
    Ttl(u64),
    /// `block_at` must be in `(0, 1]`.
    #[error("conversation.block_at must be a number in (0, 1], got {0}")]
    BlockAt(f32),
    /// `max_turns` must be >= 1.
    #[error("conversation.max_turns must be >= 1, got {0}")]
    MaxTurns(usize),
    /// The embedded fabricated-agreement detector could not be built (a bug in the build).
    #[error("the embedded fabricated-agreement detector: {0}")]
    Agreement(String),
}

impl RiskParams {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if !(self.half_life_turns.is_finite() && self.half_life_turns > 0.0) {
            return Err(OptionsError::HalfLife(self.half_life_turns));
        }
        for (field, value) in [
            ("accumulation_weight", self.accumulation_weight),
            ("escalation_weight", self.escalation_weight),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(OptionsError::Weight { field, value });
            }
        }
        if self.escalation_window < 2 {
            return Err(OptionsError::EscalationWindow(self.escalation_window));
        }
        if self.rephrase_distance > 64 {
            return Err(OptionsError::RephraseDistance(self.rephrase_distance));
        }
        Ok(())
    }
}

/// The terms of the conversation risk.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RiskTerms {
    /// Largest per-turn risk on the path.
    pub peak: f32,
    /// `accumulation_weight * Σ risk_i * 0.5^(age_i / half_life)`.
    pub accumulated: f32,
    /// `escalation_weight * max(0, slope of the last N turns)`.
    pub escalation: f32,
    /// `clamp(max(peak, accumulated) + escalation, 0, 1)`.
    pub risk: f32,
}

/// Scores per-turn risks, oldest first (the newest turn last, age 0).
pub fn score(params: &RiskParams, risks: &[f32]) -> RiskTerms {
    let n = risks.len();
    if n == 0 {
        return RiskTerms::default();
    }
    let peak = risks.iter().copied().fold(0.0f32, f32::max);
    let accumulated = params.accumulation_weight
        * risks
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let age = (n - 1 - i) as f32;
                r * 0.5f32.powf(age / params.half_life_turns)
            })
            .sum::<f32>();
    let window = &risks[n.saturating_sub(params.escalation_window)..];
    let escalation = params.escalation_weight * slope(window).max(0.0);
    let risk = (peak.max(accumulated) + escalation).clamp(0.0, 1.0);
    RiskTerms {
        peak,
        accumulated,
        escalation,
        risk,
    }
}

/// Least-squares slope of `ys` against `0, 1, 2, …` (0 for fewer than two points).
fn slope(ys: &[f32]) -> f32 {
    let n = ys.len();
    if n < 2 {
        return 0.0;
    }
    let nf = n as f32;
    let mean_x = (nf - 1.0) / 2.0;
    let mean_y = ys.iter().sum::<f32>() / nf;
    let (mut num, mut den) = (0.0f32, 0.0f32);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f32 - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    num / den
}
