//! Single-thread throughput of `Normalizer::default().normalize` on a JSONL corpus (one
//! `{"id": …, "text": …}` object per line):
//! `cargo run --release -p rampart-normalize --example throughput -- corpus.jsonl`.
//! Prints MB/s (best of 3 runs), the number of views and the total bytes of all views.

use std::time::Instant;

/// Decodes the JSON string starting just after its opening quote; returns it and the rest.
fn json_string(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    let mut pending_hi: Option<u32> = None;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, s.get(i + 1..)?)),
            '\\' => {
                let (_, e) = chars.next()?;
                let simple = match e {
                    '"' => Some('"'),
                    '\\' => Some('\\'),
                    '/' => Some('/'),
                    'b' => Some('\u{8}'),
                    'f' => Some('\u{c}'),
                    'n' => Some('\n'),
                    'r' => Some('\r'),
                    't' => Some('\t'),
                    'u' => None,
                    _ => return None,
                };
                if let Some(c) = simple {
                    if pending_hi.take().is_some() {
                        out.push('\u{fffd}');
                    }
                    out.push(c);
                    continue;
                }
                let mut v = 0u32;
                for _ in 0..4 {
                    v = v * 16 + chars.next()?.1.to_digit(16)?;
                }
                match (pending_hi.take(), v) {
                    (Some(hi), 0xDC00..=0xDFFF) => {
                        let c = 0x10000 + ((hi - 0xD800) << 10) + (v - 0xDC00);
                        out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    }
                    (prev, 0xD800..=0xDBFF) => {
                        if prev.is_some() {
                            out.push('\u{fffd}');
                        }
                        pending_hi = Some(v);
                    }
                    (prev, _) => {
                        if prev.is_some() {
                            out.push('\u{fffd}');
                        }
                        out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    }
                }
            }
            _ => {
                if pending_hi.take().is_some() {
                    out.push('\u{fffd}');
                }
                out.push(c);
            }
        }
    }
    None
}

/// The value of the `"text"` field of one JSONL line.
fn text_field(line: &str) -> Option<String> {
    let mut rest = line;
    loop {
        let k = rest.find('"')?;
        let (key, after) = json_string(rest.get(k + 1..)?)?;
        let after = after.trim_start().strip_prefix(':')?.trim_start();
        if key == "text" {
            return json_string(after.strip_prefix('"')?).map(|(v, _)| v);
        }
        // Skip the value: a string, or anything up to the next ','.
        rest = if let Some(v) = after.strip_prefix('"') {
            json_string(v)?.1
        } else {
            after.get(after.find(',')?..)?
        };
    }
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "bench-data/corpus.jsonl".into());
    let data = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let texts: Vec<String> = data.lines().filter_map(text_field).collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    println!("{} texts, {} bytes", texts.len(), bytes);
    let n = rampart_normalize::Normalizer::default();
    let mut best = f64::INFINITY;
    let (mut views, mut view_bytes, mut transforms) = (0usize, 0usize, 0usize);
    for _ in 0..3 {
        let (mut v, mut vb, mut tr) = (0usize, 0usize, 0usize);
        let t = Instant::now();
        for text in &texts {
            let out = n.normalize(text);
            v += out.views.len();
            vb += out.views.iter().map(|v| v.text.len()).sum::<usize>();
            tr += out.transforms.len();
        }
        best = best.min(t.elapsed().as_secs_f64());
        (views, view_bytes, transforms) = (v, vb, tr);
    }
    println!(
        "{:.1} MB/s (best of 3: {:.3} s); {views} views, {view_bytes} view bytes, {transforms} transforms",
        bytes as f64 / best / 1e6,
        best
    );
}
