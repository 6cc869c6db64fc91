//! Which risks of the OWASP Top 10 for LLM Applications (2025) each part of Rampart addresses.
//!
//! Detection layers describe themselves: every [`DetectorFactory`](crate::DetectorFactory)
//! names the risks of the layers it builds ([`DetectorFactory::owasp`](crate::DetectorFactory::owasp),
//! empty by default), so a layer crate states its own coverage and the
//! [`Registry`](crate::Registry) lists it by kind without building anything (no model needs
//! to be present). What is not a layer (input limits, normalization, output scanning, canaries,
//! tool policy, audit …) is a [`Capability`], described here. Rules carry their own ids in
//! their packs (`owasp = [...]`, see `rules/SCHEMA.md`).

pub use crate::vocab::Owasp;
use std::fmt;

/// A protection that is not a detection layer of the pipeline, with the risks it addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// Request limits of the pipeline (total bytes, segment count) and every layer's time
    /// budget: a request is refused before scanning, a layer is cut at its deadline.
    InputLimits,
    /// The server's per-API-key rate limits (`rate_per_s`, `burst`), authentication-failure
    /// throttling, body size and read/request timeouts.
    ServiceLimits,
    /// Normalization: decoded payloads (base64, hex, URL, HTML, `\u`), folded Unicode
    /// (homoglyphs, fullwidth, invisible characters, tag characters, bidi), spacing, leetspeak,
    /// ROT13 and reversed views, and the `ENC_90x` signals.
    Normalization,
    /// Data channels: the role and trust of each segment (tool results, retrieved documents),
    /// data-scoped rules and the data-injection policy that cuts injected sentences out.
    DataChannels,
    /// Sanitization: the matched span of a medium-risk finding (a credential …) is redacted
    /// instead of the whole request blocked.
    Sanitization,
    /// Conversation state: accumulated risk over turns, rephrasings of blocked turns, payloads
    /// split across turns reassembled, fabricated-history claims.
    ConversationState,
    /// Output scanning of model responses: credentials and long verbatim runs of the system
    /// prompt.
    OutputScan,
    /// Canary tokens planted in the system prompt and searched for (also obfuscated) in the
    /// response.
    Canaries,
    /// Tool-call governance: deny by default, typed argument predicates, context conditions,
    /// per-conversation call limits, flow rules, approvals and break-glass.
    ToolPolicy,
    /// The tamper-evident audit log of decisions and tool governance.
    Audit,
}

impl Capability {
    /// Every capability, in a stable order.
    pub const ALL: [Capability; 10] = [
        Capability::InputLimits,
        Capability::ServiceLimits,
        Capability::Normalization,
        Capability::DataChannels,
        Capability::Sanitization,
        Capability::ConversationState,
        Capability::OutputScan,
        Capability::Canaries,
        Capability::ToolPolicy,
        Capability::Audit,
    ];

    /// A stable snake_case name, e.g. `"output_scan"`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::InputLimits => "input_limits",
            Capability::ServiceLimits => "service_limits",
            Capability::Normalization => "normalization",
            Capability::DataChannels => "data_channels",
            Capability::Sanitization => "sanitization",
            Capability::ConversationState => "conversation_state",
            Capability::OutputScan => "output_scan",
            Capability::Canaries => "canaries",
            Capability::ToolPolicy => "tool_policy",
            Capability::Audit => "audit",
        }
    }

    /// Where it lives, for a reader of the report.
    pub fn location(self) -> &'static str {
        match self {
            Capability::InputLimits => "crates/core (Limits, layer budgets)",
            Capability::ServiceLimits => "crates/server ([auth] keys, [server] limits)",
            Capability::Normalization => "crates/normalize",
            Capability::DataChannels => "crates/core (roles, trust, data_injection)",
            Capability::Sanitization => "crates/core (sanitize)",
            Capability::ConversationState => "crates/conversation",
            Capability::OutputScan => "crates/server (/v1/scan/output, proxy)",
            Capability::Canaries => "crates/server (proxy canary)",
            Capability::ToolPolicy => "crates/tools",
            Capability::Audit => "crates/audit",
        }
    }

    /// The risks it addresses (sorted). Audit addresses none by itself: it records the
    /// decisions every other part makes, which the report counts as response, not coverage;
    /// it is listed under Excessive Agency because it is the record of tool governance.
    pub fn owasp(self) -> &'static [Owasp] {
        match self {
            Capability::InputLimits | Capability::ServiceLimits => &[Owasp::Llm10],
            Capability::Normalization
            | Capability::DataChannels
            | Capability::ConversationState => &[Owasp::Llm01],
            Capability::Sanitization => &[Owasp::Llm02],
            Capability::OutputScan => &[Owasp::Llm02, Owasp::Llm07],
            Capability::Canaries => &[Owasp::Llm07],
            Capability::ToolPolicy | Capability::Audit => &[Owasp::Llm06],
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one entry of the coverage registry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protection<'a> {
    /// A detection layer, by its `kind`.
    Layer(&'a str),
    /// A capability that is not a layer.
    Capability(Capability),
}

impl fmt::Display for Protection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protection::Layer(kind) => write!(f, "layer `{kind}`"),
            Protection::Capability(c) => write!(f, "{c}"),
        }
    }
}

/// One protection and the risks it addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwaspEntry<'a> {
    /// The layer kind or capability.
    pub protection: Protection<'a>,
    /// The risks, sorted.
    pub owasp: Vec<Owasp>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;

    #[test]
    fn the_registry_lists_its_layer_kinds_then_every_capability() {
        let registry = Registry::default();
        let entries = registry.owasp();
        let names: Vec<String> = entries.iter().map(|e| e.protection.to_string()).collect();
        // Core implements one layer kind; the layer crates register theirs.
        let mut want = vec!["layer `fuse`".to_string()];
        want.extend(Capability::ALL.map(|c| c.name().to_string()));
        assert_eq!(names, want);
        assert_eq!(entries[0].owasp, vec![Owasp::Llm01]);
        let tool = entries
            .iter()
            .find(|e| e.protection == Protection::Capability(Capability::ToolPolicy))
            .map(|e| e.owasp.clone());
        assert_eq!(tool, Some(vec![Owasp::Llm06]));
    }

    #[test]
    fn every_capability_addresses_something_and_lists_it_sorted() {
        for c in Capability::ALL {
            let ids = c.owasp();
            assert!(!ids.is_empty(), "{c}");
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{c}");
        }
    }
}
