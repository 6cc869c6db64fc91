//! Rampart as a service (being written).
#![deny(missing_docs)]
