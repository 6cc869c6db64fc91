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
    /// A catalog entry contradicts itself.
    #[error("catalog: `{name}`: {error}")]
    Entry {
        /// The entry's name.
        name: String,
        /// What is wrong.
        error: crate::catalog::EntryError,
    },
    /// A name that is not in the catalog.
    #[error("unknown dataset `{name}` (known: {known})")]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The catalog's names, comma-separated.
        known: String,
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
    /// Bad import options (no text column, a malformed label map …).
    #[error("invalid options: {0}")]
    Options(String),
    /// A download, an archive, a size limit or a file operation of `rampart-fetch` failed.
    #[error(transparent)]
    Fetch(#[from] rampart_fetch::FetchError),
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
