//! Scoring a normalized segment: the model runs on every view; the highest margin wins.

use crate::model::LinearModel;
use rampart_normalize::Normalized;

/// The best-scoring view of one segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewScore {
    /// Index into `Normalized::views`.
    pub view: usize,
    /// The raw margin (uncalibrated).
    pub margin: f32,
}

/// Scores every view of `normalized` and returns the highest margin, or `None` when there
/// are no views. A view whose text equals an earlier one up to ASCII case is skipped (same
/// features, same score). Views are lower-cased before featurization.
///
/// The cased views (`raw`, `decoded`) are scored too, not only their folded twins: on the
/// validation sets, dropping `raw` cost 1.3 points of TPR at 1% FPR (AUC 0.9941 → 0.9887),
/// since it keeps line breaks and layout that folding collapses.
pub fn max_margin(model: &LinearModel, normalized: &Normalized) -> Option<ViewScore> {
    let views = &normalized.views;
    let mut best: Option<ViewScore> = None;
    for (i, v) in views.iter().enumerate() {
        // Features lower-case their input, so texts equal up to ASCII case score the same
        // (the raw and folded views of plain one-line ASCII text, typically).
        if views[..i]
            .iter()
            .any(|p| p.text.eq_ignore_ascii_case(&v.text))
        {
            continue;
        }
        let margin = model.margin(&v.text);
        if best.is_none_or(|b| margin > b.margin) {
            best = Some(ViewScore { view: i, margin });
        }
    }
    best
}
