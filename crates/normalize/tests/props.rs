//! Property tests: never panics, spans inside the original on char boundaries, fold is
//! idempotent.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use rampart_normalize::fold::fold;
use rampart_normalize::{NormalizeConfig, Normalizer};

/// Interesting characters: homoglyphs, invisibles, tags, marks, spaces, encodings.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        4 => prop::char::range('a', 'z'),
        1 => prop::char::range('A', 'Z'),
        2 => prop::sample::select(vec![
            ' ', ' ', '\t', '\n', '\u{a0}', '\u{3000}', '\u{200b}', '\u{200d}', '\u{202e}',
            '\u{fe0f}', '\u{e0069}', '\u{e0020}', '\u{e007f}', '\u{0301}', '\u{0308}', '\u{3099}',
            'і', 'о', 'е', 'а', 'р', 'с', 'Г', 'ν', 'Ν', 'ο', 'ᴀ', 'ɪ', 'ｉ', '𝐢', 'ⓘ', 'ﬁ', 'İ',
            'ß', 'ø', '´', '¨', 'か', 'ｶ', 'ﾞ', '%', '&', '#', ';', '\\', 'u', 'x', '=', '+', '/',
            '0', '1', '3', '4', '5', '7', '@', '$', '!', '-', '.', '\u{0}', '\u{85}', '\u{1160}',
        ]),
    ]
}

/// Arabic-script and Indic letters, their variants, marks, digits, joiners.
fn script_char() -> impl Strategy<Value = char> {
    prop_oneof![
        2 => prop::char::range('\u{0600}', '\u{06FF}'),
        2 => prop::char::range('\u{0900}', '\u{09FF}'),
        1 => prop::char::range('\u{FB50}', '\u{FEFC}'),
        2 => prop::sample::select(vec![
            '\u{064A}', '\u{06CC}', '\u{0649}', '\u{0643}', '\u{06A9}', '\u{0627}', '\u{0623}',
            '\u{0625}', '\u{0622}', '\u{0671}', '\u{0629}', '\u{0647}', '\u{0640}', '\u{064E}',
            '\u{0653}', '\u{0654}', '\u{0670}', '\u{0915}', '\u{0928}', '\u{093C}', '\u{0958}',
            '\u{0929}', '\u{094D}', '\u{09AF}', '\u{09BC}', '\u{09DF}', '\u{200C}', '\u{200D}',
            '\u{0661}', '\u{06F5}', ' ', 'a', 'l', '\u{0301}',
        ]),
    ]
}

fn script_string() -> impl Strategy<Value = String> {
    prop::collection::vec(script_char(), 0..48).prop_map(|v| v.into_iter().collect())
}

/// Characters the folded view must never contain: the variants it unifies, the marks and
/// joiners it drops.
const FOLDED_AWAY: &[char] = &[
    '\u{06CC}', '\u{0649}', '\u{06A9}', '\u{0623}', '\u{0625}', '\u{0622}', '\u{0671}', '\u{0629}',
    '\u{0640}', '\u{064E}', '\u{0653}', '\u{0654}', '\u{0670}', '\u{093C}', '\u{09BC}', '\u{0958}',
    '\u{0929}', '\u{09DF}', '\u{200C}', '\u{200D}', '\u{0661}', '\u{06F5}',
];

fn tricky_string() -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_char(), 0..64).prop_map(|v| v.into_iter().collect())
}

/// Strings with nested encodings of tricky strings.
fn encoded_string() -> impl Strategy<Value = String> {
    (
        tricky_string(),
        prop::collection::vec(0u8..5, 0..4),
        tricky_string(),
    )
        .prop_map(|(payload, layers, tail)| {
            let mut s = payload;
            for l in layers {
                s = match l {
                    0 => STANDARD.encode(&s),
                    1 => s.bytes().map(|b| format!("{b:02x}")).collect(),
                    2 => s.bytes().map(|b| format!("%{b:02X}")).collect(),
                    3 => s.chars().map(|c| format!("&#{};", c as u32)).collect(),
                    _ => s
                        .chars()
                        .map(|c| format!("\\u{{{:x}}}", c as u32))
                        .collect(),
                };
            }
            format!("{s} {tail}")
        })
}

fn check_spans(s: &str) {
    let out = Normalizer::new(NormalizeConfig::default()).normalize(s);
    assert_eq!(out.original_len, s.len());
    assert!(out.views.len() >= 2);
    for v in &out.views {
        assert_eq!(v.map.view_len(), v.text.len(), "{:?}", v.kind);
        let n = v.text.len();
        let step = (n / 24).max(1);
        let mut points: Vec<usize> = (0..=n + 1).step_by(step).collect();
        points.push(n);
        for &a in &points {
            for &b in &points {
                let r = v.to_original(a..b);
                assert!(r.start <= r.end && r.end <= s.len(), "{r:?} {:?}", v.kind);
                assert!(s.is_char_boundary(r.start) && s.is_char_boundary(r.end));
                if !s.is_empty() {
                    assert!(r.start < r.end);
                }
            }
        }
    }
    for t in &out.transforms {
        assert!(t.span.end <= s.len() && t.span.start <= t.span.end);
        assert!(s.is_char_boundary(t.span.start) && s.is_char_boundary(t.span.end));
    }
}

/// Regression: a dropped Arabic mark between two Bengali marks that compose (U+09C7 + U+09D7
/// = U+09CC) left them apart on the first fold and composed them on the second, so folding
/// was not idempotent (found by `fold_is_idempotent_on_arabic_and_indic`).
#[test]
fn fold_is_idempotent_when_a_dropped_mark_separates_composing_marks() {
    let s = "\u{904}\u{9c7}\u{64b}\u{9d7}";
    let once = fold(s).text;
    assert_eq!(fold(&once).text, once);
    assert_eq!(once, "\u{904}\u{9cc}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_and_spans_inside_original(s in tricky_string()) {
        check_spans(&s);
    }

    #[test]
    fn arbitrary_unicode_spans_inside_original(s in any::<String>()) {
        check_spans(&s);
    }

    #[test]
    fn nested_encodings_spans_inside_original(s in encoded_string()) {
        check_spans(&s);
    }

    #[test]
    fn fold_is_idempotent(s in tricky_string()) {
        let once = fold(&s).text;
        let twice = fold(&once).text;
        prop_assert_eq!(&twice, &once, "input {:?}", s);
    }

    #[test]
    fn fold_is_idempotent_on_arbitrary_unicode(s in any::<String>()) {
        let once = fold(&s).text;
        prop_assert_eq!(fold(&once).text, once);
    }

    #[test]
    fn fold_is_idempotent_on_arabic_and_indic(s in script_string()) {
        let once = fold(&s).text;
        prop_assert_eq!(fold(&once).text, once.clone(), "input {:?}", s);
        prop_assert!(!once.chars().any(|c| FOLDED_AWAY.contains(&c)), "{:?} -> {:?}", s, once);
    }

    #[test]
    fn arabic_and_indic_spans_inside_original(s in script_string()) {
        check_spans(&s);
    }

    #[test]
    fn fold_map_covers_text(s in tricky_string()) {
        let f = fold(&s);
        prop_assert_eq!(f.map.view_len(), f.text.len());
    }
}
