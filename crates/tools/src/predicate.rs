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
    /// A `path_under` root that is not an absolute, normalized path.
    #[error("path_under root `{0}` must be absolute and normalized (no `..`)")]
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
                    .map(|r| match normalize_path(r) {
                        Some(c) if r.starts_with('/') && !r.contains("..") => Ok(c),
                        _ => Err(PredicateError::Root(r.clone())),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let lower = |v: &Option<Vec<String>>| {
            v.as_ref()
                .map(|l| l.iter().map(|s| nfkc(s).to_lowercase()).collect::<Vec<_>>())
        };
        let p = Self {
            one_of: spec
                .one_of
                .as_ref()
                .map(|l| l.iter().map(|s| nfkc(s).into_owned()).collect()),
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

    /// Checks a value (`None`: the argument is absent).
    pub fn check(&self, value: Option<&serde_json::Value>) -> Result<(), Failure> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return if self.optional {
                Ok(())
            } else {
                Err(Failure::Missing)
            };
        };
        if let Some([lo, hi]) = self.range {
            let n = match value {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => nfkc(s).trim().parse::<f64>().ok(),
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
            serde_json::Value::String(s) => nfkc(s),
            serde_json::Value::Number(n) => Cow::Owned(n.to_string()),
            serde_json::Value::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
            // Structured values are checked as their JSON text (a nested attack is text too).
            other => Cow::Owned(nfkc(&other.to_string()).into_owned()),
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
        if let Some(l) = &self.not_contains {
            let low = text.to_lowercase();
            if l.iter().any(|x| low.contains(x.as_str())) {
                return Err(Failure::NotContains);
            }
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

fn url_host_ok(text: &str, hosts: &[String]) -> bool {
    let Ok(u) = url::Url::parse(text.trim()) else {
        return false;
    };
    if !matches!(u.scheme(), "http" | "https") {
        return false;
    }
    // The url crate lower-cases and IDNA-maps the host, and takes `user@` off it, so
    // `https://api.example.com@evil.example/` has host `evil.example`.
    u.host_str()
        .map(|h| h.trim_end_matches('.'))
        .is_some_and(|h| hosts.iter().any(|x| x.trim_end_matches('.') == h))
}

fn emails_ok(text: &str, domains: &[String]) -> bool {
    let mut any = false;
    for part in text.split([',', ';']) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        // "Name <a@b>" → a@b.
        let addr = match (part.rfind('<'), part.rfind('>')) {
            (Some(a), Some(b)) if a < b => &part[a + 1..b],
            _ => part,
        };
        let Some((local, domain)) = addr.trim().rsplit_once('@') else {
            return false;
        };
        let domain = domain.trim().trim_end_matches('.').to_lowercase();
        if local.is_empty() || domain.is_empty() || !domains.contains(&domain) {
            return false;
        }
        any = true;
    }
    any
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

/// A path's components after percent-decoding (bounded rounds), NFKC, look-alike folding
/// and lexical resolution of `.` and `..`. `None` when the path escapes its root, holds a
/// NUL, or is not absolute.
pub fn normalize_path(raw: &str) -> Option<Vec<String>> {
    let folded = fold_path(raw)?;
    resolve_path(&folded).map(|parts| parts.into_iter().map(str::to_string).collect())
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

/// The components of a folded path, `.` and `..` resolved (borrowed from it).
fn resolve_path(s: &str) -> Option<Vec<&str>> {
    if s.contains('\0') || !s.starts_with('/') {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    for c in s.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            other => out.push(other),
        }
    }
    Some(out)
}

fn path_under_ok(text: &str, roots: &[Vec<String>]) -> bool {
    let Some(folded) = fold_path(text.trim()) else {
        return false;
    };
    resolve_path(&folded).is_some_and(|p| {
        roots
            .iter()
            .any(|r| r.len() <= p.len() && r.iter().zip(&p).all(|(a, b)| a == b))
    })
}
