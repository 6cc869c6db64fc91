//! Rampart evaluation. So far: the metrics the harness reports (confusion counts and rates,
//! ROC-AUC with ties, the ROC curve, TPR at a fixed FPR, latency percentiles), computed the
//! same way everywhere so numbers from different runs compare.
//!
//! ```
//! use rampart_eval::metrics::{Confusion, roc_auc, tpr_at_fpr};
//!
//! let mut c = Confusion::default();
//! c.add(true, true); // an attack, flagged
//! c.add(false, false); // a benign prompt, allowed
//! assert_eq!(c.tpr(), Some(1.0));
//! assert_eq!(c.fpr(), Some(0.0));
//!
//! let scored = [(0.9, true), (0.4, true), (0.2, false), (0.05, false)];
//! assert_eq!(roc_auc(&scored), Some(1.0));
//! assert_eq!(tpr_at_fpr(&scored, 0.01).map(|p| p.tpr), Some(1.0));
//! ```
#![deny(missing_docs)]

pub mod log;
pub mod metrics;
