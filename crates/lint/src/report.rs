//! Output: human-readable text, JSON, and SARIF 2.1.0 for code-scanning tools.
//!
//! SARIF is written with serde_json from the few objects code scanning reads (tool driver with
//! rules, results with locations and a code flow for the value's path). The `serde-sarif`
//! crate models the whole 2.1.0 schema (hundreds of generated types) for what is a
//! hundred lines here; the output is checked against the schema's required members in tests.

use crate::{LintReport, Linter, Severity};
use serde_json::{Value, json};

/// Human-readable text: one block per finding, the path indented under it, then a summary.
pub fn human(linter: &Linter, report: &LintReport) -> String {
    let mut s = String::new();
    for ff in &report.results {
        for f in &ff.findings {
            let rule = linter.rules().get(f.rule);
            s.push_str(&format!(
                "{}:{}:{}: {} {} [{}] {}\n",
                ff.path,
                f.line,
                f.column,
                f.rule,
                linter.severity(f.rule).as_str(),
                rule.map_or("", |r| r.name.as_str()),
                f.message
            ));
            let n = f.path.len();
            for (i, st) in f.path.iter().enumerate() {
                let arrow = if i == 0 {
                    "source"
                } else if i + 1 == n {
                    "sink  "
                } else {
                    "step  "
                };
                s.push_str(&format!("    {arrow} line {}: {}\n", st.line, st.note));
            }
            if let Some(r) = rule {
                s.push_str(&format!("    fix: {}\n", first_sentence(&r.fix)));
            }
        }
    }
    for sk in &report.skipped {
        s.push_str(&format!("{}: skipped: {}\n", sk.path, sk.reason));
    }
    let total: usize = report.results.iter().map(|f| f.findings.len()).sum();
    s.push_str(&format!(
        "{} finding(s) in {} of {} file(s){}\n",
        total,
        report.results.len(),
        report.files,
        if report.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} skipped", report.skipped.len())
        }
    ));
    s
}

fn first_sentence(s: &str) -> &str {
    match s.find(". ") {
        Some(i) => &s[..=i],
        None => s,
    }
}

/// JSON: `{"version": 1, "files": N, "results": [...], "skipped": [...]}` with each
/// finding's severity.
pub fn json(linter: &Linter, report: &LintReport) -> Value {
    let results: Vec<Value> = report
        .results
        .iter()
        .flat_map(|ff| {
            ff.findings.iter().map(move |f| {
                json!({
                    "path": ff.path,
                    "rule": f.rule,
                    "severity": linter.severity(f.rule),
                    "line": f.line,
                    "column": f.column,
                    "message": f.message,
                    "steps": f.path,
                })
            })
        })
        .collect();
    json!({
        "version": 1,
        "files": report.files,
        "findings": results,
        "skipped": report.skipped,
    })
}

/// SARIF 2.1.0.
pub fn sarif(linter: &Linter, report: &LintReport) -> Value {
    let rules: Vec<Value> = linter
        .rules()
        .all()
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": first_sentence(&r.why)},
                "fullDescription": {"text": r.why},
                "help": {"text": r.fix},
                "defaultConfiguration": {"level": level(linter.severity(r.id))},
            })
        })
        .collect();
    let index = |id| linter.rules().all().iter().position(|r| r.id == id);
    let results: Vec<Value> = report
        .results
        .iter()
        .flat_map(|ff| {
            ff.findings.iter().map(move |f| {
                let loc = |line: usize, col: usize| {
                    json!({"physicalLocation": {
                        "artifactLocation": {"uri": uri(&ff.path)},
                        "region": {"startLine": line, "startColumn": col},
                    }})
                };
                let mut r = json!({
                    "ruleId": f.rule,
                    "level": level(linter.severity(f.rule)),
                    "message": {"text": f.message},
                    "locations": [loc(f.line, f.column)],
                });
                if let Some(i) = index(f.rule) {
                    r["ruleIndex"] = json!(i);
                }
                if !f.path.is_empty() {
                    let steps: Vec<Value> = f
                        .path
                        .iter()
                        .map(|s| {
                            let mut l = loc(s.line, 1);
                            l["message"] = json!({"text": s.note});
                            json!({"location": l})
                        })
                        .collect();
                    r["codeFlows"] = json!([{"threadFlows": [{"locations": steps}]}]);
                }
                r
            })
        })
        .collect();
    json!({
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [{
            "tool": {"driver": {
                "name": "rampart-lint",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://example.invalid/rampart/docs/LINTER_RULES.md",
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

fn level(s: Severity) -> &'static str {
    s.as_str()
}

/// A relative URI for a path (forward slashes, no leading `./`).
fn uri(path: &str) -> String {
    path.replace('\\', "/").trim_start_matches("./").to_string()
}
