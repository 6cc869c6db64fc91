//! Rampart core: the scoring vocabulary, the input model, the [`Detector`] trait every layer
//! implements, findings, decisions and the reports layers attach to them, the scoring table,
//! the policy, and the [`Pipeline`] that ties them together. Core implements the layers every
//! pipeline has (`normalize`) or that need nothing but scores (`fuse`); the rule layer, the
//! classifiers and the LLM layers live in their own crates and plug in through a
//! [`Registry`] of [`DetectorFactory`]s. The product, with every layer kind registered and
//! the embedded default configuration, is the `rampart` crate.
//!
//! ```
//! use rampart_core::{
//!     Action, Detection, Detector, DetectorError, Finding, Pipeline, PipelineConfig, Role,
//!     ScanInput, ScanRequest, Segment, Span, ViewKind,
//! };
//! use rampart_core::{Category, RiskClass, Strength};
//! use std::sync::Arc;
//!
//! /// A toy layer: flags the word "xyzzy".
//! #[derive(Debug)]
//! struct Xyzzy;
//!
//! impl Detector for Xyzzy {
//!     fn name(&self) -> &str {
//!         "xyzzy"
//!     }
//!     fn detect(&self, input: &ScanInput<'_>) -> Result<Detection, DetectorError> {
//!         let mut d = Detection::default();
//!         for seg in &input.segments {
//!             if let Some(at) = seg.text.find("xyzzy") {
//!                 d.findings.push(Finding {
//!                     layer: "xyzzy".into(),
//!                     rule_id: "OTH_999".into(),
//!                     category: Category::Other,
//!                     strength: Strength::Strong,
//!                     points: 3,
//!                     severity: RiskClass::HighRisk,
//!                     segment: seg.index,
//!                     role: seg.role,
//!                     counted: true,
//!                     span: Span::from(at..at + 5),
//!                     view: ViewKind::Raw,
//!                     via: Vec::new(),
//!                     rationale: "the magic word".into(),
//!                 });
//!             }
//!         }
//!         Ok(d)
//!     }
//! }
//!
//! // Built once, shared across threads.
//! let pipeline = Pipeline::with_detectors(PipelineConfig::new(Vec::new()), vec![Arc::new(Xyzzy)])
//!     .unwrap();
//! assert_eq!(pipeline.scan_text("hello").unwrap().decision.action, Action::Allow);
//!
//! let req = ScanRequest::segments(vec![
//!     Segment::new(Role::System, "You are a helpful assistant."),
//!     Segment::new(Role::User, "Say xyzzy."),
//! ]);
//! let out = pipeline.scan(&req).unwrap();
//! assert_eq!(out.decision.action, Action::Block);
//! // Evidence: rule IDs and spans into the original text, never the text itself.
//! let f = &out.decision.findings[0];
//! assert_eq!((f.segment, f.span), (1, Span::from(4..9)));
//! ```
#![deny(missing_docs)]

mod config;
mod config_merge;
pub mod conversation;
mod decision;
mod detector;
mod fuse;
mod input;
mod localize;
mod location;
mod normalize_layer;
pub mod owasp;
mod pipeline;
pub mod private_file;
mod registry;
mod report;
mod sanitize;
mod scan;
pub mod scoring;
pub mod timefmt;
mod vocab;

pub use config::{
    CONFIG_VERSION, ConfigError, DataInjection, EXTENDS_KEY, FUSE_KIND, FailMode, HashSection,
    LayerConfig, NORMALIZE_LAYER, NormalizeSection, PipelineConfig, PolicyConfig, RunIf,
};
pub use conversation::{ConversationContext, ConversationEvidence};
pub use decision::{
    Action, AppliedTransform, Decision, Finding, LayerResult, LayerStatus, SanitizedSegment,
    ScanOutcome, Span,
};
pub use detector::{
    Detection, Detector, DetectorError, Earlier, RoleThresholds, RoleThresholdsError, ScanInput,
    SegmentInput, SpanScore, TOP_SPANS_PER_SEGMENT, top_spans,
};
pub use fuse::{FUSE_AMBIGUOUS_ID, FUSE_ID, FuseDetector, FuseOptions, FuseOptionsError};
pub use input::{InputError, Limits, Role, ScanRequest, Segment, Trust};
pub use localize::{LocalizeConfig, LocalizeError};
pub use location::Location;
pub use normalize_layer::{
    BIDI_ID, CONFUSABLE_ID, ENCODED_PAYLOAD_ID, LIMIT_ID, TAG_CHARS_ID, ZERO_WIDTH_ID,
    transform_findings,
};
pub use owasp::{Capability, OwaspEntry, Protection};
pub use pipeline::{Pipeline, WarmUpError};
pub use rampart_normalize::{TransformKind, ViewKind};
pub use registry::{BuildError, DetectorFactory, Registry, layer_options};
pub use report::{LayerReport, Report, ReportError, Reports};
pub use sanitize::{MAX_BLOCK_BYTES, MAX_SENTENCE_REACH, injected_unit, redact};
pub use scoring::points;
pub use vocab::{Category, Owasp, RiskClass, Strength};
