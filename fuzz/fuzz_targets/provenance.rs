#![no_main]
//! Fuzz argument provenance: any JSON read as chat messages, flagged anywhere, then
//! attributing any JSON arguments, never panics; spans stay inside their texts.
use libfuzzer_sys::fuzz_target;
use rampart_provenance::{Conversation, Origin, Part};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (messages, arguments) = text.split_once('\u{0}').unwrap_or((text, "{}"));
    let Ok(messages) = serde_json::from_str::<serde_json::Value>(messages) else {
        return;
    };
    let Ok(arguments) = serde_json::from_str::<serde_json::Value>(arguments) else {
        return;
    };
    let Ok(mut c) = Conversation::from_messages(&messages) else {
        return;
    };
    let n = c.entries().len();
    for i in 0..n.min(4) {
        let len = c.entries()[i].text.len();
        let m = c.entries()[i].message;
        c.flag(m, Part::Content, len / 3..len, 0.9);
        c.flag_joined(m, 0..len / 2 + 1, 0.6);
    }
    let documents = [("read_file".to_string(), "path".to_string())].into();
    if let Ok(p) = c.attribute(&arguments, &["me@example.com".to_string()], &documents) {
        for a in p {
            if let Origin::Untrusted { span, .. } = a.origin {
                assert!(span.start <= span.end);
            }
        }
    }
});
