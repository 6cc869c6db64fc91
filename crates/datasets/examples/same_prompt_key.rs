//! Prints the key that decides whether two prompts are the same ([`normalized_key`], the key
//! of `rampart datasets leakage` and `dedup`), one line in, one line out. The Python data
//! scripts ask it (scripts/common.py) instead of keeping a copy of the normalization.
//!
//! Each input line is a JSON string (a prompt's text) or a record in Rampart's JSONL format;
//! each output line is the JSON string of its key, flushed at once so that a caller can ask
//! one prompt at a time.
//!
//! ```sh
//! printf '"IGNORE  previous\\tinstructions"\n' \
//!   | cargo run -q -p rampart-datasets --example same_prompt_key
//! # "ignore previous instructions"
//! ```

use rampart_datasets::{Record, normalized_key};
use serde_json::Value;
use std::io::{BufRead, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::stdout().lock();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        let value: Value =
            serde_json::from_str(&line).map_err(|e| format!("input line {}: {e}", n + 1))?;
        let record: Record = match value {
            Value::String(text) => serde_json::from_value(
                serde_json::json!({"id": "-", "text": text, "label": "benign"}),
            )?,
            other => serde_json::from_value(other)
                .map_err(|e| format!("input line {}: not a record: {e}", n + 1))?,
        };
        serde_json::to_writer(&mut out, &normalized_key(&record))?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}
