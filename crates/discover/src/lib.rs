//! Rampart pattern discovery (work in progress).
#![deny(missing_docs)]
