//! The crate's error type.

use std::path::PathBuf;

/// Why a download, an extraction, a hash or a write failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An input is larger than the limit for its kind.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A wheel or zip archive could not be read.
    #[error("archive {archive}: {message}")]
    Archive {
        /// The archive.
        archive: String,
        /// What is wrong.
        message: String,
    },
    /// No member of the archive matches a requested path or glob.
    #[error("{container} has no file matching `{pattern}`")]
    MissingMember {
        /// The archive or directory.
        container: String,
        /// The path or glob asked for.
        pattern: String,
    },
    /// A download (pip or HTTP) failed.
    #[error("could not download {what}: {message}")]
    Download {
        /// The package or URL.
        what: String,
        /// What went wrong, with a hint.
        message: String,
    },
}

impl FetchError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FetchError::Io {
            path: path.into(),
            source,
        }
    }
}
