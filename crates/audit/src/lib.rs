//! Rampart's audit log (being written).
#![deny(missing_docs)]
