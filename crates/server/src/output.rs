//! The server's output scanners ([`rampart_output`]) and the `POST /v1/scan/output` body.

use rampart_core::PipelineConfig;
use rampart_output::{OutputConfig, OutputError, OutputScanner};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The output scanners of one pipeline version, built with it (at start-up and reload), so
/// nothing is read or compiled on the request path.
#[derive(Debug)]
pub(crate) struct OutputScanners {
    /// `[output]` as configured: `/v1/scan/output`, and proxied responses when enabled.
    configured: Arc<OutputScanner>,
    /// Proxied responses while output scanning is off: only the planted canary is looked
    /// for (the same scanner as `configured` when scanning is on).
    canary_only: Arc<OutputScanner>,
}

impl OutputScanners {
    /// Builds the scanners for a pipeline configuration and `[output]`.
    pub(crate) fn build(
        pipeline: &PipelineConfig,
        config: &OutputConfig,
    ) -> Result<Self, OutputError> {
        let configured = Arc::new(OutputScanner::build(pipeline, config)?);
        let canary_only = if config.enabled {
            Arc::clone(&configured)
        } else {
            let cfg = OutputConfig {
                secrets: false,
                system_prompt: false,
                ..config.clone()
            };
            Arc::new(OutputScanner::build(pipeline, &cfg)?)
        };
        Ok(Self {
            configured,
            canary_only,
        })
    }

    /// The scanner `/v1/scan/output` uses: `[output]` as configured.
    pub(crate) fn configured(&self) -> &Arc<OutputScanner> {
        &self.configured
    }

    /// The scanner for proxied responses: `[output]` as configured when output scanning is
    /// on, else one that looks only for the planted canary.
    pub(crate) fn for_proxy(&self) -> &Arc<OutputScanner> {
        if self.configured.config().enabled {
            &self.configured
        } else {
            &self.canary_only
        }
    }
}

/// `POST /v1/scan/output` request body.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScanOutputRequest {
    /// Caller's ID, echoed in the decision.
    #[serde(default)]
    pub id: Option<String>,
    /// The model response.
    pub text: String,
    /// The system prompt the response was produced under (for leak detection).
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Canary tokens to look for.
    #[serde(default)]
    pub canaries: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_core::Action;
    use rampart_output::OutputContext;

    #[test]
    fn proxy_scanner_looks_only_for_canaries_when_output_scanning_is_off() {
        let secret = "key AKIAIOSFODNN7EXAMPLE end";
        let on = OutputScanners::build(&rampart_rules::rules_config(), &OutputConfig::default())
            .expect("builds");
        assert!(Arc::ptr_eq(on.for_proxy(), on.configured()));
        let off = OutputConfig {
            enabled: false,
            ..Default::default()
        };
        let off = OutputScanners::build(&rampart_rules::rules_config(), &off).expect("builds");
        let ctx = OutputContext::default();
        let proxied = off.for_proxy().scan(secret, &ctx, None).expect("scan");
        assert_eq!(proxied.decision.action, Action::Allow);
        // `/v1/scan/output` always scans as configured.
        let checked = off.configured().scan(secret, &ctx, None).expect("scan");
        assert_eq!(checked.decision.action, Action::Block);
    }
}
