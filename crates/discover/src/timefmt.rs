//! `rampart_core::timefmt`'s readers with their errors as text, for the record validator,
//! which collects every problem of a line as a message.

/// [`rampart_core::timefmt::run_id_timestamp`], its error as its message.
pub(crate) fn run_id_timestamp(run_id: &str) -> Result<String, String> {
    rampart_core::timefmt::run_id_timestamp(run_id).map_err(|e| e.to_string())
}

/// [`rampart_core::timefmt::check_iso_utc`], its error as its message.
pub(crate) fn check_iso_utc(s: &str) -> Result<(), String> {
    rampart_core::timefmt::check_iso_utc(s).map_err(|e| e.to_string())
}
