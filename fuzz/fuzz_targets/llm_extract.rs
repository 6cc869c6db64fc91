#![no_main]
//! Fuzz the LLM answer extractor: any model reply (fences, broken JSON, prose) never panics;
//! an object that comes back passes the schema it was checked against.
use libfuzzer_sys::fuzz_target;
use rampart_llm::extract::{extract_object, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let schema = serde_json::json!({
        "type": "object",
        "required": ["intent_label", "confidence"],
        "properties": {
            "intent_label": {"type": "string", "enum": ["benign", "suspicious", "malicious"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1}
        }
    });
    let _ = extract_object(text, None);
    if let Ok(found) = extract_object(text, Some(&schema)) {
        assert!(validate(&found.value, &schema, "$").is_ok());
    }
});
