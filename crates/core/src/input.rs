//! The input model: a scan request made of segments, each with a role and a trust level.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Who a segment comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The system prompt.
    System,
    /// The application (developer) prompt.
    #[serde(alias = "application")]
    Developer,
    /// The end user.
    User,
    /// Output of a tool or function call.
    #[serde(alias = "function")]
    Tool,
    /// A retrieved document (RAG, web page, email, file).
    #[serde(alias = "document", alias = "rag")]
    Retrieved,
    /// A model response (for output scanning).
    Assistant,
}

impl Role {
    /// Every role, in a stable order.
    pub const ALL: [Role; 6] = [
        Role::System,
        Role::Developer,
        Role::User,
        Role::Tool,
        Role::Retrieved,
        Role::Assistant,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Tool => "tool",
            Role::Retrieved => "retrieved",
            Role::Assistant => "assistant",
        }
    }

    /// Whether the role carries data the application fetched (tool output, retrieved
    /// documents) rather than a party's own words: an attacker may have written any of it.
    /// Text there that addresses the assistant is an injection, not a request, and SANITIZE
    /// removes whole injected units there, not only matched phrases.
    pub fn is_data_channel(self) -> bool {
        matches!(self, Role::Tool | Role::Retrieved)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How much a segment's content is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Written by the application owner: findings are reported but do not raise the risk.
    Trusted,
    /// Anything an attacker may control: findings count.
    Untrusted,
}

/// One piece of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    /// Who it comes from.
    pub role: Role,
    /// The text.
    pub text: String,
    /// Overrides the policy's trust level for this role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
}

impl Segment {
    /// A segment with the role's default trust.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            text: text.into(),
            trust: None,
        }
    }
}

/// A scan request: one or more segments. Plain text is a single user segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanRequest {
    /// Caller-supplied ID, echoed in the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The segments, in conversation order.
    pub segments: Vec<Segment>,
    /// What the conversation state knew before this turn (set by the server side for
    /// conversation requests; never read from JSON).
    #[serde(skip)]
    pub context: Option<std::sync::Arc<crate::conversation::ConversationContext>>,
}

impl ScanRequest {
    /// A request made of one user segment.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            id: None,
            segments: vec![Segment::new(Role::User, text)],
            context: None,
        }
    }

    /// A request made of the given segments.
    pub fn segments(segments: Vec<Segment>) -> Self {
        Self {
            id: None,
            segments,
            context: None,
        }
    }

    /// Sets the caller's ID.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Total bytes of text over all segments.
    pub fn total_bytes(&self) -> usize {
        self.segments.iter().map(|s| s.text.len()).sum()
    }

    /// Checks the request against hard limits. Never truncates.
    pub fn check(&self, limits: &Limits) -> Result<(), InputError> {
        if self.segments.is_empty() {
            return Err(InputError::NoSegments);
        }
        if self.segments.len() > limits.max_segments {
            return Err(InputError::TooManySegments {
                found: self.segments.len(),
                limit: limits.max_segments,
            });
        }
        let total = self.total_bytes();
        if total > limits.max_bytes {
            return Err(InputError::TooLarge {
                found: total,
                limit: limits.max_bytes,
            });
        }
        Ok(())
    }
}

/// Hard limits on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Maximum total bytes of text over all segments. Default 1 MiB.
    pub max_bytes: usize,
    /// Maximum number of segments. Default 64.
    pub max_segments: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 1024 * 1024,
            max_segments: 64,
        }
    }
}

/// Why a request was refused before scanning. Refused requests are never partially scanned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The request has no segments.
    #[error("request has no segments")]
    NoSegments,
    /// Too many segments.
    #[error("request has {found} segments; the limit is {limit}")]
    TooManySegments {
        /// Segments in the request.
        found: usize,
        /// The configured limit.
        limit: usize,
    },
    /// Too many bytes.
    #[error("request is {found} bytes; the limit is {limit} bytes (input is never truncated)")]
    TooLarge {
        /// Bytes in the request.
        found: usize,
        /// The configured limit.
        limit: usize,
    },
}
