#![no_main]
//! Fuzz the NATO-alphabet decoder: never panics; never longer than its input; every output
//! byte maps inside the input.
use libfuzzer_sys::fuzz_target;
use rampart_normalize::decode;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else { return };
    if let Some(d) = decode::nato(input) {
        assert!(d.text.len() <= input.len());
        for end in [0, d.text.len() / 2, d.text.len()] {
            let r = d.map.to_original(0..end);
            assert!(r.start <= r.end && r.end <= input.len());
            assert!(input.is_char_boundary(r.start) && input.is_char_boundary(r.end));
        }
    }
});
