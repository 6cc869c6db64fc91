#![no_main]
//! Fuzz folding: never panics, idempotent, spans inside the input.
use libfuzzer_sys::fuzz_target;
use rampart_normalize::fold::fold;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else { return };
    let f = fold(input);
    assert_eq!(fold(&f.text).text, f.text, "fold is idempotent");
    let r = f.map.to_original(0..f.text.len());
    assert!(r.end <= input.len());
});
