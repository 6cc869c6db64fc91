//! Typed argument predicates, compiled once.
//!
//! Path normalization is written here rather than taken from a crate: `std::path` does not
//! resolve `..` lexically without touching the file system, and the checks an attacker
//! aims at (percent-encoding, full-width and look-alike dots and slashes) are specific to
//! untrusted strings, not to file systems.

use crate::policy::PredicateSpec;
use regex::Regex;
use std::borrow::Cow;
use unicode_normalization::{IsNormalized, UnicodeNormalization};

/// Most rounds of percent-decoding applied to a path (`%252e` is decoded twice).
const MAX_DECODE_ROUNDS: usize = 3;

/// A compiled predicate.
#[derive(Debug, Clone)]
pub struct Predicate {
    one_of: Option<Vec<String>>,
    regex: Option<Regex>,
    max_length: Option<usize>,
    range: Option<[f64; 2]>,
    url_host_in: Option<Vec<String>>,
    path_under: Option<Vec<Vec<String>>>,
    email_domain_in: Option<Vec<String>>,
    not_contains: Option<Vec<String>>,
    optional: bool,
}

/// Why a predicate could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredicateError {
    /// Nothing to check.
    #[error("no constraint given")]
    Empty,
    /// A bad regular expression.
    #[error("regex: {0}")]
    Regex(String),
    /// `range` with min > max or a non-finite bound.
    #[error("range must be [min, max] with finite min <= max")]
    Range,
    /// A `path_under` root that is not an absolute path written plainly.
    #[error(
        "path_under root `{0}` must be absolute and plain (no `..`, `\\`, percent-escapes or look-alike separators)"
    )]
    Root(String),
    /// An empty list.
    #[error("`{0}` must not be empty")]
    EmptyList(&'static str),
}

/// Why a value failed a predicate (no value text: an argument may be secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The argument is absent.
    Missing,
    /// Wrong JSON type for the check.
    Type,
    /// Not one of the allowed values.
    OneOf,
    /// Does not match the regex.
    Regex,
    /// Too long.
    MaxLength,
    /// Out of range.
    Range,
    /// Not an http(s) URL of an allowed host.
    UrlHost,
    /// Not a path under an allowed root (or it escapes with `..`).
    PathUnder,
    /// An address outside the allowed domains (or not an address).
    EmailDomain,
    /// Contains a forbidden substring.
    NotContains,
}

impl Failure {
    /// The snake_case name of the check that failed.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Missing => "missing",
            Failure::Type => "type",
            Failure::OneOf => "one_of",
            Failure::Regex => "regex",
            Failure::MaxLength => "max_length",
            Failure::Range => "range",
            Failure::UrlHost => "url_host_in",
            Failure::PathUnder => "path_under",
            Failure::EmailDomain => "email_domain_in",
            Failure::NotContains => "not_contains",
        }
    }
}

/// NFKC, borrowing when the text is already normal (the common case: no allocation on the
/// hot path).
fn nfkc(s: &str) -> Cow<'_, str> {
    match unicode_normalization::is_nfkc_quick(s.chars()) {
        IsNormalized::Yes => Cow::Borrowed(s),
        _ => Cow::Owned(s.nfkc().collect()),
    }
}

impl Predicate {
    /// Compiles a predicate.
    pub fn compile(spec: &PredicateSpec) -> Result<Self, PredicateError> {
        let regex = spec
            .regex
            .as_deref()
            .map(|r| {
                Regex::new(&format!("^(?:{r})$")).map_err(|e| PredicateError::Regex(e.to_string()))
            })
            .transpose()?;
        if let Some([lo, hi]) = spec.range
            && !(lo.is_finite() && hi.is_finite() && lo <= hi)
        {
            return Err(PredicateError::Range);
        }
        let nonempty = |v: &Option<Vec<String>>, name: &'static str| match v {
            Some(l) if l.is_empty() => Err(PredicateError::EmptyList(name)),
            _ => Ok(()),
        };
        nonempty(&spec.one_of, "one_of")?;
        nonempty(&spec.url_host_in, "url_host_in")?;
        nonempty(&spec.path_under, "path_under")?;
        nonempty(&spec.email_domain_in, "email_domain_in")?;
        nonempty(&spec.not_contains, "not_contains")?;
        let path_under = spec
            .path_under
            .as_ref()
            .map(|roots| {
                roots
                    .iter()
                    .map(|r| match plain_path(r) {
                        Some(c) => Ok(c.into_iter().map(str::to_string).collect()),
                        None => Err(PredicateError::Root(r.clone())),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let lower = |v: &Option<Vec<String>>| {
            v.as_ref()
                .map(|l| l.iter().map(|s| nfkc(s).to_lowercase()).collect::<Vec<_>>())
        };
        let p = Self {
            one_of: spec.one_of.clone(),
            regex,
            max_length: spec.max_length,
            range: spec.range,
            url_host_in: lower(&spec.url_host_in),
            path_under,
            email_domain_in: lower(&spec.email_domain_in),
            not_contains: lower(&spec.not_contains),
            optional: spec.optional,
        };
        if p.one_of.is_none()
            && p.regex.is_none()
            && p.max_length.is_none()
            && p.range.is_none()
            && p.url_host_in.is_none()
            && p.path_under.is_none()
            && p.email_domain_in.is_none()
            && p.not_contains.is_none()
        {
            return Err(PredicateError::Empty);
        }
        Ok(p)
    }

    /// Checks a value (`None`: the argument is absent). An array is checked element by
    /// element (nested arrays too): every element must pass, and an empty array counts as
    /// absent. Objects are checked as their JSON text, which no path, URL or address
    /// predicate accepts.
    pub fn check(&self, value: Option<&serde_json::Value>) -> Result<(), Failure> {
        let absent = |v: &&serde_json::Value| match v {
            serde_json::Value::Null => true,
            serde_json::Value::Array(a) => a.is_empty(),
            _ => false,
        };
        let Some(value) = value.filter(|v| !absent(v)) else {
            return if self.optional {
                Ok(())
            } else {
                Err(Failure::Missing)
            };
        };
        self.check_value(value)
    }

    fn check_value(&self, value: &serde_json::Value) -> Result<(), Failure> {
        match value {
            serde_json::Value::Array(a) => a.iter().try_for_each(|x| self.check_value(x)),
            serde_json::Value::Null => Err(Failure::Type),
            one => self.check_one(one),
        }
    }

    /// Checks one value that is not an array. Every check reads the value as the tool
    /// will: the raw text, exactly (no NFKC, no decoding), except `not_contains`, a deny
    /// list, which refuses a forbidden substring in the raw text or in any decoded form of
    /// it (see [`folded_readings`]).
    fn check_one(&self, value: &serde_json::Value) -> Result<(), Failure> {
        if let Some([lo, hi]) = self.range {
            let n = match value {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            match n {
                Some(n) if n.is_finite() && (lo..=hi).contains(&n) => {}
                Some(_) => return Err(Failure::Range),
                None => return Err(Failure::Type),
            }
        }
        let needs_text = self.one_of.is_some()
            || self.regex.is_some()
            || self.max_length.is_some()
            || self.url_host_in.is_some()
            || self.path_under.is_some()
            || self.email_domain_in.is_some()
            || self.not_contains.is_some();
        if !needs_text {
            return Ok(());
        }
        let text = match value {
            serde_json::Value::String(s) => Cow::Borrowed(s.as_str()),
            serde_json::Value::Number(n) => Cow::Owned(n.to_string()),
            serde_json::Value::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
            // Structured values are checked as their JSON text (a nested attack is text too).
            other => Cow::Owned(other.to_string()),
        };
        if let Some(l) = &self.one_of
            && !l.iter().any(|x| *x == text)
        {
            return Err(Failure::OneOf);
        }
        if let Some(r) = &self.regex
            && !r.is_match(&text)
        {
            return Err(Failure::Regex);
        }
        if let Some(m) = self.max_length
            && text.chars().count() > m
        {
            return Err(Failure::MaxLength);
        }
        if let Some(l) = &self.not_contains
            && folded_readings(&text)
                .iter()
                .any(|r| l.iter().any(|x| r.contains(x.as_str())))
        {
            return Err(Failure::NotContains);
        }
        if let Some(hosts) = &self.url_host_in
            && !url_host_ok(&text, hosts)
        {
            return Err(Failure::UrlHost);
        }
        if let Some(roots) = &self.path_under
            && !path_under_ok(&text, roots)
        {
            return Err(Failure::PathUnder);
        }
        if let Some(domains) = &self.email_domain_in
            && !emails_ok(&text, domains)
        {
            return Err(Failure::EmailDomain);
        }
        Ok(())
    }
}

/// The readings a deny list must not match: the raw text and its decoded form
/// (percent-decoded, NFKC, look-alike and back slashes folded to `/`), both lower-cased,
/// so `/workspace/%2egit/` and `/workspace/.git\\hooks` contain `/.git/` as `path_under`
/// reads them.
fn folded_readings(text: &str) -> Vec<String> {
    // Plain ASCII with nothing to decode reads one way only.
    if text.is_ascii() && !text.contains(['%', '\\']) {
        return vec![text.to_ascii_lowercase()];
    }
    let raw = text.to_lowercase();
    match fold_path(text) {
        Some(f) => {
            let f = f.to_lowercase();
            if f == raw { vec![raw] } else { vec![raw, f] }
        }
        // Not UTF-8 once decoded: the raw reading alone (a path predicate refuses it).
        None => vec![raw],
    }
}

/// An http(s) URL whose host every reader takes to be one of `hosts`.
///
/// URL parsers disagree on exactly the characters an attacker reaches for: the WHATWG
/// parser (the `url` crate, browsers, Node) reads `\` as `/`, curl and Python's `urllib`
/// read it as a name character, so `http://docs.rs\@127.0.0.1/` has host `docs.rs` for one
/// and `127.0.0.1` for the others. So the authority must be plain: ASCII letters, digits,
/// `-` and `.`, an optional `:port`, no user-info, no percent-escapes, no brackets; and the
/// whole URL holds no back slash, space or control character. The `url` crate must then
/// read the same host.
fn url_host_ok(text: &str, hosts: &[String]) -> bool {
    let Some(host) = plain_url_host(text) else {
        return false;
    };
    let Ok(u) = url::Url::parse(text) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    let host = host.strip_suffix('.').unwrap_or(&host);
    u.host_str().map(|h| h.strip_suffix('.').unwrap_or(h)) == Some(host)
        && hosts.iter().any(|x| x.trim_end_matches('.') == host)
}

/// The host of a URL written plainly (see [`url_host_ok`]), as written.
fn plain_url_host(text: &str) -> Option<&str> {
    if text
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return None;
    }
    let (scheme, rest) = text.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if port.is_some_and(|p| p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let labels = host.strip_suffix('.').unwrap_or(host);
    (!labels.is_empty() && labels.split('.').all(plain_label)).then_some(host)
}

/// Every address in the field is plain and in `domains`.
///
/// Address parsers disagree on comments, groups, quoted local parts, several angle
/// brackets and line breaks (`x@evil.com (n) <boss@example.com>` is `x@evil.com` to
/// Python's `email.utils`). So the field must be a comma-separated list of mailboxes
/// written plainly: `local@domain` or `Display Name <local@domain>`, where the local part
/// is a dot-atom, the domain ASCII letters, digits, `-` and `.`, and the display name
/// words of letters, digits and `.`, `'`, `-`, `_` separated by single spaces. Anything
/// else (quotes, parentheses, `;`, `:`, `\`, control characters, a second `<`) is refused.
fn emails_ok(text: &str, domains: &[String]) -> bool {
    plain_addresses(text).is_some_and(|addrs| {
        addrs.iter().all(|(_, domain)| {
            let d = domain.to_ascii_lowercase();
            domains.iter().any(|x| x.trim_end_matches('.') == d)
        })
    })
}

/// The (local part, domain) of each mailbox of a plainly written address list.
fn plain_addresses(text: &str) -> Option<Vec<(&str, &str)>> {
    let mut out = Vec::new();
    for mailbox in text.split(',') {
        let mailbox = mailbox.trim_matches(' ');
        let addr = match mailbox.split_once('<') {
            Some((name, rest)) => {
                let addr = rest.strip_suffix('>')?;
                if !plain_display_name(name.strip_suffix(' ').unwrap_or(name)) {
                    return None;
                }
                addr
            }
            None => mailbox,
        };
        out.push(plain_addr_spec(addr)?);
    }
    (!out.is_empty()).then_some(out)
}

fn plain_display_name(name: &str) -> bool {
    let word_char = |c: char| c.is_alphanumeric() || matches!(c, '.' | '\'' | '-' | '_');
    name.is_empty()
        || name
            .split(' ')
            .all(|w| !w.is_empty() && w.chars().all(word_char))
}

fn plain_addr_spec(addr: &str) -> Option<(&str, &str)> {
    let (local, domain) = addr.split_once('@')?;
    // RFC 5322 `atext`, without the characters some readers treat specially ('%', '!',
    // '`', '|' route or pipe in old mailers).
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"#$&'*+-/=?^_{}~".contains(&b);
    let dot_atom = local
        .split('.')
        .all(|p| !p.is_empty() && p.bytes().all(atext));
    (dot_atom && local.len() <= 64 && domain.split('.').all(plain_label)).then_some((local, domain))
}

/// A DNS label written plainly: 1-63 ASCII letters, digits and inner hyphens.
fn plain_label(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 63
        && !l.starts_with('-')
        && !l.ends_with('-')
        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Look-alikes of `/`, `\` and `.` that NFKC leaves alone.
fn fold_lookalikes(c: char) -> char {
    match c {
        '\u{2215}' | '\u{2044}' | '\u{29F8}' | '\u{FF0F}' | '\\' | '\u{FF3C}' | '\u{2216}'
        | '\u{29F9}' => '/',
        '\u{2024}' | '\u{FF0E}' | '\u{3002}' | '\u{FF61}' => '.',
        other => other,
    }
}

/// Percent-decoded (bounded rounds), NFKC, look-alikes folded.
fn fold_path(raw: &str) -> Option<String> {
    let mut s = Cow::Borrowed(raw);
    for _ in 0..MAX_DECODE_ROUNDS {
        // Borrowed: nothing was decoded, so another round would change nothing.
        let decoded = match percent_encoding::percent_decode_str(&s)
            .decode_utf8()
            .ok()?
        {
            Cow::Borrowed(_) => break,
            Cow::Owned(d) => d,
        };
        s = Cow::Owned(decoded);
    }
    Some(nfkc(&s).chars().map(fold_lookalikes).collect())
}

/// The components of a path every reader resolves alike, or `None`.
///
/// Readers disagree on a path's separators and escapes: Python's `os.path` and Node's
/// `path` split on `/` only, a web server or a Windows tool also on `\`, a tool that
/// percent-decodes or NFKC-normalizes its input sees `/` in `%2f` and `／`. And `..` after
/// a symbolic link leaves the link's target, not its parent, in `realpath`. So a checked
/// path is absolute, does not start with `//` (its meaning is implementation-defined in
/// POSIX), has no `..` component, no control character, no `\`, no `%` followed by two
/// hex digits, and no character that NFKC or a look-alike map turns into `/`, `\`, `.` or
/// `%`. Empty and `.` components are dropped: every reader drops them.
pub fn plain_path(raw: &str) -> Option<Vec<&str>> {
    if !raw.starts_with('/') || raw.starts_with("//") {
        return None;
    }
    let bytes = raw.as_bytes();
    let percent_escape = bytes
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
    if percent_escape || raw.chars().any(ambiguous_in_path) {
        return None;
    }
    let mut out = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            other => out.push(other),
        }
    }
    Some(out)
}

/// A character some reader of a path takes for something else (see [`plain_path`]).
fn ambiguous_in_path(c: char) -> bool {
    if c == '\\' || c.is_control() {
        return true;
    }
    if c.is_ascii() {
        return false;
    }
    fold_lookalikes(c) != c
        || std::iter::once(c)
            .nfkc()
            .any(|n| matches!(n, '/' | '\\' | '.' | '%') || n.is_control())
}

fn path_under_ok(text: &str, roots: &[Vec<String>]) -> bool {
    plain_path(text).is_some_and(|p| {
        roots
            .iter()
            .any(|r| r.len() <= p.len() && r.iter().zip(&p).all(|(a, b)| a == b))
    })
}
