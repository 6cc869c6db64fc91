//! The audit log types this crate uses (from `rampart-audit`).

pub(crate) use rampart_audit::{AuditConfig, AuditError, AuditLog, AuditRecord, AuditWriter};
