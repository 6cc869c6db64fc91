#![no_main]
//! Fuzz the HTML comment and quoted-pieces decoders: never panic; never longer than their
//! input; every output byte maps inside the input, on character boundaries.
use libfuzzer_sys::fuzz_target;
use rampart_normalize::decode;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else { return };
    for d in [decode::html_comments(input), decode::quoted_fragments(input)]
        .into_iter()
        .flatten()
    {
        assert!(d.text.len() <= input.len());
        for end in [0, d.text.len() / 2, d.text.len()] {
            let r = d.map.to_original(0..end);
            assert!(r.start <= r.end && r.end <= input.len());
            assert!(input.is_char_boundary(r.start) && input.is_char_boundary(r.end));
        }
    }
});
