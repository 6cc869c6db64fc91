//! Transform families and the registry of transforms, by stable id.

use crate::transform::{
    Draw, Intent, MAX_INPUT_BYTES, MAX_OUTPUT_BYTES, Outcome, Output, Transform, params,
};
use crate::{carrier, encoding, split, text, unicode, wrap};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A family of transforms. The ids ([`Family::id`]) are stable: they name rows of the
/// coverage matrix and are recorded in every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// The source prompt unchanged: the baseline row.
    Original,
    /// base64, hex, URL, HTML entities, `\u` escapes, ROT13, Caesar, reversed, Morse, NATO,
    /// binary.
    Encoding,
    /// Homoglyphs, fullwidth, zero-width, tag characters, bidi overrides, combining marks.
    Unicode,
    /// Letters or words spread apart.
    Spacing,
    /// Digits for letters.
    Leet,
    /// Case games.
    Case,
    /// Typos.
    Typo,
    /// Paraphrase by rule: synonym swaps of trigger words, dropped words.
    Paraphrase,
    /// Structures and frames around the payload.
    Wrapping,
    /// The payload cut into parts.
    Splitting,
    /// Benign text before and after.
    Padding,
    /// The payload inside text of another language.
    MixedLanguage,
    /// Two families, one after the other.
    Composition,
}

impl Family {
    /// Every family, in registry order.
    pub const ALL: [Family; 13] = [
        Family::Original,
        Family::Encoding,
        Family::Unicode,
        Family::Spacing,
        Family::Leet,
        Family::Case,
        Family::Typo,
        Family::Paraphrase,
        Family::Wrapping,
        Family::Splitting,
        Family::Padding,
        Family::MixedLanguage,
        Family::Composition,
    ];

    /// The stable id, e.g. `mixed_language`.
    pub fn id(self) -> &'static str {
        match self {
            Family::Original => "original",
            Family::Encoding => "encoding",
            Family::Unicode => "unicode",
            Family::Spacing => "spacing",
            Family::Leet => "leet",
            Family::Case => "case",
            Family::Typo => "typo",
            Family::Paraphrase => "paraphrase",
            Family::Wrapping => "wrapping",
            Family::Splitting => "splitting",
            Family::Padding => "padding",
            Family::MixedLanguage => "mixed_language",
            Family::Composition => "composition",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl std::str::FromStr for Family {
    type Err = crate::RedteamError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Family::ALL
            .into_iter()
            .find(|f| f.id() == s)
            .ok_or_else(|| crate::RedteamError::UnknownFamily(s.to_owned()))
    }
}

/// The unchanged prompt (family `original`).
#[derive(Debug)]
struct Identity;
impl Transform for Identity {
    fn apply(&self, input: &str, _draw: &mut Draw) -> Outcome {
        Outcome::text(input.to_owned(), crate::Params::new())
    }
}

/// Two transforms in turn: `inner` must make one text, which `outer` transforms. Each draws
/// from its own seed derived from the variant's, and both parameter sets are recorded.
#[derive(Debug)]
struct Compose {
    inner: (&'static str, Box<dyn Transform>),
    outer: (&'static str, Box<dyn Transform>),
}

impl Transform for Compose {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        let mut d_inner = draw.child();
        let mut d_outer = draw.child();
        let (mid, p_inner) = match self.inner.1.apply(input, &mut d_inner) {
            Outcome::Applied {
                output: Output::Text(t),
                params,
            } => (t, params),
            Outcome::Applied { .. } => {
                return Outcome::Skipped("the inner transform did not make one text");
            }
            Outcome::Skipped(r) => return Outcome::Skipped(r),
        };
        if mid.len() > MAX_INPUT_BYTES {
            return Outcome::Skipped(INTERMEDIATE_TOO_LONG);
        }
        match self.outer.1.apply(&mid, &mut d_outer) {
            Outcome::Applied {
                output,
                params: p_outer,
            } => Outcome::Applied {
                output,
                params: params([
                    ("inner", json!(self.inner.0)),
                    ("outer", json!(self.outer.0)),
                    ("inner_params", serde_json::Value::Object(p_inner)),
                    ("outer_params", serde_json::Value::Object(p_outer)),
                ]),
            },
            Outcome::Skipped(r) => Outcome::Skipped(r),
        }
    }
}

/// One transform of the registry.
#[derive(Debug)]
pub struct Entry {
    /// `family.name`, e.g. `encoding.base64`; stable.
    pub id: &'static str,
    /// The family.
    pub family: Family,
    transform: Box<dyn Transform>,
}

impl Entry {
    /// The name within the family (`base64`).
    pub fn name(&self) -> &'static str {
        self.id.split_once('.').map_or(self.id, |(_, n)| n)
    }
}

/// Skip reason: the prompt is over [`MAX_INPUT_BYTES`].
pub const INPUT_TOO_LONG: &str = "input over the size cap";
/// Skip reason: a composition's inner output is over [`MAX_INPUT_BYTES`].
pub const INTERMEDIATE_TOO_LONG: &str = "intermediate text over the size cap";
/// Skip reason: the variant is over [`MAX_OUTPUT_BYTES`].
pub const OUTPUT_TOO_LONG: &str = "output over the size cap";
/// Skip reason: nothing but whitespace.
pub const BLANK: &str = "blank text";
/// Skip reason: the transform returned the text unchanged.
pub const UNCHANGED: &str = "the transform left the text unchanged";

/// Every transform, by id.
#[derive(Debug)]
pub struct Registry {
    entries: Vec<Entry>,
}

fn entry(id: &'static str, family: Family, t: impl Transform + 'static) -> Entry {
    Entry {
        id,
        family,
        transform: Box::new(t),
    }
}

fn compose(
    id: &'static str,
    inner: (&'static str, Box<dyn Transform>),
    outer: (&'static str, Box<dyn Transform>),
) -> Entry {
    Entry {
        id,
        family: Family::Composition,
        transform: Box::new(Compose { inner, outer }),
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Registry {
    /// The built-in transforms.
    pub fn builtin() -> Self {
        use Family as F;
        let b = |t: Box<dyn Transform>| t;
        let entries = vec![
            entry("original.identity", F::Original, Identity),
            entry("encoding.base64", F::Encoding, encoding::Base64),
            entry("encoding.hex", F::Encoding, encoding::Hex),
            entry("encoding.url", F::Encoding, encoding::Url),
            entry(
                "encoding.html_entities",
                F::Encoding,
                encoding::HtmlEntities,
            ),
            entry(
                "encoding.unicode_escapes",
                F::Encoding,
                encoding::UnicodeEscapes,
            ),
            entry("encoding.rot13", F::Encoding, encoding::Rot13),
            entry("encoding.caesar", F::Encoding, encoding::Caesar),
            entry("encoding.reversed", F::Encoding, encoding::Reversed),
            entry("encoding.morse", F::Encoding, encoding::Morse),
            entry("encoding.nato", F::Encoding, encoding::Nato),
            entry("encoding.binary", F::Encoding, encoding::Binary),
            entry("unicode.homoglyphs", F::Unicode, unicode::Homoglyphs),
            entry("unicode.fullwidth", F::Unicode, unicode::Fullwidth),
            entry("unicode.zero_width", F::Unicode, unicode::ZeroWidth),
            entry("unicode.tag_chars", F::Unicode, unicode::TagChars),
            entry("unicode.bidi", F::Unicode, unicode::Bidi),
            entry("unicode.combining", F::Unicode, unicode::Combining),
            entry("spacing.spaced", F::Spacing, text::Spaced),
            entry("spacing.newlines", F::Spacing, text::Newlines),
            entry("leet.leet", F::Leet, text::Leet),
            entry("case.upper", F::Case, text::Case(text::CaseMode::Upper)),
            entry(
                "case.alternating",
                F::Case,
                text::Case(text::CaseMode::Alternating),
            ),
            entry("case.random", F::Case, text::Case(text::CaseMode::Random)),
            entry(
                "case.inverted",
                F::Case,
                text::Case(text::CaseMode::Inverted),
            ),
            entry("typo.typos", F::Typo, text::Typos),
            entry("paraphrase.synonyms", F::Paraphrase, text::Synonyms),
            entry("paraphrase.drop_words", F::Paraphrase, text::DropWords),
            entry("wrapping.code_block", F::Wrapping, wrap::CodeBlock),
            entry("wrapping.json", F::Wrapping, wrap::Json),
            entry("wrapping.yaml", F::Wrapping, wrap::Yaml),
            entry("wrapping.markdown_table", F::Wrapping, wrap::MarkdownTable),
            entry("wrapping.html_comment", F::Wrapping, wrap::HtmlComment),
            entry("wrapping.fiction", F::Wrapping, wrap::Frame(wrap::FICTION)),
            entry(
                "wrapping.hypothetical",
                F::Wrapping,
                wrap::Frame(wrap::HYPOTHETICAL),
            ),
            entry(
                "wrapping.socratic",
                F::Wrapping,
                wrap::Frame(wrap::SOCRATIC),
            ),
            entry(
                "wrapping.translate_follow",
                F::Wrapping,
                wrap::Frame(wrap::TRANSLATE),
            ),
            entry("splitting.sentences", F::Splitting, split::Sentences),
            entry("splitting.segments", F::Splitting, split::Segments),
            entry("splitting.turns", F::Splitting, split::Turns),
            entry("splitting.variables", F::Splitting, split::Variables),
            entry(
                "padding.before",
                F::Padding,
                carrier::Padding(carrier::Side::Before),
            ),
            entry(
                "padding.after",
                F::Padding,
                carrier::Padding(carrier::Side::After),
            ),
            entry(
                "padding.both",
                F::Padding,
                carrier::Padding(carrier::Side::Both),
            ),
            entry(
                "mixed_language.carrier",
                F::MixedLanguage,
                carrier::MixedLanguage,
            ),
            compose(
                "composition.base64+json",
                ("encoding.base64", b(Box::new(encoding::Base64))),
                ("wrapping.json", b(Box::new(wrap::Json))),
            ),
            compose(
                "composition.homoglyphs+padding",
                ("unicode.homoglyphs", b(Box::new(unicode::Homoglyphs))),
                (
                    "padding.both",
                    b(Box::new(carrier::Padding(carrier::Side::Both))),
                ),
            ),
            compose(
                "composition.leet+fiction",
                ("leet.leet", b(Box::new(text::Leet))),
                ("wrapping.fiction", b(Box::new(wrap::Frame(wrap::FICTION)))),
            ),
            compose(
                "composition.zero_width+translate",
                ("unicode.zero_width", b(Box::new(unicode::ZeroWidth))),
                (
                    "wrapping.translate_follow",
                    b(Box::new(wrap::Frame(wrap::TRANSLATE))),
                ),
            ),
            compose(
                "composition.rot13+code_block",
                ("encoding.rot13", b(Box::new(encoding::Rot13))),
                ("wrapping.code_block", b(Box::new(wrap::CodeBlock))),
            ),
            compose(
                "composition.synonyms+variables",
                ("paraphrase.synonyms", b(Box::new(text::Synonyms))),
                ("splitting.variables", b(Box::new(split::Variables))),
            ),
            compose(
                "composition.alternating+mixed_language",
                (
                    "case.alternating",
                    b(Box::new(text::Case(text::CaseMode::Alternating))),
                ),
                (
                    "mixed_language.carrier",
                    b(Box::new(carrier::MixedLanguage)),
                ),
            ),
            compose(
                "composition.fullwidth+turns",
                ("unicode.fullwidth", b(Box::new(unicode::Fullwidth))),
                ("splitting.turns", b(Box::new(split::Turns))),
            ),
            compose(
                "composition.typos+padding",
                ("typo.typos", b(Box::new(text::Typos))),
                (
                    "padding.before",
                    b(Box::new(carrier::Padding(carrier::Side::Before))),
                ),
            ),
            compose(
                "composition.spaced+hypothetical",
                ("spacing.spaced", b(Box::new(text::Spaced))),
                (
                    "wrapping.hypothetical",
                    b(Box::new(wrap::Frame(wrap::HYPOTHETICAL))),
                ),
            ),
        ];
        Self { entries }
    }

    /// Every transform, in a stable order (families in [`Family::ALL`] order).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The transform with this id.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// Applies `entry` to `input` with `seed`, inside the bounds every variant keeps: a blank
    /// input, an input over [`MAX_INPUT_BYTES`], an output over [`MAX_OUTPUT_BYTES`], and an
    /// output equal to the input (except for `original`) are skipped with a reason.
    pub fn apply(&self, entry: &Entry, input: &str, seed: u64) -> Outcome {
        self.apply_as(entry, input, seed, Intent::Attack)
    }

    /// [`Registry::apply`] for a prompt of this intent: a benign prompt gets the transform's
    /// neutral framing (same seed, same parameters otherwise).
    pub fn apply_as(&self, entry: &Entry, input: &str, seed: u64, intent: Intent) -> Outcome {
        if input.trim().is_empty() {
            return Outcome::Skipped(BLANK);
        }
        if input.len() > MAX_INPUT_BYTES {
            return Outcome::Skipped(INPUT_TOO_LONG);
        }
        let mut draw = Draw::with_intent(seed, intent);
        let out = entry.transform.apply(input, &mut draw);
        match &out {
            Outcome::Applied { output, .. } if output.len() > MAX_OUTPUT_BYTES => {
                Outcome::Skipped(OUTPUT_TOO_LONG)
            }
            Outcome::Applied {
                output: Output::Text(t),
                ..
            } if t == input && entry.family != Family::Original => Outcome::Skipped(UNCHANGED),
            _ => out,
        }
    }
}
