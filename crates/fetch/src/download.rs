//! Downloads: pip wheels and HTTP files, behind [`Downloader`] so tests can use a fake.

use crate::error::FetchError;
use crate::hash::MAX_SOURCE_BYTES;
use std::path::Path;
use std::process::Command;

/// Gets files from the outside world. [`SystemDownloader`] runs pip and curl; tests use a
/// fake.
pub trait Downloader {
    /// Downloads the wheel of `package==version` into `dest_dir` (no dependencies).
    fn pip_download(&self, package: &str, version: &str, dest_dir: &Path)
    -> Result<(), FetchError>;
    /// Downloads `url` to the file `dest`.
    fn http_get(&self, url: &str, dest: &Path) -> Result<(), FetchError>;
}

/// Runs `PYTHON -m pip download --no-deps` (honouring pip's own configuration: index,
/// proxy, certificates) and `curl` for URLs.
#[derive(Debug, Clone)]
pub struct SystemDownloader {
    /// The Python interpreter (`$RAMPART_PYTHON`, else `python3`).
    pub python: String,
}

impl Default for SystemDownloader {
    fn default() -> Self {
        Self {
            python: std::env::var("RAMPART_PYTHON")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "python3".into()),
        }
    }
}

fn tail(bytes: &[u8], lines: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let v: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    v[v.len().saturating_sub(lines)..].join(" | ")
}

impl Downloader for SystemDownloader {
    fn pip_download(
        &self,
        package: &str,
        version: &str,
        dest_dir: &Path,
    ) -> Result<(), FetchError> {
        let spec = format!("{package}=={version}");
        let out = Command::new(&self.python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
            ])
            .arg(dest_dir)
            .arg(&spec)
            .output()
            .map_err(|e| FetchError::Download {
                what: spec.clone(),
                message: format!(
                    "could not run `{} -m pip`: {e} (set RAMPART_PYTHON to a Python with pip)",
                    self.python
                ),
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(FetchError::Download {
                what: spec,
                message: format!(
                    "pip download failed ({}): {} — is the package index reachable? pip uses its \
                     own configuration (pip config list)",
                    out.status,
                    tail(&out.stderr, 3)
                ),
            })
        }
    }

    fn http_get(&self, url: &str, dest: &Path) -> Result<(), FetchError> {
        let out = Command::new("curl")
            .args([
                "-fsSL",
                "--connect-timeout",
                "15",
                "--max-time",
                "900",
                "--max-filesize",
            ])
            .arg(MAX_SOURCE_BYTES.to_string())
            .arg("-o")
            .arg(dest)
            .arg(url)
            .output()
            .map_err(|e| FetchError::Download {
                what: url.to_owned(),
                message: format!("could not run curl: {e}"),
            })?;
        if out.status.success() {
            Ok(())
        } else {
            let _ = std::fs::remove_file(dest);
            Err(FetchError::Download {
                what: url.to_owned(),
                message: format!(
                    "curl failed ({}): {}. The network may be unavailable from this machine",
                    out.status,
                    tail(&out.stderr, 2),
                ),
            })
        }
    }
}
