//! Unicode: lookalike letters, fullwidth forms, invisible characters, tag-character smuggling,
//! bidi overrides, combining marks.

use crate::transform::{Draw, NO_ASCII_LETTERS, NO_LETTERS, Outcome, Transform, params};
use serde_json::json;

/// Latin letters and the Cyrillic or Greek letters that look the same in most fonts.
pub const HOMOGLYPHS: [(char, char); 31] = [
    ('a', '\u{0430}'),
    ('c', '\u{0441}'),
    ('e', '\u{0435}'),
    ('i', '\u{0456}'),
    ('j', '\u{0458}'),
    ('o', '\u{043E}'),
    ('p', '\u{0440}'),
    ('s', '\u{0455}'),
    ('x', '\u{0445}'),
    ('y', '\u{0443}'),
    ('h', '\u{04BB}'),
    ('d', '\u{0501}'),
    ('q', '\u{051B}'),
    ('w', '\u{051D}'),
    ('v', '\u{03BD}'),
    ('A', '\u{0410}'),
    ('B', '\u{0412}'),
    ('C', '\u{0421}'),
    ('E', '\u{0415}'),
    ('H', '\u{041D}'),
    ('I', '\u{0406}'),
    ('J', '\u{0408}'),
    ('K', '\u{041A}'),
    ('M', '\u{041C}'),
    ('O', '\u{041E}'),
    ('P', '\u{0420}'),
    ('S', '\u{0405}'),
    ('T', '\u{0422}'),
    ('X', '\u{0425}'),
    ('Y', '\u{04AE}'),
    ('Z', '\u{0396}'),
];

fn homoglyph(c: char) -> Option<char> {
    HOMOGLYPHS.iter().find(|(l, _)| *l == c).map(|(_, h)| *h)
}

/// Latin letters replaced by lookalikes ([`HOMOGLYPHS`]), each with probability `rate`.
#[derive(Debug)]
pub struct Homoglyphs;
impl Transform for Homoglyphs {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.chars().any(|c| homoglyph(c).is_some()) {
            return Outcome::Skipped("no letters with a lookalike");
        }
        let rate = [0.3, 0.6, 1.0][draw.below(3)];
        let mut replaced = 0usize;
        let mut out: String = input
            .chars()
            .map(|c| match homoglyph(c) {
                Some(h) if draw.chance(rate) => {
                    replaced += 1;
                    h
                }
                _ => c,
            })
            .collect();
        if replaced == 0 {
            // A low rate on a short text can replace nothing: replace the first candidate so
            // that every variant differs from its source.
            out = input.to_owned();
            if let Some((i, c)) = input.char_indices().find(|(_, c)| homoglyph(*c).is_some())
                && let Some(h) = homoglyph(c)
            {
                out.replace_range(i..i + c.len_utf8(), h.encode_utf8(&mut [0; 4]));
                replaced = 1;
            }
        }
        Outcome::text(
            out,
            params([("rate", json!(rate)), ("replaced", json!(replaced))]),
        )
    }
}

/// ASCII punctuation, letters and digits as their fullwidth forms (U+FF01..U+FF5E); spaces
/// as the ideographic space when `ideographic_space`.
#[derive(Debug)]
pub struct Fullwidth;
impl Transform for Fullwidth {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.chars().any(|c| c.is_ascii_graphic()) {
            return Outcome::Skipped("no ASCII characters to widen");
        }
        let ideographic_space = draw.chance(0.5);
        let out = input
            .chars()
            .map(|c| match c {
                '!'..='~' => char::from_u32(c as u32 + 0xFEE0).unwrap_or(c),
                ' ' if ideographic_space => '\u{3000}',
                _ => c,
            })
            .collect();
        Outcome::text(
            out,
            params([("ideographic_space", json!(ideographic_space))]),
        )
    }
}

/// The invisible characters [`ZeroWidth`] inserts.
pub const ZERO_WIDTH: [char; 5] = ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}'];

/// An invisible character (drawn from [`ZERO_WIDTH`], `char` is its code point) inserted
/// between letters inside words, each gap with probability `rate`.
#[derive(Debug)]
pub struct ZeroWidth;
impl Transform for ZeroWidth {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        let (_, &zw) = draw.pick(&ZERO_WIDTH).unwrap_or((0, &'\u{200B}'));
        let rate = [0.5, 1.0][draw.below(2)];
        let mut out = String::with_capacity(input.len() * 3);
        let mut inserted = 0usize;
        let mut prev_alnum = false;
        for c in input.chars() {
            let alnum = c.is_alphanumeric();
            if alnum && prev_alnum && draw.chance(rate) {
                out.push(zw);
                inserted += 1;
            }
            out.push(c);
            prev_alnum = alnum;
        }
        if inserted == 0 {
            return Outcome::Skipped("no two adjacent letters to separate");
        }
        Outcome::text(
            out,
            params([
                ("char", json!(format!("U+{:04X}", zw as u32))),
                ("rate", json!(rate)),
                ("inserted", json!(inserted)),
            ]),
        )
    }
}

/// Harmless visible texts that carry tag-character payloads.
pub const TAG_COVERS: [&str; 4] = [
    "Thanks for your help!",
    "Can you check my spelling in this sentence?",
    "Good morning :)",
    "What a lovely day.",
];

/// ASCII smuggled as Unicode tag characters (U+E0000 + code), invisible in most renderers,
/// after a visible cover text ([`TAG_COVERS`], `cover`). Non-ASCII characters cannot be
/// tagged and are left out (`dropped`).
#[derive(Debug)]
pub struct TagChars;
impl Transform for TagChars {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.chars().any(|c| c.is_ascii_alphabetic()) {
            return Outcome::Skipped(NO_ASCII_LETTERS);
        }
        let (cover, text) = draw.pick(&TAG_COVERS).unwrap_or((0, &TAG_COVERS[0]));
        let mut out = String::from(*text);
        let mut dropped = 0usize;
        for c in input.chars() {
            match c {
                ' '..='~' => out.extend(char::from_u32(0xE0000 + c as u32)),
                _ => dropped += 1,
            }
        }
        Outcome::text(
            out,
            params([("cover", json!(cover)), ("dropped", json!(dropped))]),
        )
    }
}

/// The text reversed inside a right-to-left override (`control` `rlo`: U+202E … U+202C) or
/// isolate (`rli`: U+2067 … U+2069): it displays as the original, the code points run
/// backwards.
#[derive(Debug)]
pub struct Bidi;
impl Transform for Bidi {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        let rli = draw.chance(0.5);
        let (open, close, name) = if rli {
            ('\u{2067}', '\u{2069}', "rli")
        } else {
            ('\u{202E}', '\u{202C}', "rlo")
        };
        let mut out = String::with_capacity(input.len() + 6);
        out.push(open);
        out.extend(input.chars().rev());
        out.push(close);
        Outcome::text(out, params([("control", json!(name))]))
    }
}

/// One to `max` combining marks (U+0300..U+036F) after letters, each letter with
/// probability `rate` ("Zalgo" text).
#[derive(Debug)]
pub struct Combining;
impl Transform for Combining {
    fn apply(&self, input: &str, draw: &mut Draw) -> Outcome {
        if !input.chars().any(char::is_alphabetic) {
            return Outcome::Skipped(NO_LETTERS);
        }
        let rate = [0.3, 0.7, 1.0][draw.below(3)];
        let max = 1 + draw.below(3);
        let mut out = String::with_capacity(input.len() * 3);
        let mut added = 0usize;
        for c in input.chars() {
            out.push(c);
            if c.is_alphabetic() && draw.chance(rate) {
                for _ in 0..=draw.below(max) {
                    out.extend(char::from_u32(0x300 + draw.below(0x70) as u32));
                    added += 1;
                }
            }
        }
        if added == 0 {
            // Low rate, short text: mark the first letter.
            if let Some(i) = out.find(char::is_alphabetic) {
                let end = i + out[i..].chars().next().map_or(1, char::len_utf8);
                out.insert(end, '\u{0301}');
                added = 1;
            }
        }
        Outcome::text(
            out,
            params([
                ("rate", json!(rate)),
                ("max", json!(max)),
                ("added", json!(added)),
            ]),
        )
    }
}
