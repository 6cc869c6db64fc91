//! The library's error type.

use std::path::PathBuf;

/// Why a catalog, fetch, import or write operation failed. Problems with single rows are not
/// errors of this kind: they are reported as [`crate::RowError`]s and the rest is read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
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
    /// A downloaded or local file does not have the pinned SHA-256.
    #[error(
        "checksum mismatch for {what}: the catalog pins sha256 {expected}, the file has {actual}; \
         nothing was written (a changed upstream file or a corrupt download: delete the cached \
         copy and fetch again, or review the catalog entry)"
    )]
    Checksum {
        /// The file.
        what: String,
        /// The pinned checksum.
        expected: String,
        /// The computed checksum.
        actual: String,
    },
    /// The catalog is malformed or inconsistent.
    #[error("catalog: {0}")]
    Catalog(String),
    /// A name that is not in the catalog.
    #[error("unknown dataset `{name}` (known: {known})")]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The catalog's names, comma-separated.
        known: String,
    },
    /// A wheel or zip archive could not be read.
    #[error("archive {archive}: {message}")]
    Archive {
        /// The archive.
        archive: String,
        /// What is wrong.
        message: String,
    },
    /// A member the catalog names is not in the archive or directory.
    #[error("{container} has no file matching `{pattern}`")]
    MissingMember {
        /// The archive or directory.
        container: String,
        /// The path or glob from the catalog.
        pattern: String,
    },
    /// The whole input could not be parsed (bad header, not a parquet file, truncated
    /// beyond recovery …). Malformed single rows are [`crate::RowError`]s instead.
    #[error("{what}: {message}")]
    Format {
        /// The input.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// A download (pip or HTTP) failed.
    #[error("could not download {what}: {message}")]
    Download {
        /// The package or URL.
        what: String,
        /// What went wrong, with a hint.
        message: String,
    },
    /// Bad import options (no text column, a malformed label map …).
    #[error("invalid options: {0}")]
    Options(String),
}

impl DatasetError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DatasetError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn format(what: impl Into<String>, message: impl std::fmt::Display) -> Self {
        DatasetError::Format {
            what: what.into(),
            message: message.to_string(),
        }
    }
}
