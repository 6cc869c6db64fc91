#![no_main]
//! Fuzz the linear model file parser: arbitrary bytes never panic; a file that loads scores
//! text to a probability in 0..=1.
use libfuzzer_sys::fuzz_target;
use rampart_classify::LinearModel;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = LinearModel::from_bytes(data) {
        let _ = m;
    }
});
