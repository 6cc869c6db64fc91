#![no_main]
//! Fuzz the relational evaluator's reading of a model reply: any text never panics; a reply
//! read as a triple (strict or rescaled) is always a valid one: every component in [0, 1],
//! summing to 1.
use libfuzzer_sys::fuzz_target;
use rampart_llm::extract::extract_object;
use rampart_relational::prompt::{parse_triple, triple_schema};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let schema = triple_schema();
    let Ok(found) = extract_object(text, Some(&schema)) else { return };
    for rescale in [false, true] {
        if let Ok(a) = parse_triple(&found.value, rescale) {
            let v = a.value;
            for x in [v.truth, v.indeterminacy, v.falsehood] {
                assert!((0.0..=1.0).contains(&x), "{v:?}");
            }
            assert!((v.truth + v.indeterminacy + v.falsehood - 1.0).abs() < 1e-9, "{v:?}");
        }
    }
});
