//! Multilingual_Attacks_v1: the shape the issue asks for (size, languages, scripts, styles).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use rampart_datasets::{Label, MULTILINGUAL_ATTACKS_NAME, Split, load};
use std::collections::BTreeSet;
use std::path::Path;

/// The language a tag names: `hi` for `hi` and `hi-Latn`, the non-English part of
/// `mixed-hi-en`.
fn base_language(tag: &str) -> &str {
    match tag.strip_prefix("mixed-") {
        Some(pair) => pair.split('-').find(|l| *l != "en").unwrap_or(pair),
        None => tag.split('-').next().unwrap_or(tag),
    }
}

fn is_rtl(c: char) -> bool {
    // Hebrew, Arabic (incl. Persian and Urdu letters), Arabic presentation forms.
    matches!(c, '\u{0590}'..='\u{05FF}' | '\u{0600}'..='\u{06FF}' | '\u{0750}'..='\u{077F}'
        | '\u{FB50}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}')
}

fn is_indic(c: char) -> bool {
    // Devanagari through Malayalam (Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada).
    matches!(c, '\u{0900}'..='\u{0D7F}')
}

#[test]
fn multilingual_attacks_v1_has_the_promised_shape() {
    let d = load(MULTILINGUAL_ATTACKS_NAME, Path::new("/nonexistent")).unwrap();
    assert!(d.errors.is_empty(), "{:?}", d.errors.first());
    assert!(d.records.len() >= 200, "{} rows", d.records.len());

    let mut languages = BTreeSet::new();
    let (mut transliterated, mut mixed) = (0, 0);
    for (i, r) in d.records.iter().enumerate() {
        assert_eq!(r.id, format!("mla-{:04}", i + 1), "ids in file order");
        assert_eq!(r.label, Label::Attack, "{}", r.id);
        assert_eq!(r.split, Some(Split::Eval), "{}", r.id);
        assert!(r.text.is_some(), "{}", r.id);
        let category = r.category.as_deref().unwrap_or_default();
        assert!(!category.is_empty(), "{} has a category", r.id);
        let tag = r.language.as_deref().unwrap_or_default();
        assert!(!tag.is_empty(), "{} has a language", r.id);
        if tag.ends_with("-Latn") {
            transliterated += 1;
        }
        if tag.starts_with("mixed-") {
            mixed += 1;
            assert!(tag.split('-').count() == 3, "{}: mixed-xx-yy", r.id);
        }
        languages.insert(base_language(tag).to_owned());
    }
    assert!(languages.len() >= 15, "{languages:?}");
    assert!(!languages.contains("en"), "{languages:?}");
    assert!(transliterated >= 20, "{transliterated} transliterated rows");
    assert!(mixed >= 20, "{mixed} code-switched rows");

    let texts = || d.records.iter().filter_map(|r| r.text.as_deref());
    assert!(
        texts().any(|t| t.chars().any(is_rtl)),
        "a right-to-left script"
    );
    assert!(texts().any(|t| t.chars().any(is_indic)), "an Indic script");
    // Transliterated rows really are in Latin script.
    for r in d
        .records
        .iter()
        .filter(|r| r.language.as_deref().is_some_and(|l| l.ends_with("-Latn")))
    {
        let t = r.text.as_deref().unwrap_or_default();
        assert!(
            !t.chars().any(|c| is_rtl(c) || is_indic(c)),
            "{} is tagged -Latn",
            r.id
        );
    }
}

#[test]
fn base_language_of_tags() {
    assert_eq!(base_language("hi"), "hi");
    assert_eq!(base_language("hi-Latn"), "hi");
    assert_eq!(base_language("mixed-hi-en"), "hi");
    assert_eq!(base_language("mixed-en-ar"), "ar");
}
