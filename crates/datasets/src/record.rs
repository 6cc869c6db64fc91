//! The dataset record format (one JSON object per line) and its reader.

use rampart_core::conversation::{ToolCall, Turn};
use rampart_core::{Role, ScanRequest, Segment, Trust};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Read};
use std::path::Path;

/// A prompt's label. The finer labels map to the binary attack/benign truth as documented in
/// `datasets/README.md` (and [`Label::is_attack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Label {
    /// Prompt injection, jailbreak, extraction or exfiltration attempt.
    Attack,
    /// Ordinary use.
    Benign,
    /// A plainly harmful request (not an injection). Counts as attack.
    HarmfulRequest,
    /// Tries to extract the system prompt or hidden context (PromptGuard). Counts as attack.
    Extractive,
    /// Manipulates the model against its instructions (PromptGuard). Counts as attack.
    Manipulative,
    /// Looks risky but is legitimate (PromptGuard, OR-Bench). Counts as benign.
    Borderline,
    /// An ordinary, reciprocal exchange (PromptGuard). Counts as benign.
    Reciprocal,
}

impl Label {
    /// Every label, in declaration order.
    pub const ALL: [Label; 7] = [
        Label::Attack,
        Label::Benign,
        Label::HarmfulRequest,
        Label::Extractive,
        Label::Manipulative,
        Label::Borderline,
        Label::Reciprocal,
    ];

    /// The binary truth: `true` for the positive (attack) class.
    pub fn is_attack(self) -> bool {
        matches!(
            self,
            Label::Attack | Label::HarmfulRequest | Label::Extractive | Label::Manipulative
        )
    }

    /// The snake_case name, e.g. `"harmful_request"`.
    pub fn name(self) -> &'static str {
        match self {
            Label::Attack => "attack",
            Label::Benign => "benign",
            Label::HarmfulRequest => "harmful_request",
            Label::Extractive => "extractive",
            Label::Manipulative => "manipulative",
            Label::Borderline => "borderline",
            Label::Reciprocal => "reciprocal",
        }
    }
}

/// Which split of its source a record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Split {
    /// Training data.
    Train,
    /// Validation (model selection, calibration).
    Validation,
    /// Held-back test data.
    Test,
    /// Evaluation-only data (never trained on).
    Eval,
    /// Not known.
    Unknown,
}

impl Split {
    /// Every split, in declaration order.
    pub const ALL: [Split; 5] = [
        Split::Train,
        Split::Validation,
        Split::Test,
        Split::Eval,
        Split::Unknown,
    ];

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Validation => "validation",
            Split::Test => "test",
            Split::Eval => "eval",
            Split::Unknown => "unknown",
        }
    }
}

/// Where an embedded payload sits in its carrier document (the `position` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadPosition {
    /// Before the carrier's own content.
    Start,
    /// Inside the carrier's content.
    Middle,
    /// After the carrier's own content.
    End,
}

impl PayloadPosition {
    /// Every position, in document order.
    pub const ALL: [PayloadPosition; 3] = [
        PayloadPosition::Start,
        PayloadPosition::Middle,
        PayloadPosition::End,
    ];

    /// The snake_case name, e.g. `"middle"`.
    pub fn name(self) -> &'static str {
        match self {
            PayloadPosition::Start => "start",
            PayloadPosition::Middle => "middle",
            PayloadPosition::End => "end",
        }
    }
}

/// The channel an attacker writes through in a record: see [`Record::channel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// The user's own message (direct injection).
    User,
    /// Output of a tool or function call (indirect injection).
    Tool,
    /// A retrieved document: RAG, web page, email, file (indirect injection).
    Retrieved,
}

impl Channel {
    /// Every channel, in declaration order.
    pub const ALL: [Channel; 3] = [Channel::User, Channel::Tool, Channel::Retrieved];

    /// The snake_case name, e.g. `"tool"`.
    pub fn name(self) -> &'static str {
        match self {
            Channel::User => "user",
            Channel::Tool => "tool",
            Channel::Retrieved => "retrieved",
        }
    }
}

/// One message of a conversation record: the core [`Turn`] plus what only a dataset says
/// about it (how the client edited its history). Serde cannot flatten [`Turn`] under
/// `deny_unknown_fields`, so its fields are repeated here and [`DatasetTurn::to_turn`] drops
/// the dataset-only ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetTurn {
    /// Who wrote it.
    pub role: Role,
    /// The text (empty for an assistant turn that only calls tools).
    #[serde(default)]
    pub text: String,
    /// Tool calls of an assistant turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool turn answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Overrides the policy's trust level for this turn's role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
    /// On a user turn: before it, the client cut its conversation back to its first `K`
    /// messages (the refused branch is gone from what it sends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewind: Option<usize>,
    /// On an assistant turn: the client wrote it; the model never produced it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forged: bool,
}

impl DatasetTurn {
    /// A turn with text only.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            trust: None,
            rewind: None,
            forged: false,
        }
    }

    /// The message as a client sends it.
    pub fn to_turn(&self) -> Turn {
        Turn {
            role: self.role,
            text: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            trust: self.trust,
        }
    }
}

/// One prompt of a dataset. Exactly one of `text`, `segments` and `turns` is present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Unique within the dataset.
    pub id: String,
    /// A single-layer prompt (one user segment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A multi-layer prompt, in order, with roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<Vec<Segment>>,
    /// A conversation: every message in order, as the client sent them (see
    /// `docs` of the Conversations_v1 format). Judged by replaying it call by call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<DatasetTurn>>,
    /// Attacks in a conversation: index in `turns` of the first message that carries the
    /// attack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack_turn: Option<usize>,
    /// The label.
    pub label: Label,
    /// Attack taxonomy or benign category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Where the record came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// Tag of the main language: an ISO 639-1 code (`en`), with `-Latn` for a
    /// transliterated Latin-script form (`hi-Latn`), or `mixed-xx-en` for code-switched text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The kind of document an embedded payload sits in (`email`, `html_page`, …), for
    /// generated indirect-injection sets; free text, not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<String>,
    /// Where the payload sits in its carrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<PayloadPosition>,
    /// For a variant written by `rampart redteam generate`: how it was made from its source
    /// record. Metadata only: scoring ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<Mutation>,
}

/// How a red-team variant was made: the transform family and transform (stable ids), the
/// parameters it drew, the seed that reproduces it, and the record it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// The transform family's id (`encoding`, `unicode`, `wrapping`, …).
    pub family: String,
    /// The transform's id within the family (`base64`, `homoglyphs`, …); for a composition,
    /// `inner+outer`.
    pub transform: String,
    /// The parameters the transform used (drawn from the seed), by name.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The seed of this variant, derived from the run's seed, the source and the transform.
    pub seed: u64,
    /// The source dataset's name.
    pub source_dataset: String,
    /// The source record's id.
    pub source_id: String,
    /// The source record's category, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_category: Option<String>,
}

/// A record that breaks an invariant serde cannot check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// `id` is blank.
    #[error("empty `id`")]
    EmptyId,
    /// `carrier` is given but blank.
    #[error("empty `carrier`: name the kind of document (e.g. \"email\") or leave the field out")]
    EmptyCarrier,
    /// None of the three bodies.
    #[error("none of `text`, `segments`, `turns` given")]
    NoBody,
    /// Two or three bodies.
    #[error("more than one of `text`, `segments`, `turns` given; use one")]
    SeveralBodies,
    /// `segments = []`.
    #[error("`segments` is empty")]
    NoSegments,
    /// `attack_turn` on a record that is not a conversation.
    #[error("`attack_turn` is only for conversations (`turns`)")]
    AttackTurnWithoutTurns,
    /// `turns = []`.
    #[error("`turns` is empty")]
    NoTurns,
    /// The conversation ends with the model's message.
    #[error(
        "the last message of `turns` is an assistant turn; a conversation ends with the \
         message to judge"
    )]
    EndsWithAssistant,
    /// `forged` on a turn that is not the assistant's: the turn and its role.
    #[error("turn {0}: `forged` is only for assistant turns (this one is {1})")]
    ForgedNotAssistant(usize, Role),
    /// `rewind` on a turn that is not the user's: the turn and its role.
    #[error("turn {0}: `rewind` is only for user turns (this one is {1})")]
    RewindNotUser(usize, Role),
    /// `rewind` keeps more messages than the client holds.
    #[error("turn {turn}: `rewind: {keep}` keeps more messages than the client holds ({held})")]
    RewindPastHeld {
        /// The turn.
        turn: usize,
        /// Messages it keeps.
        keep: usize,
        /// Messages held before it.
        held: usize,
    },
    /// `attack_turn` past the last message: it and the last index.
    #[error("`attack_turn` {0} is past the last message ({1})")]
    AttackTurnPastEnd(usize, usize),
    /// `attack_turn` names an assistant turn.
    #[error(
        "`attack_turn` {0} is an assistant turn; it names the first message that carries the \
         attack"
    )]
    AttackTurnOnAssistant(usize),
}

impl Record {
    /// Checks the invariants serde cannot: a non-empty id, exactly one of
    /// text/segments/turns, at least one segment, a non-blank carrier when one is given, and
    /// for conversations [`Record::validate_turns`].
    pub fn validate(&self) -> Result<(), RecordError> {
        if self.id.trim().is_empty() {
            return Err(RecordError::EmptyId);
        }
        if self.carrier.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return Err(RecordError::EmptyCarrier);
        }
        let given = [
            self.text.is_some(),
            self.segments.is_some(),
            self.turns.is_some(),
        ];
        match given.iter().filter(|g| **g).count() {
            0 => return Err(RecordError::NoBody),
            1 => {}
            _ => return Err(RecordError::SeveralBodies),
        }
        if self.segments.as_ref().is_some_and(Vec::is_empty) {
            return Err(RecordError::NoSegments);
        }
        match &self.turns {
            Some(turns) => self.validate_turns(turns),
            None if self.attack_turn.is_some() => Err(RecordError::AttackTurnWithoutTurns),
            None => Ok(()),
        }
    }

    /// A conversation's invariants: at least one message; the last is not an assistant
    /// turn (it is the one to judge); `rewind` only on user turns and never past what the
    /// client holds at that point; `forged` only on assistant turns; `attack_turn` inside
    /// `turns` and on a message that is not the model's.
    fn validate_turns(&self, turns: &[DatasetTurn]) -> Result<(), RecordError> {
        let Some(last) = turns.last() else {
            return Err(RecordError::NoTurns);
        };
        if last.role == Role::Assistant {
            return Err(RecordError::EndsWithAssistant);
        }
        let mut held = 0usize;
        for (i, t) in turns.iter().enumerate() {
            if t.forged && t.role != Role::Assistant {
                return Err(RecordError::ForgedNotAssistant(i, t.role));
            }
            if let Some(k) = t.rewind {
                if t.role != Role::User {
                    return Err(RecordError::RewindNotUser(i, t.role));
                }
                if k > held {
                    return Err(RecordError::RewindPastHeld {
                        turn: i,
                        keep: k,
                        held,
                    });
                }
                held = k;
            }
            held += 1;
        }
        if let Some(a) = self.attack_turn {
            match turns.get(a) {
                None => return Err(RecordError::AttackTurnPastEnd(a, turns.len() - 1)),
                Some(t) if t.role == Role::Assistant => {
                    return Err(RecordError::AttackTurnOnAssistant(a));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Whether the record is a conversation (`turns`).
    pub fn is_conversation(&self) -> bool {
        self.turns.is_some()
    }

    /// The channel the attacker-controlled text of this record comes through: `tool` when
    /// any segment has role `tool`, else `retrieved` when any has role `retrieved`, else
    /// `user` (a plain `text` record is one user segment).
    ///
    /// Why this order: an attacker who can write a tool result or a retrieved document is the
    /// indirect-injection case whatever the user typed next to it (the user segment of such a
    /// record is the victim's harmless request), and a tool result is the channel closest to
    /// actions. `system`, `developer` and `assistant` segments are not attacker-written
    /// (trusted by default, see the policy's `trust`), so a record made only of them and
    /// user segments counts as `user`. The channel is a property of the record, the same under
    /// every configuration, so it does not follow a configuration's trust table.
    pub fn channel(&self) -> Channel {
        let roles = || {
            self.segments
                .iter()
                .flatten()
                .map(|s| s.role)
                .chain(self.turns.iter().flatten().map(|t| t.role))
        };
        if roles().any(|r| r == Role::Tool) {
            Channel::Tool
        } else if roles().any(|r| r == Role::Retrieved) {
            Channel::Retrieved
        } else {
            Channel::User
        }
    }

    /// The scan request for this record (plain text is one user segment; a conversation is
    /// its messages as segments, which only a caller that does not replay conversations
    /// should use).
    pub fn to_request(&self) -> ScanRequest {
        match (&self.segments, &self.text, &self.turns) {
            (Some(segs), _, _) => ScanRequest::segments(segs.clone()),
            (None, Some(t), _) => ScanRequest::text(t.clone()),
            (None, None, Some(turns)) => ScanRequest::segments(
                turns
                    .iter()
                    .map(|t| Segment {
                        role: t.role,
                        text: t.to_turn().content(),
                        trust: t.trust,
                    })
                    .collect(),
            ),
            (None, None, None) => ScanRequest::segments(Vec::new()),
        }
    }

    /// All the record's text, segments or messages joined by a newline (for deduplication
    /// and mining).
    pub fn joined_text(&self) -> String {
        match (&self.segments, &self.text, &self.turns) {
            (Some(segs), _, _) => segs
                .iter()
                .map(|s| s.text.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            (None, Some(t), _) => t.clone(),
            (None, None, Some(turns)) => turns
                .iter()
                .map(|t| t.to_turn().content())
                .collect::<Vec<_>>()
                .join("\n"),
            (None, None, None) => String::new(),
        }
    }
}

/// A row that could not be read, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowError {
    /// 1-based line (or row) number.
    pub line: usize,
    /// The row's id when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.id {
            Some(id) => write!(f, "line {} (id {id}): {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

fn parse_line(line_no: usize, line: &str) -> Result<Record, RowError> {
    let rec: Record = serde_json::from_str(line).map_err(|e| RowError {
        line: line_no,
        id: serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| {
                v.get("id")
                    .map(|i| i.as_str().map_or(i.to_string(), str::to_owned))
            }),
        message: e.to_string(),
    })?;
    rec.validate().map_err(|e| RowError {
        line: line_no,
        id: Some(rec.id.clone()),
        message: e.to_string(),
    })?;
    Ok(rec)
}

/// Reads JSONL from a string: the good records, and one error per bad line (blank lines are
/// skipped). Duplicate ids are errors on the later line.
pub fn read_jsonl_str(src: &str) -> (Vec<Record>, Vec<RowError>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in src.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(i + 1, line) {
            Ok(r) if !seen.insert(r.id.clone()) => errors.push(RowError {
                line: i + 1,
                id: Some(r.id),
                message: "duplicate id".into(),
            }),
            Ok(r) => records.push(r),
            Err(e) => errors.push(e),
        }
    }
    (records, errors)
}

/// Longest JSONL line [`read_jsonl`] accepts; longer lines are row errors.
pub const MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a JSONL dataset file. I/O errors fail the call; bad rows are returned as errors and
/// the rest is read. Invalid UTF-8 on a line, or a line over [`MAX_LINE_BYTES`], is an error
/// for that line only.
pub fn read_jsonl(path: &Path) -> std::io::Result<(Vec<Record>, Vec<RowError>)> {
    let file = std::fs::File::open(path)?;
    let mut reader = std::io::BufReader::new(file);
    let mut records = Vec::new();
    let mut errors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        if (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut buf)?
            == 0
        {
            break;
        }
        line_no += 1;
        if buf.len() as u64 > MAX_LINE_BYTES {
            // Skip the rest of the over-long line without holding it in memory.
            if buf.last() != Some(&b'\n') {
                let mut sink = Vec::new();
                loop {
                    sink.clear();
                    let n = (&mut reader).take(64 * 1024).read_until(b'\n', &mut sink)?;
                    if n == 0 || sink.last() == Some(&b'\n') {
                        break;
                    }
                }
            }
            errors.push(RowError {
                line: line_no,
                id: None,
                message: format!("line longer than {MAX_LINE_BYTES} bytes"),
            });
            continue;
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            errors.push(RowError {
                line: line_no,
                id: None,
                message: "invalid UTF-8".into(),
            });
            continue;
        };
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line_no, line.trim_end_matches(['\n', '\r'])) {
            Ok(r) if !seen.insert(r.id.clone()) => errors.push(RowError {
                line: line_no,
                id: Some(r.id),
                message: "duplicate id".into(),
            }),
            Ok(r) => records.push(r),
            Err(e) => errors.push(e),
        }
    }
    Ok((records, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_mapping_is_documented_binary_truth() {
        let attacks: Vec<_> = Label::ALL.iter().filter(|l| l.is_attack()).collect();
        assert_eq!(
            attacks,
            [
                &Label::Attack,
                &Label::HarmfulRequest,
                &Label::Extractive,
                &Label::Manipulative
            ]
        );
    }

    #[test]
    fn malformed_rows_are_reported_and_the_rest_is_read() {
        let src = concat!(
            "{\"id\":\"1\",\"text\":\"a\",\"label\":\"benign\"}\n",
            "{\"id\":\"2\",\"label\":\"benign\"}\n",
            "{\"id\":\"3\",\"text\":\"a\",\"segments\":[{\"role\":\"user\",\"text\":\"b\"}],\"label\":\"attack\"}\n",
            "{\"id\":\"4\",\"text\":\"a\",\"label\":\"nonsense\"}\n",
            "{\"id\":\"5\",\"text\":\"a\",\"label\":\"attack\",\"extra\":1}\n",
            "{\"id\":\"1\",\"text\":\"dup\",\"label\":\"attack\"}\n",
            "\n",
            "{\"id\":\"6\",\"segments\":[{\"role\":\"system\",\"text\":\"s\"},{\"role\":\"user\",\"text\":\"u\"}],\"label\":\"extractive\"}\n",
        );
        let (recs, errs) = read_jsonl_str(src);
        assert_eq!(
            recs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["1", "6"]
        );
        assert_eq!(
            errs.iter().map(|e| e.line).collect::<Vec<_>>(),
            [2, 3, 4, 5, 6]
        );
        assert_eq!(errs[4].message, "duplicate id");
        assert_eq!(recs[1].to_request().segments.len(), 2);
    }

    #[test]
    fn invalid_utf8_line_is_one_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.jsonl");
        let mut bytes = b"{\"id\":\"1\",\"text\":\"a\",\"label\":\"benign\"}\n".to_vec();
        bytes.extend_from_slice(b"{\"id\":\"2\",\"text\":\"\xff\xfe\",\"label\":\"benign\"}\n");
        bytes.extend_from_slice(b"{\"id\":\"3\",\"text\":\"c\",\"label\":\"attack\"}\n");
        std::fs::write(&p, bytes).unwrap();
        let (recs, errs) = read_jsonl(&p).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, 2);
    }

    #[test]
    fn over_long_line_is_one_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.jsonl");
        let long = "x".repeat(usize::try_from(MAX_LINE_BYTES).unwrap() + 10);
        let src = format!(
            "{{\"id\":\"1\",\"text\":\"a\",\"label\":\"benign\"}}\n{{\"id\":\"2\",\"text\":\"{long}\",\"label\":\"benign\"}}\n{{\"id\":\"3\",\"text\":\"c\",\"label\":\"attack\"}}\n"
        );
        std::fs::write(&p, src).unwrap();
        let (recs, errs) = read_jsonl(&p).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["1", "3"]
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, 2);
        assert!(errs[0].message.contains("longer than"));
    }

    #[test]
    fn carrier_and_position_are_read() {
        let src = concat!(
            "{\"id\":\"1\",\"segments\":[{\"role\":\"user\",\"text\":\"sum up\"},{\"role\":\"retrieved\",\"text\":\"mail\"}],\"label\":\"attack\",\"carrier\":\"email\",\"position\":\"start\"}\n",
            "{\"id\":\"2\",\"text\":\"a\",\"label\":\"attack\",\"carrier\":\"html_page\",\"position\":\"middle\"}\n",
            "{\"id\":\"3\",\"text\":\"a\",\"label\":\"attack\",\"position\":\"end\"}\n",
            "{\"id\":\"4\",\"text\":\"a\",\"label\":\"benign\",\"carrier\":\"csv_rows\"}\n",
            "{\"id\":\"5\",\"text\":\"a\",\"label\":\"benign\"}\n",
        );
        let (recs, errs) = read_jsonl_str(src);
        assert!(errs.is_empty(), "{errs:?}");
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.carrier.as_deref(), r.position))
            .collect();
        assert_eq!(
            got,
            [
                (Some("email"), Some(PayloadPosition::Start)),
                (Some("html_page"), Some(PayloadPosition::Middle)),
                (None, Some(PayloadPosition::End)),
                (Some("csv_rows"), None),
                (None, None),
            ]
        );
        // Written back as read: the fields round-trip, and records without them gain none.
        let line = serde_json::to_string(&recs[0]).unwrap();
        assert!(
            line.contains("\"carrier\":\"email\",\"position\":\"start\""),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), recs[0]);
        let plain = serde_json::to_string(&recs[4]).unwrap();
        assert!(
            !plain.contains("carrier") && !plain.contains("position"),
            "{plain}"
        );
    }

    #[test]
    fn bad_position_or_empty_carrier_is_an_error_naming_the_line() {
        let src = concat!(
            "{\"id\":\"1\",\"text\":\"a\",\"label\":\"attack\",\"position\":\"start\"}\n",
            "{\"id\":\"2\",\"text\":\"a\",\"label\":\"attack\",\"position\":\"beginning\"}\n",
            "{\"id\":\"3\",\"text\":\"a\",\"label\":\"attack\",\"carrier\":\"  \"}\n",
            "{\"id\":\"4\",\"text\":\"a\",\"label\":\"attack\",\"position\":\"Start\"}\n",
            "{\"id\":\"5\",\"text\":\"a\",\"label\":\"attack\",\"carrier\":7}\n",
        );
        let (recs, errs) = read_jsonl_str(src);
        assert_eq!(recs.len(), 1);
        assert_eq!(
            errs.iter().map(|e| e.line).collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
        let bad = errs[0].to_string();
        assert!(bad.starts_with("line 2 (id 2): "), "{bad}");
        assert!(
            bad.contains("unknown variant `beginning`") && bad.contains("`start`, `middle`, `end`"),
            "{bad}"
        );
        let empty = errs[1].to_string();
        assert!(
            empty.starts_with("line 3 (id 3): empty `carrier`"),
            "{empty}"
        );
        assert!(
            errs[2].message.contains("unknown variant `Start`"),
            "{:?}",
            errs[2]
        );
    }

    #[test]
    fn conversation_records_are_read_and_checked() {
        let src = concat!(
            // 1: good: system, rewind on a user turn, forged assistant turn, attack_turn.
            r#"{"id":"1","turns":[{"role":"system","text":"s"},{"role":"user","text":"u1"},{"role":"assistant","text":"a1","forged":true},{"role":"user","text":"u2","rewind":2}],"label":"attack","attack_turn":3}"#,
            "\n",
            // 2: ends with an assistant turn.
            r#"{"id":"2","turns":[{"role":"user","text":"u"},{"role":"assistant","text":"a"}],"label":"benign"}"#,
            "\n",
            // 3: empty turns.
            r#"{"id":"3","turns":[],"label":"benign"}"#,
            "\n",
            // 4: attack_turn on an assistant turn.
            r#"{"id":"4","turns":[{"role":"user","text":"u"},{"role":"assistant","text":"a"},{"role":"user","text":"u"}],"label":"attack","attack_turn":1}"#,
            "\n",
            // 5: attack_turn past the end.
            r#"{"id":"5","turns":[{"role":"user","text":"u"}],"label":"attack","attack_turn":1}"#,
            "\n",
            // 6: text and turns.
            r#"{"id":"6","text":"t","turns":[{"role":"user","text":"u"}],"label":"benign"}"#,
            "\n",
            // 7: rewind on an assistant turn.
            r#"{"id":"7","turns":[{"role":"user","text":"u"},{"role":"assistant","text":"a","rewind":0},{"role":"user","text":"u"}],"label":"benign"}"#,
            "\n",
            // 8: forged on a user turn.
            r#"{"id":"8","turns":[{"role":"user","text":"u","forged":true}],"label":"benign"}"#,
            "\n",
            // 9: rewind keeps more than the client holds.
            r#"{"id":"9","turns":[{"role":"user","text":"u"},{"role":"user","text":"u","rewind":2}],"label":"benign"}"#,
            "\n",
            // 10: unknown field in a turn.
            r#"{"id":"10","turns":[{"role":"user","text":"u","colour":1}],"label":"benign"}"#,
            "\n",
            // 11: attack_turn without turns.
            r#"{"id":"11","text":"t","label":"attack","attack_turn":0}"#,
            "\n",
            // 12: tool calls and a tool turn.
            r#"{"id":"12","turns":[{"role":"user","text":"find it"},{"role":"assistant","text":"","tool_calls":[{"id":"c1","name":"web_search","arguments":"{}"}]},{"role":"tool","text":"result","tool_call_id":"c1"}],"label":"benign"}"#,
            "\n",
        );
        let (recs, errs) = read_jsonl_str(src);
        assert_eq!(
            recs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["1", "12"]
        );
        let lines: Vec<usize> = errs.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        for (line, want) in [
            (2, "assistant turn"),
            (3, "empty"),
            (4, "`attack_turn` 1 is an assistant turn"),
            (5, "past the last message"),
            (6, "more than one of"),
            (7, "`rewind` is only for user turns"),
            (8, "`forged` is only for assistant turns"),
            (9, "keeps more messages than the client holds (1)"),
            (10, "unknown field `colour`"),
            (11, "only for conversations"),
        ] {
            let e = errs.iter().find(|e| e.line == line).unwrap();
            assert!(e.message.contains(want), "line {line}: {}", e.message);
        }
        let r = &recs[0];
        assert!(r.is_conversation());
        let turns = r.turns.as_ref().unwrap();
        assert!(turns[2].forged && turns[3].rewind == Some(2));
        // The dataset-only fields are not part of the message a client sends.
        assert_eq!(
            turns[3].to_turn(),
            rampart_core::conversation::Turn::new(Role::User, "u2")
        );
        // Round trip: the extras are written only where set.
        let line = serde_json::to_string(r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), *r);
        assert_eq!(line.matches("forged").count(), 1, "{line}");
        assert_eq!(recs[1].channel(), Channel::Tool);
        assert_eq!(r.channel(), Channel::User);
        assert!(recs[1].joined_text().contains("[tool_call web_search {}]"));
    }

    fn with_roles(roles: &[Role]) -> Record {
        Record {
            id: "r".into(),
            text: None,
            segments: Some(roles.iter().map(|r| Segment::new(*r, "t")).collect()),
            turns: None,
            attack_turn: None,
            label: Label::Attack,
            category: None,
            source: None,
            split: None,
            language: None,
            carrier: None,
            position: None,
            mutation: None,
        }
    }

    #[test]
    fn mutation_metadata_round_trips_and_stays_strict() {
        let line = r#"{"id":"v1","text":"aWdub3Jl","label":"attack","mutation":{"family":"encoding","transform":"base64","params":{"lead":2},"seed":7,"source_dataset":"d","source_id":"a1","source_category":"override"}}"#;
        let (recs, errs) = read_jsonl_str(line);
        assert!(errs.is_empty(), "{errs:?}");
        let m = recs[0].mutation.as_ref().unwrap();
        assert_eq!(
            (m.family.as_str(), m.transform.as_str(), m.seed),
            ("encoding", "base64", 7)
        );
        assert_eq!(m.params["lead"], 2);
        assert_eq!(serde_json::to_string(&recs[0]).unwrap(), line);
        // Unknown fields inside `mutation` are refused like everywhere else in a record.
        let bad = line.replace("\"seed\"", "\"sede\"");
        let (recs, errs) = read_jsonl_str(&bad);
        assert!(recs.is_empty());
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn channel_is_tool_then_retrieved_then_user() {
        use Role::{Assistant, Developer, Retrieved, System, Tool, User};
        let cases: [(&[Role], Channel); 9] = [
            (&[User], Channel::User),
            (&[System, User], Channel::User),
            (&[System, Developer, User, Assistant], Channel::User),
            (&[System], Channel::User),
            (&[User, Tool], Channel::Tool),
            (&[System, User, Retrieved], Channel::Retrieved),
            (&[Retrieved, User], Channel::Retrieved),
            // Tool wins over retrieved, whatever the order.
            (&[Retrieved, Tool], Channel::Tool),
            (&[System, Tool, User, Retrieved], Channel::Tool),
        ];
        for (roles, want) in cases {
            assert_eq!(with_roles(roles).channel(), want, "{roles:?}");
        }
        let (recs, errs) = read_jsonl_str("{\"id\":\"t\",\"text\":\"a\",\"label\":\"benign\"}\n");
        assert!(errs.is_empty());
        assert_eq!(recs[0].channel(), Channel::User);
        // The names are the serde names.
        for c in Channel::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
        for p in PayloadPosition::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
    }

    #[test]
    fn repo_datasets_read_cleanly() {
        for f in [
            "clean_benign_v1.jsonl",
            "attacks_handwritten_v1.jsonl",
            "embedded_injections_v1.jsonl",
            "trigger_benign_v1.jsonl",
            "multilingual_attacks_v1.jsonl",
        ] {
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../datasets")
                .join(f);
            let (recs, errs) = read_jsonl(&p).unwrap();
            assert!(errs.is_empty(), "{f}: {errs:?}");
            assert!(recs.len() >= 120, "{f}");
        }
    }

    /// Trigger_Benign_v1 is an over-defense benchmark: every row benign and evaluation-only,
    /// with a category and a language, in at least 10 languages, and the sidecar names the
    /// one to three trigger words of every row, in file order.
    #[test]
    fn trigger_benign_rows_are_benign_eval_and_their_triggers_are_listed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets");
        let (recs, errs) = read_jsonl(&dir.join("trigger_benign_v1.jsonl")).unwrap();
        assert!(errs.is_empty(), "{errs:?}");
        assert!(recs.len() >= 400, "{} rows", recs.len());
        let mut languages = std::collections::BTreeSet::new();
        for r in &recs {
            assert_eq!(r.label, Label::Benign, "{}", r.id);
            assert_eq!(r.split, Some(Split::Eval), "{}", r.id);
            assert!(r.text.is_some(), "{}", r.id);
            assert!(
                r.category.as_deref().is_some_and(|c| !c.is_empty()),
                "{}",
                r.id
            );
            let lang = r.language.as_deref().unwrap_or_default();
            assert!(!lang.is_empty(), "{}", r.id);
            languages.insert(lang.to_string());
        }
        assert!(languages.len() >= 10, "{languages:?}");
        let sidecar =
            std::fs::read_to_string(dir.join("trigger_benign_v1.triggers.jsonl")).unwrap();
        let lines: Vec<&str> = sidecar.lines().collect();
        assert_eq!(lines.len(), recs.len());
        for (line, r) in lines.iter().zip(&recs) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["id"], r.id.as_str());
            let triggers = v["triggers"].as_array().unwrap();
            assert!((1..=3).contains(&triggers.len()), "{}", r.id);
            let text = r.text.as_deref().unwrap_or_default().to_lowercase();
            for t in triggers {
                let t = t.as_str().unwrap().to_lowercase();
                assert!(text.contains(&t), "{}: trigger {t:?} not in the text", r.id);
            }
        }
    }
}
