//! Kinds, canonical forms, and the values a message's text holds. Written here rather than
//! with regexes: each kind is a small scan whose canonical form must equal the one computed
//! for an argument value, and the scans run once per message per request.

use crate::Kind;
use std::ops::Range;
use unicode_normalization::UnicodeNormalization;

/// Consecutive words a free-text value must share with a message to come from it.
pub const MIN_TEXT_WORDS: usize = 6;

/// The kind of an argument value (how it is matched).
pub fn classify(value: &str) -> Kind {
    let v = value.trim();
    if v.len() < 4 {
        return Kind::Short;
    }
    let lower = v.to_ascii_lowercase();
    if (lower.starts_with("http://") || lower.starts_with("https://"))
        && !v.contains(char::is_whitespace)
    {
        return Kind::Url;
    }
    if plain_email(v).is_some() {
        return Kind::Email;
    }
    if iban(v).is_some() {
        return Kind::Iban;
    }
    if phone(v).is_some() {
        return Kind::Phone;
    }
    if (v.starts_with('/') || v.starts_with("~/")) && !v.contains(char::is_whitespace) {
        return Kind::Path;
    }
    if host(v).is_some() {
        return Kind::Host;
    }
    if words(v).len() >= MIN_TEXT_WORDS {
        return Kind::Text;
    }
    if v.chars().any(char::is_alphabetic) {
        return Kind::Token;
    }
    Kind::Short
}

/// The canonical form of a value of `kind` (`None` when it is not one).
pub fn canonical(kind: Kind, value: &str) -> Option<String> {
    let v = value.trim();
    match kind {
        Kind::Email => plain_email(v),
        Kind::Url => url_canonical(v),
        Kind::Host => host(v),
        Kind::Iban => iban(v),
        Kind::Phone => phone(v),
        Kind::Path => Some(v.trim_end_matches(['.', ',', ';', ':']).to_string()),
        Kind::Text => Some(
            words(v)
                .into_iter()
                .map(|(w, _)| w)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Kind::Token | Kind::Short => Some(v.to_string()),
    }
}

fn plain_email(v: &str) -> Option<String> {
    let (local, domain) = v.split_once('@')?;
    let local_ok = !local.is_empty()
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._%+-".contains(&b));
    let domain = host(domain)?;
    local_ok.then(|| format!("{}@{domain}", local.to_ascii_lowercase()))
}

fn host(v: &str) -> Option<String> {
    let h = v.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = h.split('.').collect();
    let tld = labels.last()?;
    let ok = labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        && tld.len() >= 2
        && tld.bytes().all(|b| b.is_ascii_alphabetic());
    ok.then_some(h)
}

fn url_canonical(v: &str) -> Option<String> {
    let u = url::Url::parse(v).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    let host = u.host_str()?.trim_end_matches('.');
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let path = u.path().trim_end_matches('/');
    let query = u.query().map(|q| format!("?{q}")).unwrap_or_default();
    Some(format!("{}://{host}{port}{path}{query}", u.scheme()))
}

/// IBAN lengths by country (ISO 13616 registry); a country not listed may have any length
/// from 15 to 34.
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VG", 24),
    ("XK", 20),
];

/// An IBAN without spaces, upper-cased, when its length fits its country and its check
/// digits are valid (ISO 13616 mod-97).
fn iban(v: &str) -> Option<String> {
    let compact: String = v
        .chars()
        .filter(|c| *c != ' ')
        .collect::<String>()
        .to_ascii_uppercase();
    let b = compact.as_bytes();
    let country_len = IBAN_LENGTHS
        .iter()
        .find(|(c, _)| compact.starts_with(c))
        .map(|(_, n)| *n);
    if country_len.is_some_and(|n| n != b.len()) {
        return None;
    }
    let shape = (15..=34).contains(&b.len())
        && b[..2].iter().all(u8::is_ascii_uppercase)
        && b[2..4].iter().all(u8::is_ascii_digit)
        && b.iter().all(u8::is_ascii_alphanumeric);
    if !shape {
        return None;
    }
    let mut rem: u32 = 0;
    for &c in b[4..].iter().chain(&b[..4]) {
        let d = if c.is_ascii_digit() {
            u32::from(c - b'0')
        } else {
            u32::from(c - b'A') + 10
        };
        rem = if d >= 10 {
            (rem * 100 + d) % 97
        } else {
            (rem * 10 + d) % 97
        };
    }
    (rem == 1).then_some(compact)
}

/// A phone number's digits (with its leading `+`): 7 to 15 digits written with a `+` or
/// with separators (space, `-`, `.`, parentheses), not a date.
fn phone(v: &str) -> Option<String> {
    if !v
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b' ' | b'+' | b'-' | b'.' | b'(' | b')'))
    {
        return None;
    }
    let digits: String = v.chars().filter(char::is_ascii_digit).collect();
    let plus = v.starts_with('+');
    let separated = v.contains([' ', '-', '(', ')']);
    let date =
        v.len() == 10 && v.as_bytes().get(4) == Some(&b'-') && v.as_bytes().get(7) == Some(&b'-');
    ((7..=15).contains(&digits.len())
        && (plus || separated)
        && !date
        && v.matches('+').count() <= 1)
        .then(|| if plus { format!("+{digits}") } else { digits })
}

/// The words of a text (NFKC, lower-cased, alphanumeric runs) with their byte spans in it.
fn words(text: &str) -> Vec<(String, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((text[s..i].nfkc().collect::<String>().to_lowercase(), s..i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((
            text[s..].nfkc().collect::<String>().to_lowercase(),
            s..text.len(),
        ));
    }
    out
}

/// Every run of [`MIN_TEXT_WORDS`] consecutive words, hashed, with its span. Each word is
/// hashed once (ASCII lower-cased in place, NFKC only for words that need it); a run's hash
/// combines its words' hashes in order.
pub(crate) fn shingles(text: &str) -> Vec<(u64, Range<usize>)> {
    let hashes = word_hashes(text);
    hashes
        .windows(MIN_TEXT_WORDS)
        .map(|run| {
            let h = run.iter().fold(0xcbf2_9ce4_8422_2325_u64, |acc, (w, _)| {
                (acc ^ w)
                    .wrapping_mul(0x0000_0100_0000_01b3)
                    .rotate_left(29)
            });
            (h, run[0].1.start..run[MIN_TEXT_WORDS - 1].1.end)
        })
        .collect()
}

/// FNV-1a: a word's hash needs no key (the index lives for one request and holds no text)
/// and no allocation.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Each word's hash (of its NFKC, lower-cased form) and span.
fn word_hashes(text: &str) -> Vec<(u64, Range<usize>)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut push = |s: usize, e: usize, out: &mut Vec<(u64, Range<usize>)>| {
        let w = &text[s..e];
        buf.clear();
        if w.is_ascii() {
            buf.extend(w.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            buf.extend(w.nfkc().flat_map(char::to_lowercase));
        }
        out.push((fnv1a(buf.as_bytes()), s..e));
    };
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                push(s, i, &mut out);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        push(s, text.len(), &mut out);
    }
    out
}

/// A token ends at white space or a delimiter no value of these kinds holds.
fn token_end(text: &str, from: usize) -> usize {
    text[from..]
        .find(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '<' | '>'
                        | '"'
                        | '\''
                        | '`'
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '|'
                        | '\\'
                        | '^'
                )
        })
        .map_or(text.len(), |e| from + e)
}

fn trim_punct(text: &str, span: Range<usize>) -> Range<usize> {
    let t = text[span.clone()].trim_end_matches(['.', ',', ';', ':', '!', '?']);
    span.start..span.start + t.len()
}

/// The values a text holds: `(kind, canonical form, byte span)`.
pub(crate) fn values(text: &str, wanted: &[Kind]) -> Vec<(Kind, String, Range<usize>)> {
    let want = |k: Kind| wanted.contains(&k);
    let mut out = Vec::new();
    if want(Kind::Url) || want(Kind::Host) {
        urls(text, &mut out);
    }
    if want(Kind::Email) || want(Kind::Host) {
        emails(text, &mut out);
    }
    // IBANs are always looked for: their digit groups must not read as phone numbers.
    if want(Kind::Iban) || want(Kind::Phone) {
        ibans(text, &mut out);
    }
    if !want(Kind::Phone) {
        if want(Kind::Path) || want(Kind::Host) {
            paths_and_hosts(text, &mut out);
        }
        return out;
    }
    // The digit groups of an IBAN are not a phone number.
    let taken: Vec<Range<usize>> = out
        .iter()
        .filter(|(k, _, _)| *k == Kind::Iban)
        .map(|(_, _, r)| r.clone())
        .collect();
    let mut found = Vec::new();
    phones(text, &mut found);
    out.extend(
        found
            .into_iter()
            .filter(|(_, _, r)| !taken.iter().any(|t| t.start < r.end && r.start < t.end)),
    );
    if want(Kind::Path) || want(Kind::Host) {
        paths_and_hosts(text, &mut out);
    }
    out
}

fn urls(text: &str, out: &mut Vec<(Kind, String, Range<usize>)>) {
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(p) = lower[at..].find("http").map(|p| p + at) {
        at = p + 4;
        if !(lower[p..].starts_with("http://") || lower[p..].starts_with("https://")) {
            continue;
        }
        let span = trim_punct(text, p..token_end(text, p));
        if let Some(c) = url_canonical(&text[span.clone()]) {
            if let Ok(u) = url::Url::parse(&text[span.clone()])
                && let Some(h) = u.host_str().and_then(host)
            {
                out.push((Kind::Host, h, span.clone()));
            }
            out.push((Kind::Url, c, span.clone()));
        }
        at = span.end.max(at);
    }
}

fn emails(text: &str, out: &mut Vec<(Kind, String, Range<usize>)>) {
    let b = text.as_bytes();
    for (i, _) in text.match_indices('@') {
        let mut s = i;
        while s > 0 && (b[s - 1].is_ascii_alphanumeric() || b"._%+-".contains(&b[s - 1])) {
            s -= 1;
        }
        let mut e = i + 1;
        while e < b.len() && (b[e].is_ascii_alphanumeric() || b".-".contains(&b[e])) {
            e += 1;
        }
        let span = trim_punct(text, s..e);
        if let Some(c) = plain_email(&text[span.clone()]) {
            if let Some((_, d)) = c.split_once('@') {
                out.push((Kind::Host, d.to_string(), span.clone()));
            }
            out.push((Kind::Email, c, span));
        }
    }
}

fn ibans(text: &str, out: &mut Vec<(Kind, String, Range<usize>)>) {
    let b = text.as_bytes();
    let mut i = 0;
    while i + 4 <= b.len() {
        let starts = (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && b[i].is_ascii_alphabetic()
            && b[i + 1].is_ascii_alphabetic()
            && b[i + 2].is_ascii_digit()
            && b[i + 3].is_ascii_digit();
        if !starts {
            i += 1;
            continue;
        }
        // Alphanumerics with single spaces between groups, up to 34 of them; the longest
        // prefix with valid check digits is the IBAN.
        let mut ends = Vec::new();
        let (mut j, mut n) = (i, 0);
        while j < b.len() && n < 34 {
            if b[j].is_ascii_alphanumeric() {
                n += 1;
                j += 1;
                ends.push(j);
            } else if b[j] == b' ' && j + 1 < b.len() && b[j + 1].is_ascii_alphanumeric() {
                j += 1;
            } else {
                break;
            }
        }
        // A listed country has one length: only that prefix can be its IBAN.
        let country = text[i..i + 2].to_ascii_uppercase();
        let known = IBAN_LENGTHS
            .iter()
            .find(|(c, _)| *c == country)
            .map(|(_, n)| *n);
        let found = match known {
            Some(n) => ends
                .get(n.wrapping_sub(1))
                .and_then(|&e| iban(&text[i..e]).map(|c| (c, i..e))),
            None => ends
                .iter()
                .rev()
                .find_map(|&e| iban(&text[i..e]).map(|c| (c, i..e))),
        };
        match found {
            Some((c, span)) => {
                i = span.end;
                out.push((Kind::Iban, c, span));
            }
            None => i += 1,
        }
    }
}

fn phones(text: &str, out: &mut Vec<(Kind, String, Range<usize>)>) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i] == b'+' || b[i] == b'(' || b[i].is_ascii_digit())
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut e = i;
        while e < b.len()
            && (b[e].is_ascii_digit() || matches!(b[e], b' ' | b'+' | b'-' | b'.' | b'(' | b')'))
        {
            e += 1;
        }
        let span = trim_punct(text, i..e);
        let s = text[span.clone()].trim_end();
        let span = span.start..span.start + s.len();
        // Most digit runs are amounts and dates: too few digits to be a phone number.
        if s.bytes().filter(u8::is_ascii_digit).count() < 7 {
            i = e.max(i + 1);
            continue;
        }
        match phone(s) {
            Some(c) => {
                out.push((Kind::Phone, c, span.clone()));
                i = span.end.max(i + 1);
            }
            None => i = e.max(i + 1),
        }
    }
}

fn paths_and_hosts(text: &str, out: &mut Vec<(Kind, String, Range<usize>)>) {
    let mut at = 0;
    for tok in text.split(|c: char| c.is_whitespace()) {
        let start = at;
        at += tok.len()
            + text[at + tok.len()..]
                .chars()
                .next()
                .map_or(0, char::len_utf8);
        let lead = tok.len()
            - tok
                .trim_start_matches(['"', '\'', '`', '(', '[', '<'])
                .len();
        let s = start + lead;
        let e = token_end(text, s).min(start + tok.len());
        let span = trim_punct(text, s..e);
        let t = &text[span.clone()];
        if t.len() >= 3 && (t.starts_with('/') || t.starts_with("~/")) {
            out.push((Kind::Path, t.to_string(), span));
        } else if t.contains('.')
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            && let Some(h) = host(t)
        {
            out.push((Kind::Host, h, span));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_KINDS: [Kind; 6] = [
        Kind::Email,
        Kind::Url,
        Kind::Host,
        Kind::Iban,
        Kind::Phone,
        Kind::Path,
    ];

    #[test]
    fn kinds_and_canonical_forms() {
        assert_eq!(classify("Boss@Example.COM"), Kind::Email);
        assert_eq!(
            canonical(Kind::Email, "Boss@Example.COM").as_deref(),
            Some("boss@example.com")
        );
        assert_eq!(classify("https://Evil.example:8443/a/?x=1#f"), Kind::Url);
        assert_eq!(
            canonical(Kind::Url, "https://Evil.example:8443/a/?x=1#f").as_deref(),
            Some("https://evil.example:8443/a?x=1")
        );
        assert_eq!(classify("DE89 3704 0044 0532 0130 00"), Kind::Iban);
        assert_ne!(
            classify("DE89 3704 0044 0532 0130 01"),
            Kind::Iban,
            "bad check digits"
        );
        assert_eq!(classify("+44 20 7946 0958"), Kind::Phone);
        assert_eq!(
            canonical(Kind::Phone, "+44 (20) 7946-0958").as_deref(),
            Some("+442079460958")
        );
        assert_eq!(classify("2026-12-02"), Kind::Short);
        assert_eq!(classify("1234567"), Kind::Short);
        assert_eq!(classify("/srv/app/a.txt"), Kind::Path);
        assert_eq!(classify("files.example.org"), Kind::Host);
        assert_eq!(
            classify("please send the quarterly report to finance today"),
            Kind::Text
        );
        assert_eq!(classify("84.20"), Kind::Short);
        assert_eq!(classify("abc"), Kind::Short);
        assert_eq!(classify("Tr0ub4dor&3"), Kind::Token);
        assert_eq!(classify("hunter2-attacker"), Kind::Token);
    }

    #[test]
    fn values_are_found_in_text_with_their_spans() {
        let text = "Wire to GB82 WEST 1234 5698 7654 32, mail x@Evil.example, see https://evil.example/p. Call +1 (555) 010-9999 or open /tmp/a.txt on files.example.org.";
        let vals = values(text, &ALL_KINDS);
        let has = |k: Kind, c: &str| vals.iter().any(|(kk, cc, _)| *kk == k && cc == c);
        assert!(has(Kind::Iban, "GB82WEST12345698765432"), "{vals:?}");
        assert!(has(Kind::Email, "x@evil.example"));
        assert!(has(Kind::Host, "evil.example"));
        assert!(has(Kind::Url, "https://evil.example/p"));
        assert!(has(Kind::Phone, "+15550109999"), "{vals:?}");
        assert!(has(Kind::Path, "/tmp/a.txt"));
        assert!(has(Kind::Host, "files.example.org"));
        for (_, _, span) in &vals {
            assert!(text.is_char_boundary(span.start) && text.is_char_boundary(span.end));
        }
        let (_, _, span) = vals
            .iter()
            .find(|(k, _, _)| *k == Kind::Iban)
            .unwrap_or_else(|| panic!("iban"));
        assert_eq!(&text[span.clone()], "GB82 WEST 1234 5698 7654 32");
    }
}
