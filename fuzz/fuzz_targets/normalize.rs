#![no_main]
//! Fuzz the whole normalizer: bounded output, every view maps inside the input.
use libfuzzer_sys::fuzz_target;
use rampart_normalize::Normalizer;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else { return };
    let n = Normalizer::default();
    let out = n.normalize(input);
    let total: usize = out.views.iter().map(|v| v.text.len()).sum();
    let cfg = n.config();
    let bound = (cfg.max_expansion_ratio * input.len() as f64) as usize + cfg.expansion_floor;
    assert!(total <= bound + input.len() * 2, "views exceed the expansion bound");
    for v in &out.views {
        let r = v.to_original(0..v.text.len());
        assert!(r.start <= r.end && r.end <= input.len());
        assert!(input.is_char_boundary(r.start) && input.is_char_boundary(r.end));
    }
});
