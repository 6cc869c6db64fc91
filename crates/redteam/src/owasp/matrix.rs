//! The red-team coverage matrix as evidence: read with [`CoverageMatrix`], summarized per
//! pipeline.

use super::OwaspError;
use crate::report::{Cell, CoverageMatrix, MATRIX_VERSION, PipelineStatus};

/// A family under this TPR is counted as a blind spot in the matrix summary (the detection
/// target of the red-team report, on the cascade pipeline).
pub const FAMILY_FLOOR: f64 = 0.8;

/// Parses a coverage matrix (`rampart redteam report`'s `coverage_matrix.json`) of the
/// version this build writes. `origin` names the source in errors.
pub fn parse_matrix(src: &str, origin: &str) -> Result<CoverageMatrix, OwaspError> {
    let m: CoverageMatrix =
        serde_json::from_str(src).map_err(|source| OwaspError::MatrixSyntax {
            origin: origin.to_owned(),
            source,
        })?;
    if m.version != MATRIX_VERSION {
        return Err(OwaspError::MatrixVersion {
            origin: origin.to_owned(),
            version: m.version,
        });
    }
    Ok(m)
}

/// One scored pipeline of the matrix, over its families.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MatrixSummary {
    pub(crate) pipeline: String,
    pub(crate) config: String,
    /// Families with attack variants scored.
    pub(crate) families: usize,
    /// The weakest family and its TPR.
    pub(crate) min: Option<(String, f64)>,
    /// The mean family TPR.
    pub(crate) mean: Option<f64>,
    /// Families under [`FAMILY_FLOOR`], by name.
    pub(crate) below: Vec<String>,
    /// The family with the highest benign FPR, and that FPR.
    pub(crate) max_fpr: Option<(String, f64)>,
}

/// Per scored pipeline: the family summary.
pub(crate) fn summaries(m: &CoverageMatrix) -> Vec<MatrixSummary> {
    m.pipelines
        .iter()
        .filter(|p| p.status == PipelineStatus::Ok)
        .map(|p| {
            let cells: Vec<(&str, &Cell)> = m
                .families
                .iter()
                .filter_map(|f| f.cells.get(&p.name).map(|c| (f.family.as_str(), c)))
                .collect();
            let tprs: Vec<(&str, f64)> = cells
                .iter()
                .filter(|(_, c)| c.n_attack > 0)
                .filter_map(|(f, c)| c.tpr.map(|t| (*f, t)))
                .collect();
            let min = tprs
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)))
                .map(|(f, t)| ((*f).to_string(), *t));
            let mean = (!tprs.is_empty())
                .then(|| tprs.iter().map(|(_, t)| t).sum::<f64>() / tprs.len() as f64);
            let mut below: Vec<String> = tprs
                .iter()
                .filter(|(_, t)| *t < FAMILY_FLOOR)
                .map(|(f, _)| (*f).to_string())
                .collect();
            below.sort();
            let max_fpr = cells
                .iter()
                .filter(|(_, c)| c.n_benign > 0)
                .filter_map(|(f, c)| c.fpr.map(|t| (*f, t)))
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(a.0)))
                .map(|(f, t)| (f.to_string(), t));
            MatrixSummary {
                pipeline: p.name.clone(),
                config: p.config.clone(),
                families: tprs.len(),
                min,
                mean,
                below,
                max_fpr,
            }
        })
        .collect()
}

/// The pipelines the matrix could not score, with their status.
pub(crate) fn not_configured(m: &CoverageMatrix) -> Vec<(&str, String)> {
    m.pipelines
        .iter()
        .filter(|p| p.status != PipelineStatus::Ok)
        .map(|p| (p.name.as_str(), p.status.as_string()))
        .collect()
}

/// The scored pipeline with the highest mean family TPR (ties: name).
pub(crate) fn strongest(summaries: &[MatrixSummary]) -> Option<&MatrixSummary> {
    summaries
        .iter()
        .filter(|s| s.mean.is_some())
        .max_by(|a, b| {
            a.mean
                .unwrap_or(0.0)
                .total_cmp(&b.mean.unwrap_or(0.0))
                .then(b.pipeline.cmp(&a.pipeline))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

    use super::*;
    use crate::owasp::tests::{chain, matrix_json};

    #[test]
    fn a_matrix_of_another_version_is_refused() {
        let json = matrix_json(0.5).replacen("\"version\": 1", "\"version\": 2", 1);
        let err = chain(&parse_matrix(&json, "m.json").unwrap_err());
        assert!(err.contains("coverage matrix version 2"), "{err}");
    }

    #[test]
    fn the_summary_names_the_weakest_family_and_skips_unscored_pipelines() {
        let m = parse_matrix(&matrix_json(0.41), "m.json").unwrap();
        let s = summaries(&m);
        assert_eq!(
            s.iter().map(|s| s.pipeline.as_str()).collect::<Vec<_>>(),
            ["rules", "cascade"]
        );
        let cascade = &s[1];
        assert_eq!(cascade.min, Some(("encoding".to_owned(), 0.41)));
        assert_eq!(cascade.below, ["encoding"]);
        assert_eq!(cascade.max_fpr, Some(("unicode".to_owned(), 0.04)));
        assert_eq!(strongest(&s).map(|s| s.pipeline.as_str()), Some("cascade"));
        assert_eq!(
            not_configured(&m),
            [("judge", "not_configured: no judge model".to_owned())]
        );
    }
}
