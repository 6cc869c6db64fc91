//! The `pattern_candidates.v1` record, field for field as specified in
//! `shared/specs/pattern_candidates_v1.md`. Every struct denies unknown fields; the
//! [`validate`](crate::validate) module adds the checks serde cannot express.

use rampart_core::{Category, RiskClass, Strength};
use serde::{Deserialize, Serialize};

/// The `schema_version` of every record.
pub const SCHEMA_VERSION: &str = "pattern_candidates.v1";

/// Default output path (relative to the repository root).
pub const DEFAULT_OUTPUT_PATH: &str = "docs/reports/phase2_6/pattern_candidates_v1.jsonl";

/// Name of the clean benign corpus that `evidence.benign_regression` must name.
pub const BENIGN_CORPUS_NAME: &str = "Clean_Benign_Corpus_v1";

/// `run.guardrail.entrypoint`: the function that evaluated the prompts.
pub const GUARDRAIL_ENTRYPOINT: &str = "rampart_core::Pipeline::scan";

/// `run.script`: what produced the file.
pub const SCRIPT_NAME: &str = "rampart discover";

/// One candidate pattern (one line of the file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternCandidate {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: String,
    /// Category prefix + `_` + three digits, sequential within the category.
    pub pattern_id: String,
    /// One of the seven rule categories.
    pub category: Category,
    /// What to match.
    pub pattern: PatternSpec,
    /// Counts from the eval logs and the benign corpus.
    pub evidence: Evidence,
    /// Which evaluation run the evidence comes from.
    pub run: RunInfo,
    /// Computed metrics, all in 0..1.
    pub metrics: Metrics,
    /// The recommendation.
    pub decision: Decision,
    /// How to implement it as a rule.
    pub implementation: Implementation,
    /// ISO 8601 UTC time the record was written.
    pub created_at: String,
}

/// `pattern_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    /// A literal string.
    Literal,
    /// A regular expression (in `regex`).
    Regex,
    /// Co-occurring keywords (`value` lists them separated by `, `).
    KeywordSet,
}

/// The `pattern` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternSpec {
    /// The literal, or a readable form of the pattern.
    pub value: String,
    /// Lower-cased, trimmed form used for matching.
    pub normalized_value: String,
    /// Literal, regex or keyword set.
    pub pattern_kind: PatternKind,
    /// The regex when one is used (serialized as `null` otherwise).
    pub regex: Option<String>,
    /// Whether matching keeps case.
    pub case_sensitive: bool,
    /// Whether word boundaries are required on both sides.
    pub token_boundary: bool,
    /// Weak or strong.
    pub signal_strength: Strength,
    /// Severity hint.
    pub severity_hint: RiskClass,
}

/// `split` of an evidence dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitName {
    /// Training data.
    Train,
    /// Test data.
    Test,
    /// Evaluation data.
    Eval,
    /// Not known, or mixed.
    Unknown,
}

impl SplitName {
    /// The name as written.
    pub fn name(self) -> &'static str {
        match self {
            SplitName::Train => "train",
            SplitName::Test => "test",
            SplitName::Eval => "eval",
            SplitName::Unknown => "unknown",
        }
    }
}

/// The pipeline's outcome for the prompts a pattern matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeBuckets {
    /// Attacks the pipeline flagged.
    pub true_positive: u64,
    /// Attacks the pipeline allowed.
    pub false_negative: u64,
    /// Benign prompts the pipeline flagged.
    pub false_positive: u64,
    /// Benign prompts the pipeline allowed.
    pub true_negative: u64,
}

impl OutcomeBuckets {
    /// The sum of the four buckets.
    pub fn total(&self) -> u64 {
        self.true_positive + self.false_negative + self.false_positive + self.true_negative
    }
}

/// One dataset's evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetEvidence {
    /// The exact name used in reports.
    pub dataset_name: String,
    /// The split.
    pub split: SplitName,
    /// `reports/evals/eval_{YYYYMMDD_HHMMSS}_{DATASET}.jsonl`.
    pub eval_log_path: String,
    /// Prompts of the dataset in the log.
    pub sample_count_total: u64,
    /// Prompts the pattern matches.
    pub match_count_total: u64,
    /// Their outcomes.
    pub outcome_buckets: OutcomeBuckets,
    /// Some matched prompt IDs (never text).
    pub example_prompt_ids: Vec<String>,
}

/// The benign regression check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenignRegression {
    /// [`BENIGN_CORPUS_NAME`].
    pub dataset_name: String,
    /// The conventional log path of the corpus in the same run.
    pub eval_log_path: String,
    /// Prompts in the corpus.
    pub sample_count_total: u64,
    /// Corpus prompts the pattern matches (the false-positive risk indicator).
    pub match_count_total: u64,
    /// Some matched prompt IDs.
    pub example_prompt_ids: Vec<String>,
}

/// The `evidence` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// One object per dataset the pattern matches in.
    pub datasets: Vec<DatasetEvidence>,
    /// The check against the clean benign corpus.
    pub benign_regression: BenignRegression,
}

impl Evidence {
    /// False negatives matched, over all datasets (the second sort key).
    pub fn false_negatives(&self) -> u64 {
        self.datasets
            .iter()
            .map(|d| d.outcome_buckets.false_negative)
            .sum()
    }

    /// True positives matched, over all datasets.
    pub fn true_positives(&self) -> u64 {
        self.datasets
            .iter()
            .map(|d| d.outcome_buckets.true_positive)
            .sum()
    }
}

/// `run.model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// The pipeline configuration name from the logs.
    pub name: String,
    /// The Rampart version.
    pub version: String,
}

/// `run.guardrail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardrailInfo {
    /// [`GUARDRAIL_ENTRYPOINT`].
    pub entrypoint: String,
    /// The policy version the prompts were evaluated under.
    pub policy_version: String,
}

/// The `run` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// `eval_{YYYYMMDD_HHMMSS}`.
    pub eval_run_id: String,
    /// ISO 8601 UTC time of the run (from the run id).
    pub timestamp_utc: String,
    /// Commit SHA or `"unknown"`.
    pub git_commit: String,
    /// [`SCRIPT_NAME`].
    pub script: String,
    /// The configuration evaluated.
    pub model: ModelInfo,
    /// The guardrail entry point and policy.
    pub guardrail: GuardrailInfo,
}

/// The `metrics` block (floats in 0..1; formulas in the crate documentation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Matched false negatives / all false negatives.
    pub fn_coverage_rate: f64,
    /// Matched true positives / all true positives.
    pub tp_support_rate: f64,
    /// Benign match rate relative to the FPR budget, capped at 1.
    pub fp_risk_score: f64,
    /// Specificity of the pattern.
    pub rarity_score: f64,
    /// The ranking score.
    pub priority_score: f64,
}

/// `decision.recommendation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recommendation {
    /// Adopt.
    Include,
    /// Do not adopt.
    Exclude,
    /// A person decides.
    Review,
}

impl Recommendation {
    /// The name as written.
    pub fn name(self) -> &'static str {
        match self {
            Recommendation::Include => "include",
            Recommendation::Exclude => "exclude",
            Recommendation::Review => "review",
        }
    }
}

/// The `decision` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Include, exclude or review.
    pub recommendation: Recommendation,
    /// True when the risk is ambiguous.
    pub requires_review: bool,
    /// One line.
    pub reason: String,
}

/// `implementation.target_function`: the rule category a pattern belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetFunction {
    /// `SYS_` rules.
    CheckSystemMarkers,
    /// `CTRL_` rules.
    CheckControlPhrases,
    /// `CRED_` rules.
    CheckCredentialPatterns,
    /// `BND_` rules.
    CheckBoundaryTesting,
    /// `ROLE_` rules.
    CheckRoleConfusion,
    /// `ENC_` rules.
    CheckEncodingObfuscation,
    /// `OTH_` rules.
    CheckOther,
}

impl TargetFunction {
    /// The target function of a category.
    pub fn of(category: Category) -> TargetFunction {
        match category {
            Category::SystemMarker => TargetFunction::CheckSystemMarkers,
            Category::ControlPhrase => TargetFunction::CheckControlPhrases,
            Category::CredentialLike => TargetFunction::CheckCredentialPatterns,
            Category::BoundaryTesting => TargetFunction::CheckBoundaryTesting,
            Category::RoleConfusion => TargetFunction::CheckRoleConfusion,
            Category::EncodingObfuscation => TargetFunction::CheckEncodingObfuscation,
            Category::Other => TargetFunction::CheckOther,
        }
    }

    /// The name as written.
    pub fn name(self) -> &'static str {
        match self {
            TargetFunction::CheckSystemMarkers => "check_system_markers",
            TargetFunction::CheckControlPhrases => "check_control_phrases",
            TargetFunction::CheckCredentialPatterns => "check_credential_patterns",
            TargetFunction::CheckBoundaryTesting => "check_boundary_testing",
            TargetFunction::CheckRoleConfusion => "check_role_confusion",
            TargetFunction::CheckEncodingObfuscation => "check_encoding_obfuscation",
            TargetFunction::CheckOther => "check_other",
        }
    }
}

/// `implementation.suggested_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuggestedAction {
    /// A hit raises the risk class.
    Escalate,
    /// A hit adds points, never escalates alone.
    ScoreOnly,
    /// Only logged.
    LogOnly,
}

/// `implementation.suggested_risk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuggestedRisk {
    /// No risk contribution.
    None,
    /// Low.
    LowRisk,
    /// Medium.
    MediumRisk,
    /// High.
    HighRisk,
}

impl From<RiskClass> for SuggestedRisk {
    fn from(r: RiskClass) -> Self {
        match r {
            RiskClass::LowRisk => SuggestedRisk::LowRisk,
            RiskClass::MediumRisk => SuggestedRisk::MediumRisk,
            RiskClass::HighRisk => SuggestedRisk::HighRisk,
        }
    }
}

/// The `implementation` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Implementation {
    /// The rule category function.
    pub target_function: TargetFunction,
    /// Escalate, score only, or log only.
    pub suggested_action: SuggestedAction,
    /// Suggested risk.
    pub suggested_risk: SuggestedRisk,
    /// Implementation guidance.
    pub notes: String,
}
