//! Files of a run, under `OUT_DIR/evals/`:
//!
//! - `eval_{ts}_{DATASET}.jsonl`: the per-prompt logs, every configuration in one file;
//! - `eval_{ts}_summary.json`: the [`Summary`](crate::report::Summary);
//! - `eval_{ts}_summary.md`: the Markdown report;
//! - `eval_{ts}_report.html`: the self-contained HTML report.
//!
//! `{ts}` is the UTC start time, `YYYYMMDD_HHMMSS`.

use crate::error::EvalError;
use crate::report::Summary;
use crate::runner::EvalRun;
use rampart_core::timefmt::{Precision, UtcTime};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A run's identity: `eval_{YYYYMMDD_HHMMSS}` and the ISO 8601 time it was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunStamp {
    /// `eval_{YYYYMMDD_HHMMSS}`.
    pub run_id: String,
    /// `YYYY-MM-DDTHH:MM:SSZ`.
    pub timestamp_utc: String,
}

impl RunStamp {
    /// The stamp for a time.
    pub fn at(t: SystemTime) -> RunStamp {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let u = UtcTime::from_unix_ms(ms).unwrap_or(UtcTime::UNIX_EPOCH);
        RunStamp {
            run_id: u.to_run_id(),
            timestamp_utc: u.to_rfc3339(Precision::Seconds),
        }
    }

    /// Takes a stamp whose summary file does not exist yet in `OUT_DIR/evals/` and reserves
    /// it by creating that file empty (so two runs in the same second do not overwrite each
    /// other: the second waits for the next second). Creates the directory.
    pub fn reserve(out_dir: &Path) -> Result<RunStamp, EvalError> {
        let dir = evals_dir(out_dir);
        std::fs::create_dir_all(&dir).map_err(|e| EvalError::io(&dir, e))?;
        let mut last_err = None;
        for _ in 0..5 {
            let stamp = RunStamp::at(SystemTime::now());
            let p = dir.join(format!("{}_summary.json", stamp.run_id));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
            {
                Ok(_) => return Ok(stamp),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    last_err = Some(EvalError::io(&p, e));
                    let into = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_millis());
                    std::thread::sleep(Duration::from_millis(u64::from(1000 - into) + 5));
                }
                Err(e) => return Err(EvalError::io(&p, e)),
            }
        }
        Err(last_err.unwrap_or(EvalError::Empty("no free run id")))
    }

    /// Removes the reservation (after a failed run).
    pub fn release(&self, out_dir: &Path) {
        let p = evals_dir(out_dir).join(format!("{}_summary.json", self.run_id));
        if std::fs::metadata(&p).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `OUT_DIR/evals`.
pub fn evals_dir(out_dir: &Path) -> PathBuf {
    out_dir.join("evals")
}

/// A dataset name made safe for a file name (`[A-Za-z0-9_.-]`, others become `_`).
pub fn file_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "dataset".to_string()
    } else {
        s
    }
}

/// `eval_{ts}_{DATASET}.jsonl` for a run id and dataset name.
pub fn log_file_name(run_id: &str, dataset: &str) -> String {
    format!("{run_id}_{}.jsonl", file_safe(dataset))
}

/// The log file names of a run's datasets, in order. Two names that map to one file name
/// once made safe both keep a file (the later gets a `_2`… suffix).
pub fn log_file_names(run_id: &str, datasets: &[&str]) -> Vec<String> {
    let mut used = std::collections::BTreeSet::new();
    datasets
        .iter()
        .map(|d| {
            let mut name = log_file_name(run_id, d);
            let mut n = 2;
            while !used.insert(name.clone()) {
                name = log_file_name(run_id, &format!("{d}_{n}"));
                n += 1;
            }
            name
        })
        .collect()
}

/// The files written for a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// One eval log per dataset.
    pub logs: Vec<PathBuf>,
    /// The summary JSON.
    pub summary_json: PathBuf,
    /// The Markdown summary.
    pub summary_md: PathBuf,
    /// The HTML report.
    pub report_html: PathBuf,
}

impl Written {
    /// Every file, logs first.
    pub fn all(&self) -> Vec<&Path> {
        self.logs
            .iter()
            .map(PathBuf::as_path)
            .chain([
                self.summary_json.as_path(),
                self.summary_md.as_path(),
                self.report_html.as_path(),
            ])
            .collect()
    }
}

/// Writes the logs, the summary (JSON and Markdown) and the HTML report of a run.
pub fn write_all(run: &EvalRun, summary: &Summary, out_dir: &Path) -> Result<Written, EvalError> {
    let dir = evals_dir(out_dir);
    std::fs::create_dir_all(&dir).map_err(|e| EvalError::io(&dir, e))?;
    let mut written = Written::default();
    let names: Vec<&str> = run.datasets.iter().map(|d| d.name.as_str()).collect();
    for (d, name) in run.datasets.iter().zip(log_file_names(&run.run_id, &names)) {
        let p = dir.join(name);
        let f = File::create(&p).map_err(|e| EvalError::io(&p, e))?;
        let mut w = BufWriter::new(f);
        for rec in &d.logs {
            serde_json::to_writer(&mut w, rec).map_err(|e| EvalError::Json {
                path: p.clone(),
                message: e.to_string(),
            })?;
            w.write_all(b"\n").map_err(|e| EvalError::io(&p, e))?;
        }
        w.flush().map_err(|e| EvalError::io(&p, e))?;
        written.logs.push(p);
    }
    let base = dir.join(&run.run_id);
    written.summary_json = PathBuf::from(format!("{}_summary.json", base.display()));
    let json = serde_json::to_string_pretty(summary).map_err(|e| EvalError::Json {
        path: written.summary_json.clone(),
        message: e.to_string(),
    })?;
    write_file(&written.summary_json, &(json + "\n"))?;
    written.summary_md = PathBuf::from(format!("{}_summary.md", base.display()));
    write_file(&written.summary_md, &crate::render::markdown(summary))?;
    written.report_html = PathBuf::from(format!("{}_report.html", base.display()));
    write_file(&written.report_html, &crate::render::html(run, summary)?)?;
    Ok(written)
}

fn write_file(p: &Path, content: &str) -> Result<(), EvalError> {
    std::fs::write(p, content).map_err(|e| EvalError::io(p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_stamps() {
        let s = RunStamp::at(UNIX_EPOCH);
        assert_eq!(s.run_id, "eval_19700101_000000");
        assert_eq!(s.timestamp_utc, "1970-01-01T00:00:00Z");
        // 2026-11-23 07:31:52 UTC
        let s = RunStamp::at(UNIX_EPOCH + Duration::from_millis(1_795_419_112_900));
        assert_eq!(s.run_id, "eval_20261123_073152");
        assert_eq!(s.timestamp_utc, "2026-11-23T07:31:52Z");
        let s = RunStamp::at(UNIX_EPOCH + Duration::from_secs(951_827_696));
        assert_eq!(s.run_id, "eval_20000229_123456");
        assert_eq!(s.timestamp_utc, "2000-02-29T12:34:56Z");
    }

    #[test]
    fn safe_file_names() {
        assert_eq!(
            file_safe("Clean_Benign_Corpus_v1"),
            "Clean_Benign_Corpus_v1"
        );
        assert_eq!(file_safe("a/b c"), "a_b_c");
        assert_eq!(file_safe(".."), "dataset");
        assert_eq!(log_file_name("eval_x", "d"), "eval_x_d.jsonl");
    }
}
