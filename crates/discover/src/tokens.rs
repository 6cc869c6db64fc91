//! Words, word n-grams and special-token shapes over the folded view.
//!
//! A *word* is a maximal run of letters, digits and `_`, with single apostrophes allowed
//! between word characters (`don't`). A word n-gram is a run of consecutive words separated by
//! exactly one space in the folded text; its string is that slice of the folded text. So an
//! n-gram occurs in a prompt exactly when the literal, with token boundaries, occurs in the
//! prompt's folded view, which is how a `literal` rule with `token_boundary = true` matches.

/// A word character (the rule engine's token boundary: letter, digit or `_`).
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The words of a folded text.
#[derive(Debug)]
pub(crate) struct Words<'a> {
    text: &'a str,
    /// Byte spans of the words.
    spans: Vec<(usize, usize)>,
    /// `linked[i]`: word `i` and word `i + 1` are separated by exactly one space.
    linked: Vec<bool>,
}

impl<'a> Words<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let mut spans = Vec::new();
        let mut start: Option<usize> = None;
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if is_word_char(c) {
                if start.is_none() {
                    start = Some(i);
                }
                continue;
            }
            if c == '\'' && start.is_some() && chars.peek().is_some_and(|&(_, n)| is_word_char(n)) {
                continue;
            }
            if let Some(s) = start.take() {
                spans.push((s, i));
            }
        }
        if let Some(s) = start {
            spans.push((s, text.len()));
        }
        let linked = spans
            .windows(2)
            .map(|w| text.get(w[0].1..w[1].0) == Some(" "))
            .collect();
        Words {
            text,
            spans,
            linked,
        }
    }

    /// Number of words.
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// The n-gram of `n` words starting at word `i`, when those words are contiguous.
    pub(crate) fn gram(&self, i: usize, n: usize) -> Option<&'a str> {
        if n == 0 || i + n > self.spans.len() {
            return None;
        }
        if !self.linked.get(i..i + n - 1)?.iter().all(|&l| l) {
            return None;
        }
        self.text.get(self.spans[i].0..self.spans[i + n - 1].1)
    }
}

/// Special-token shapes in a folded text: `<|name|>`, `<<name>>`, `<</name>>`, `[name]`,
/// `[/name]` (chat-template delimiters). Returned sorted and deduplicated.
pub(crate) fn shapes(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let name_ok = |s: &[u8], extra: &[u8]| {
        !s.is_empty()
            && s.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(c))
            && s.iter().any(u8::is_ascii_lowercase)
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let found: Option<usize> = if rest.starts_with(b"<|") {
            // <|name|>
            find(rest, b"|>", 2, 40)
                .filter(|&e| name_ok(&rest[2..e], b"_.-"))
                .map(|e| e + 2)
        } else if rest.starts_with(b"<<") {
            let from = if rest.get(2) == Some(&b'/') { 3 } else { 2 };
            find(rest, b">>", from, 24)
                .filter(|&e| name_ok(&rest[from..e], b"_"))
                .map(|e| e + 2)
        } else if rest.starts_with(b"[") {
            let from = if rest.get(1) == Some(&b'/') { 2 } else { 1 };
            find(rest, b"]", from, 16)
                .filter(|&e| e - from >= 3 && name_ok(&rest[from..e], b"_"))
                .map(|e| e + 1)
        } else {
            None
        };
        match found.and_then(|end| text.get(i..i + end)) {
            Some(s) => {
                out.push(s.to_string());
                i += s.len();
            }
            None => i += 1,
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Offset of `needle` in `hay[from..from + max]`, relative to `hay`.
fn find(hay: &[u8], needle: &[u8], from: usize, max: usize) -> Option<usize> {
    let end = hay.len().min(from + max + needle.len());
    hay.get(from..end)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grams_need_single_spaces() {
        let w = Words::new("ignore all, previous instructions. don't stop");
        assert_eq!(w.len(), 6);
        assert_eq!(w.gram(0, 2), Some("ignore all"));
        assert_eq!(w.gram(1, 2), None, "comma between");
        assert_eq!(w.gram(2, 2), Some("previous instructions"));
        assert_eq!(w.gram(4, 2), Some("don't stop"));
        assert_eq!(w.gram(4, 3), None);
        assert_eq!(w.gram(0, 0), None);
    }

    #[test]
    fn words_split_on_punctuation_and_keep_unicode_letters() {
        let w = Words::new("role-play as «der admin» 42x");
        let all: Vec<_> = (0..w.len()).filter_map(|i| w.gram(i, 1)).collect();
        assert_eq!(all, ["role", "play", "as", "der", "admin", "42x"]);
    }

    #[test]
    fn special_shapes() {
        assert_eq!(
            shapes("hi <|im_start|>system <<sys>> x <</sys>> [inst] [/inst] [1] <|a b|> [ab]"),
            ["<</sys>>", "<<sys>>", "<|im_start|>", "[/inst]", "[inst]"]
        );
        assert!(shapes("a << b >> c, x<|y").is_empty());
    }
}
