//! Runs a pipeline with a relational layer over dataset JSONL files and prints one JSON line
//! per record: its id, file, true label and the relational report. Used to calibrate the
//! local backend on validation data (`DESIGN.md`, "Calibration").
//!
//! ```sh
//! cargo run --release -p rampart-relational --example relate_dump -- CONFIG FILE.jsonl...
//! ```

use rampart_core::{Pipeline, PipelineConfig};
use rampart_relational::RelationalFactory;
use std::io::Write;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let config_path = args
        .next()
        .ok_or("usage: relate_dump CONFIG FILE.jsonl...")?;
    let src = std::fs::read_to_string(&config_path)?;
    let mut registry = rampart_rules::registry();
    registry.register(Box::new(rampart_classify::LinearFactory));
    registry.register(Box::new(RelationalFactory));
    let pipeline =
        Pipeline::from_config_with(PipelineConfig::parse(&src, &config_path)?, &registry)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for file in args {
        let (records, errors) = rampart_datasets::read_jsonl(Path::new(&file))?;
        if !errors.is_empty() {
            eprintln!("{file}: {} rows could not be read", errors.len());
        }
        let name = Path::new(&file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_string();
        for r in &records {
            let line = match pipeline.scan(&r.to_request()) {
                Ok(o) => serde_json::json!({
                    "id": r.id, "file": name, "truth": r.label.name(),
                    "action": o.decision.action, "report": o.decision.reports.raw(rampart_relational::RELATIONAL_KIND),
                }),
                Err(e) => serde_json::json!({"id": r.id, "file": name, "error": e.to_string()}),
            };
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}
