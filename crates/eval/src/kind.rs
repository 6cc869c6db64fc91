//! What a message holds, roughly: code, a log, a pasted document, non-English text, or chat.
//! For reporting only (which kind of ordinary traffic draws the false alarms): a few cheap
//! heuristics, checked in this order, never used to decide anything.

/// A message's content kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContentKind {
    /// Mostly letters outside ASCII (30 % or more of at least 20 letters).
    NonEnglish,
    /// A fenced block, or three or more lines that read as code.
    Code,
    /// Three or more lines with a timestamp, a log level or a stack frame.
    Log,
    /// Long text (1,200 bytes or more) of none of the kinds above: a pasted document.
    Document,
    /// Anything else.
    Chat,
}

impl ContentKind {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ContentKind::NonEnglish => "non_english",
            ContentKind::Code => "code",
            ContentKind::Log => "log",
            ContentKind::Document => "document",
            ContentKind::Chat => "chat",
        }
    }
}

/// Bytes from which a message of no other kind counts as a pasted document.
const DOCUMENT_BYTES: usize = 1_200;

/// The content kind of `text` (see the module docs).
pub fn content_kind(text: &str) -> ContentKind {
    let letters = text.chars().filter(|c| c.is_alphabetic()).count();
    let non_ascii = text
        .chars()
        .filter(|c| c.is_alphabetic() && !c.is_ascii())
        .count();
    if letters >= 20 && non_ascii * 10 >= letters * 3 {
        return ContentKind::NonEnglish;
    }
    if text.contains("```") || text.lines().filter(|l| code_line(l)).count() >= 3 {
        return ContentKind::Code;
    }
    if text.lines().filter(|l| log_line(l)).count() >= 3 {
        return ContentKind::Log;
    }
    if text.len() >= DOCUMENT_BYTES {
        return ContentKind::Document;
    }
    ContentKind::Chat
}

fn code_line(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() {
        return false;
    }
    const STARTS: [&str; 16] = [
        "def ",
        "class ",
        "import ",
        "from ",
        "function ",
        "const ",
        "let ",
        "var ",
        "#include",
        "public ",
        "private ",
        "return ",
        "if (",
        "for (",
        "fn ",
        "SELECT ",
    ];
    STARTS.iter().any(|s| t.starts_with(s))
        || t.ends_with(';')
        || t.ends_with('{')
        || t == "}"
        || t.ends_with("):")
}

fn log_line(line: &str) -> bool {
    let t = line.trim();
    let clock = t.as_bytes().windows(8).any(|w| {
        w[0].is_ascii_digit()
            && w[1].is_ascii_digit()
            && w[2] == b':'
            && w[3].is_ascii_digit()
            && w[4].is_ascii_digit()
            && w[5] == b':'
            && w[6].is_ascii_digit()
            && w[7].is_ascii_digit()
    });
    const MARKS: [&str; 7] = [
        "ERROR",
        "WARN",
        "INFO",
        "DEBUG",
        "Traceback",
        "Exception",
        "  at ",
    ];
    clock || MARKS.iter().any(|m| line.contains(m))
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn kinds_of_ordinary_messages() {
        assert_eq!(
            content_kind("What's a good name for a cat?"),
            ContentKind::Chat
        );
        assert_eq!(
            content_kind("Wie kann ich meinen Router zurücksetzen? Ich habe es schon versucht."),
            ContentKind::Chat,
            "German in Latin letters is mostly ASCII letters: chat, not non_english"
        );
        assert_eq!(
            content_kind("Как настроить маршрутизатор дома, чтобы всё работало?"),
            ContentKind::NonEnglish
        );
        assert_eq!(
            content_kind("Fix this:\nfn main() {\n    let x = 1;\n}\n"),
            ContentKind::Code
        );
        assert_eq!(
            content_kind(
                "2024-01-01 10:00:01 INFO start\n2024-01-01 10:00:02 WARN slow\n10:00:03 ERROR x"
            ),
            ContentKind::Log
        );
        assert_eq!(
            content_kind(&"A plain sentence. ".repeat(80)),
            ContentKind::Document
        );
    }
}
