//! The Markdown summary and the self-contained HTML report. Both are built from the same
//! tables, so they always agree; the HTML adds the plots.

use crate::error::EvalError;
use crate::log::EvalLogRecord;
use crate::metrics::roc_curve;
use crate::plots;
use crate::report::{
    Breakdown, ConversationStats, DatasetReport, FINAL_COLUMN, FineLabels, NONE_KEY, POOLED_ALL,
    PROMPTGUARD_REFERENCE_ACCURACY, Summary,
};
use crate::runner::EvalRun;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// A rate as a percentage with two decimals, or `n/a`.
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |x| format!("{:.2}%", x * 100.0))
}

fn num3(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |x| format!("{x:.3}"))
}

/// Microseconds, human-readable.
pub fn dur_us(us: u64) -> String {
    if us >= 10_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else if us >= 1000 {
        format!("{:.2} ms", us as f64 / 1000.0)
    } else {
        format!("{us} µs")
    }
}

/// A table rendered to Markdown or HTML.
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[&str]) -> Self {
        Self {
            head: head.iter().map(|s| (*s).to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn md(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
        let mut out = String::new();
        let line = |cells: &[String]| {
            format!(
                "| {} |\n",
                cells.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            )
        };
        out.push_str(&line(&self.head));
        out.push_str(&format!(
            "|{}\n",
            self.head.iter().map(|_| "---|").collect::<String>()
        ));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    fn html(&self) -> String {
        let mut out = String::from("<div class=\"scroll\"><table>\n<thead><tr>");
        for h in &self.head {
            let _ = write!(out, "<th>{}</th>", breakable(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for r in &self.rows {
            out.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                if i == 0 {
                    let _ = write!(out, "<th scope=\"row\">{}</th>", breakable(c));
                } else {
                    let _ = write!(out, "<td>{}</td>", esc_html(c));
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table></div>\n");
        out
    }
}

/// A header cell's text, escaped, with line-break opportunities after `_` and `@` (dataset
/// names, `TPR@1%FPR`): the headers wrap so that a wide table fits a 1400 px window; the
/// numbers never wrap.
fn breakable(s: &str) -> String {
    // The escapes contain neither character.
    esc_html(s).replace('_', "_<wbr>").replace('@', "@<wbr>")
}

/// Escapes text for HTML element content and attribute values.
pub fn esc_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn lat(r: &DatasetReport, f: impl Fn(&crate::metrics::Latency) -> u64) -> String {
    r.latency.as_ref().map_or("n/a".into(), |l| dur_us(f(l)))
}

fn results_table(s: &Summary) -> Table {
    let mut t = Table::new(&[
        "dataset",
        "config",
        "prompts",
        "attacks",
        "benign",
        "TP",
        "FN",
        "FP",
        "TN",
        "TPR",
        "FPR",
        "precision",
        "F1",
        "accuracy",
        "ROC-AUC",
        "TPR@1%FPR",
        "TPR@0.1%FPR",
        "p50",
        "p95",
        "p99",
    ]);
    for r in &s.reports {
        let c = r.confusion;
        t.row(vec![
            r.dataset.clone(),
            r.config.clone(),
            r.prompts.to_string(),
            r.attacks.to_string(),
            r.benign.to_string(),
            c.tp.to_string(),
            c.fn_.to_string(),
            c.fp.to_string(),
            c.tn.to_string(),
            pct(r.tpr),
            pct(r.fpr),
            pct(r.precision),
            pct(r.f1),
            pct(r.accuracy),
            num3(r.roc_auc),
            pct(r.tpr_at_1pct_fpr.map(|p| p.tpr)),
            pct(r.tpr_at_0_1pct_fpr.map(|p| p.tpr)),
            lat(r, |l| l.p50),
            lat(r, |l| l.p95),
            lat(r, |l| l.p99),
        ]);
    }
    t
}

/// `k=v, k=v` of a count map.
fn counts(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ms(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".into(), |x| format!("{x} ms"))
}

/// The intent layer per report: calls, cache, tokens, cost, latency of the model calls,
/// outcomes and triggers. `None` when no configuration has a judge layer.
fn judge_table(s: &Summary) -> Option<Table> {
    let judged: Vec<_> = s
        .reports
        .iter()
        .filter_map(|r| r.judge.as_ref().map(|j| (r, j)))
        .collect();
    if judged.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "dataset",
        "config",
        "layer",
        "prompts",
        "calls",
        "cache hits",
        "tokens in",
        "tokens out",
        "cost (USD)",
        "p50",
        "p95",
        "outcomes",
        "triggers",
        "labels",
    ]);
    for (r, j) in judged {
        let cost = if j.priced_calls > 0 {
            format!("{:.6}", j.cost_usd)
        } else {
            "unpriced".into()
        };
        t.row(vec![
            r.dataset.clone(),
            r.config.clone(),
            j.layer.clone(),
            r.prompts.to_string(),
            j.calls.to_string(),
            j.cache_hits.to_string(),
            j.input_tokens.to_string(),
            j.output_tokens.to_string(),
            cost,
            ms(j.latency_ms.map(|l| l.p50)),
            ms(j.latency_ms.map(|l| l.p95)),
            counts(&j.outcomes),
            counts(&j.triggers),
            counts(&j.labels),
        ]);
    }
    Some(t)
}

/// The relational layer per report: evaluations by status and label, cost and time. `None`
/// when no configuration has a relational layer.
fn relational_table(s: &Summary) -> Option<Table> {
    let rows: Vec<_> = s
        .reports
        .iter()
        .filter_map(|r| r.relational.as_ref().map(|x| (r, x)))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "dataset",
        "config",
        "layer",
        "backend",
        "evaluated",
        "ok",
        "failed",
        "skipped",
        "labels",
        "calls",
        "tokens in",
        "tokens out",
        "cost (USD)",
        "p50",
        "p95",
    ]);
    let us =
        |v: Option<u64>| v.map_or_else(|| "n/a".into(), |x| format!("{:.1} ms", x as f64 / 1000.0));
    for (r, x) in rows {
        t.row(vec![
            r.dataset.clone(),
            r.config.clone(),
            x.layer.clone(),
            x.backend.clone(),
            x.evaluated.to_string(),
            x.ok.to_string(),
            x.failed.to_string(),
            x.skipped.to_string(),
            counts(&x.labels),
            x.calls.to_string(),
            x.input_tokens.to_string(),
            x.output_tokens.to_string(),
            format!("{:.6}", x.cost_usd),
            us(x.latency_us.map(|l| l.p50)),
            us(x.latency_us.map(|l| l.p95)),
        ]);
    }
    Some(t)
}

/// What the relational table counts.
const RELATIONAL_NOTE: &str = "Evaluated: prompts with a relational report. Failed \
evaluations gave no label (the layer's fail mode decided the action, and the four-label \
prediction fell back to the action mapping); skipped ones had no user layer. With a \
relational layer, the four-label accuracy uses its label.";

/// How the judge changed decisions on the prompts it gave a verdict for: the verdict
/// transitions, and TPR/FPR without and with it.
fn judge_effect_table(s: &Summary) -> Option<Table> {
    let judged: Vec<_> = s
        .reports
        .iter()
        .filter_map(|r| r.judge.as_ref().map(|j| (r, j)))
        .collect();
    if judged.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "dataset",
        "config",
        "with a verdict",
        "attacks",
        "benign",
        "TPR without → with",
        "FPR without → with",
        "transitions (without -> with)",
    ]);
    for (r, j) in judged {
        let (a, b) = (&j.without_judge, &j.with_judge);
        t.row(vec![
            r.dataset.clone(),
            r.config.clone(),
            a.confusion.total().to_string(),
            (a.confusion.tp + a.confusion.fn_).to_string(),
            (a.confusion.fp + a.confusion.tn).to_string(),
            format!("{} → {}", pct(a.tpr), pct(b.tpr)),
            format!("{} → {}", pct(a.fpr), pct(b.fpr)),
            counts(&j.transitions),
        ]);
    }
    Some(t)
}

/// What the judge tables count.
const JUDGE_NOTE: &str = "Calls: prompts the judge was asked about (its triggers fired), \
cache hits included; of a conversation, every call of its replay the judge was asked about. \
p50/p95: latency of the calls that went to the model. Transitions and TPR/FPR are over the \
prompts whose deciding call gave a verdict: the other layers' verdict on their own \
against the verdict with the judge (before the SANITIZE and data-channel adjustments).";

/// Side by side: one row per dataset, the configurations next to each other under each
/// metric.
fn comparison_table(s: &Summary) -> Option<Table> {
    if s.configs.len() < 2 {
        return None;
    }
    type Getter = fn(&DatasetReport) -> String;
    let metrics: [(&str, Getter); 6] = [
        ("TPR", |r| pct(r.tpr)),
        ("FPR", |r| pct(r.fpr)),
        ("F1", |r| pct(r.f1)),
        ("accuracy", |r| pct(r.accuracy)),
        ("ROC-AUC", |r| num3(r.roc_auc)),
        ("p99", |r| lat(r, |l| l.p99)),
    ];
    let mut head = vec!["dataset".to_string()];
    for (m, _) in &metrics {
        for c in &s.configs {
            head.push(format!("{m} {}", c.name));
        }
    }
    let mut t = Table {
        head,
        rows: Vec::new(),
    };
    let mut datasets: Vec<&str> = Vec::new();
    for r in &s.reports {
        if !datasets.contains(&r.dataset.as_str()) {
            datasets.push(&r.dataset);
        }
    }
    for d in datasets {
        let mut row = vec![d.to_string()];
        for (_, get) in &metrics {
            for c in &s.configs {
                row.push(s.report(d, &c.name).map_or("n/a".into(), get));
            }
        }
        t.row(row);
    }
    Some(t)
}

fn four_label_table(s: &Summary) -> Option<Table> {
    let with: Vec<&DatasetReport> = s
        .reports
        .iter()
        .filter(|r| r.fine_labels.is_some())
        .collect();
    if with.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "dataset",
        "config",
        "prompts",
        "verdict accuracy",
        "strict four-label accuracy",
        "published reference",
    ]);
    for r in with {
        if let Some(f) = &r.fine_labels {
            t.row(vec![
                r.dataset.clone(),
                r.config.clone(),
                f.total.to_string(),
                pct(f.accuracy),
                pct(f.strict_accuracy),
                f.reference_accuracy
                    .map_or("—".into(), |x| format!("{:.1}%", x * 100.0)),
            ]);
        }
    }
    Some(t)
}

fn gates_table(s: &Summary) -> Option<Table> {
    if s.gates.is_empty() {
        return None;
    }
    let mut t = Table::new(&["gate", "config", "result", "detail"]);
    for g in &s.gates {
        t.row(vec![
            g.name.clone(),
            g.config.clone(),
            if g.passed { "PASS" } else { "FAIL" }.into(),
            g.detail.clone(),
        ]);
    }
    Some(t)
}

fn datasets_table(s: &Summary) -> Table {
    let mut t = Table::new(&[
        "dataset",
        "origin",
        "records",
        "evaluated",
        "row errors",
        "log",
    ]);
    for d in &s.datasets {
        t.row(vec![
            d.name.clone(),
            d.origin.clone(),
            d.records.to_string(),
            d.evaluated.to_string(),
            d.row_errors.to_string(),
            d.log_file.clone(),
        ]);
    }
    t
}

fn run_lines(s: &Summary) -> Vec<String> {
    let configs: Vec<String> = s
        .configs
        .iter()
        .map(|c| {
            format!(
                "{} (policy {}; layers {})",
                c.name,
                c.policy_version,
                c.layers.join(" → ")
            )
        })
        .collect();
    vec![
        format!("Started {}", s.timestamp_utc),
        format!(
            "Wall time {:.2} s for {} scans ({:.0} prompts/s, {} threads)",
            s.wall_seconds, s.scans, s.prompts_per_second, s.threads
        ),
        format!("Configurations: {}", configs.join("; ")),
    ]
}

/// Per-report detail tables: (title, table).
fn detail_tables(r: &DatasetReport) -> Vec<(&'static str, Table)> {
    let mut out = vec![
        ("Latency", latency_table(r)),
        ("Attribution", attribution_table(r)),
    ];
    slice_tables(r, &mut out);
    if let Some(f) = &r.fine_labels {
        fine_label_tables(f, &mut out);
    }
    if let Some(c) = &r.conversations {
        conversation_tables(c, &mut out);
    }
    out
}

/// Latency of the whole scan and of each layer, with the share of prompts that reached it.
fn latency_table(r: &DatasetReport) -> Table {
    let mut t = Table::new(&[
        "layer", "reached", "samples", "p50", "p95", "p99", "max", "mean",
    ]);
    let reach = |n: usize| pct((r.prompts > 0).then(|| n as f64 / r.prompts as f64));
    if let Some(l) = &r.latency {
        t.row(vec![
            "whole scan".into(),
            reach(l.count),
            l.count.to_string(),
            dur_us(l.p50),
            dur_us(l.p95),
            dur_us(l.p99),
            dur_us(l.max),
            format!("{:.1} µs", l.mean),
        ]);
    }
    for (name, l) in &r.layer_latency {
        t.row(vec![
            name.clone(),
            reach(l.count),
            l.count.to_string(),
            dur_us(l.p50),
            dur_us(l.p95),
            dur_us(l.p99),
            dur_us(l.max),
            format!("{:.1} µs", l.mean),
        ]);
    }
    t
}

/// True and false positives by the layer that decided them.
fn attribution_table(r: &DatasetReport) -> Table {
    let mut t = Table::new(&[
        "deciding layer",
        "true positives caught",
        "false positives caused",
    ]);
    let layers: BTreeSet<&String> = r
        .attribution
        .true_positives
        .keys()
        .chain(r.attribution.false_positives.keys())
        .collect();
    for l in layers {
        t.row(vec![
            l.clone(),
            r.attribution
                .true_positives
                .get(l)
                .copied()
                .unwrap_or(0)
                .to_string(),
            r.attribution
                .false_positives
                .get(l)
                .copied()
                .unwrap_or(0)
                .to_string(),
        ]);
    }
    t
}

/// The confusion counts by category, language, channel, payload position and carrier.
fn slice_tables(r: &DatasetReport, out: &mut Vec<(&'static str, Table)>) {
    let channel_order = rampart_datasets::Channel::ALL.map(|c| c.name());
    let position_order = rampart_datasets::PayloadPosition::ALL.map(|p| p.name());
    // Category and language in key order; channel, position and carrier in their natural
    // order, and only for sets that have them.
    for (title, map, order) in [
        ("By category", &r.by_category, None),
        ("By language", &r.by_language, None),
        ("By channel", &r.by_channel, Some(&channel_order[..])),
        (
            "By payload position",
            &r.by_position,
            Some(&position_order[..]),
        ),
        ("By carrier", &r.by_carrier, Some(&[][..])),
    ] {
        if map.is_empty() && order.is_some() {
            continue;
        }
        let mut t = Table::new(&[
            "slice", "prompts", "TP", "FN", "FP", "TN", "TPR", "FPR", "accuracy",
        ]);
        let entries = match order {
            Some(o) => ordered(map, o),
            None => map.iter().collect(),
        };
        for (k, b) in entries {
            let c = b.confusion;
            t.row(vec![
                k.clone(),
                c.total().to_string(),
                c.tp.to_string(),
                c.fn_.to_string(),
                c.fp.to_string(),
                c.tn.to_string(),
                pct(b.tpr),
                pct(b.fpr),
                pct(b.accuracy),
            ]);
        }
        out.push((title, t));
    }
}

/// The fine labels against the action, and the four-label confusion matrix.
fn fine_label_tables(f: &FineLabels, out: &mut Vec<(&'static str, Table)>) {
    let mut t = Table::new(&["label", "expected", "ALLOW", "SANITIZE", "BLOCK", "correct"]);
    for (label, row) in &f.matrix {
        let expected = label_is_attack(label).map_or("?", |a| if a { "flag" } else { "ALLOW" });
        let get = |a: &str| row.get(a).copied().unwrap_or(0).to_string();
        t.row(vec![
            label.clone(),
            expected.into(),
            get("ALLOW"),
            get("SANITIZE"),
            get("BLOCK"),
            pct(f.accuracy_by_label.get(label).copied()),
        ]);
    }
    t.row(vec![
        "four-label accuracy".into(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        accuracy_cell(f.accuracy, f.correct, f),
    ]);
    out.push(("Fine labels × action", t));
    let columns = ["reciprocal", "borderline", "manipulative", "extractive"];
    let mut header = vec!["true label \\ predicted"];
    header.extend(columns);
    header.push("correct");
    let mut t = Table::new(&header);
    for (label, row) in &f.predicted {
        let mut cells = vec![label.clone()];
        cells.extend(
            columns
                .iter()
                .map(|c| row.get(*c).copied().unwrap_or(0).to_string()),
        );
        let n: u64 = row.values().sum();
        let ok = row.get(label.as_str()).copied().unwrap_or(0);
        cells.push(pct((n > 0).then(|| ok as f64 / n as f64)));
        t.row(cells);
    }
    let mut last = vec!["strict four-label accuracy".to_string()];
    last.extend(columns.iter().map(|_| String::new()));
    last.push(accuracy_cell(f.strict_accuracy, f.strict_correct, f));
    t.row(last);
    out.push(("Four-label confusion matrix (predicted: ALLOW → reciprocal, flagged with a system-marker finding → extractive, other flagged → manipulative)", t));
}

/// Conversations by category, and the first flag of flagged conversations.
fn conversation_tables(c: &ConversationStats, out: &mut Vec<(&'static str, Table)>) {
    let mut t = Table::new(&["category", "conversations", "TPR [95% CI]", "FPR [95% CI]"]);
    for (k, b) in &c.by_category {
        t.row(vec![
            k.clone(),
            b.confusion.total().to_string(),
            rate_ci(
                b.tpr,
                b.tpr_interval,
                b.confusion.tp,
                b.confusion.positives(),
            ),
            rate_ci(
                b.fpr,
                b.fpr_interval,
                b.confusion.fp,
                b.confusion.negatives(),
            ),
        ]);
    }
    out.push(("Conversations by category", t));
    let flags = |list: &[crate::report::FirstFlag]| {
        let mut t = Table::new(&[
            "id",
            "category",
            "call",
            "message",
            "attack turn",
            "flagged by",
        ]);
        for f in list {
            t.row(vec![
                f.id.clone(),
                f.category.clone().unwrap_or_default(),
                f.call.to_string(),
                f.message.to_string(),
                f.attack_turn.map_or(String::new(), |a| a.to_string()),
                f.flagged_by.join(", "),
            ]);
        }
        t
    };
    if !c.flagged_benign.is_empty() {
        out.push(("Benign conversations flagged", flags(&c.flagged_benign)));
    }
    if !c.benign_messages.flagged_by.is_empty() {
        let mut t = Table::new(&["flagged by", "benign messages"]);
        let mut by: Vec<(&String, &u64)> = c.benign_messages.flagged_by.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (k, n) in by {
            t.row(vec![k.clone(), n.to_string()]);
        }
        out.push(("Benign messages flagged, by what flagged them", t));
    }
    if !c.benign_messages.by_kind.is_empty() {
        let mut t = Table::new(&[
            "content of the message",
            "benign messages",
            "flagged",
            "rate",
        ]);
        for (k, [n, f]) in &c.benign_messages.by_kind {
            let rate = if *n == 0 { 0.0 } else { *f as f64 / *n as f64 };
            t.row(vec![
                k.clone(),
                n.to_string(),
                f.to_string(),
                format!("{:.2}%", 100.0 * rate),
            ]);
        }
        out.push((
            "Benign messages flagged, by content (heuristic: crates/eval/src/kind.rs)",
            t,
        ));
    }
    if !c.first_flags.is_empty() {
        out.push(("Attack conversations: first flag", flags(&c.first_flags)));
    }
}

/// A rate with its counts and 95% Wilson interval, e.g. "90.00% (9/10) [59.58–98.21]".
fn rate_ci(
    rate: Option<f64>,
    interval: Option<crate::metrics::Interval>,
    k: u64,
    n: u64,
) -> String {
    match interval {
        Some(i) => format!(
            "{} [{:.2}–{:.2}]",
            rate_n(rate, k, n),
            i.low * 100.0,
            i.high * 100.0
        ),
        None => rate_n(rate, k, n),
    }
}

/// Conversation records, one row per (dataset, configuration) that has any: TPR and FPR
/// over conversations with 95% Wilson intervals, and where attacks were first flagged.
fn conversation_table(s: &Summary) -> Option<Table> {
    let mut t = Table::new(&[
        "dataset",
        "config",
        "conversations",
        "TPR [95% CI]",
        "FPR [95% CI]",
        "first flag: call (median)",
        "first flag: message (median)",
        "flagged before attack_turn",
        "benign flagged",
        "benign messages flagged (later turns)",
    ]);
    let num = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1}"));
    for r in &s.reports {
        let Some(c) = &r.conversations else { continue };
        let o = &c.overall;
        t.row(vec![
            r.dataset.clone(),
            r.config.clone(),
            c.conversations.to_string(),
            rate_ci(
                o.tpr,
                o.tpr_interval,
                o.confusion.tp,
                o.confusion.positives(),
            ),
            rate_ci(
                o.fpr,
                o.fpr_interval,
                o.confusion.fp,
                o.confusion.negatives(),
            ),
            num(c.first_flag_call_median),
            num(c.first_flag_message_median),
            format!("{} of {}", c.flagged_before_attack_turn, c.attacks_flagged),
            c.flagged_benign.len().to_string(),
            {
                let m = &c.benign_messages;
                format!(
                    "{} of {} ({:.2}%); later {} of {} ({:.2}%)",
                    m.flagged,
                    m.calls,
                    100.0 * m.rate(),
                    m.later_flagged,
                    m.later_calls,
                    100.0 * m.later_rate()
                )
            },
        ]);
    }
    (!t.rows.is_empty()).then_some(t)
}

const CONVERSATION_NOTE: &str = "Conversations are replayed call by call through a stateful \
     conversation scanner with a fresh state per conversation; one is flagged when any call \
     is. Call: the 1-based call at which an attack was first flagged; message: the index in \
     `turns` of that call's last message. Flagged before attack_turn: first flagged on a call \
     that ends before the message carrying the attack (flagged for something else). Benign \
     messages flagged: per-call decisions of the benign conversations that were not ALLOW, \
     over every call and over the calls after each conversation's first (the later turns). \
     The detail sections list the benign conversations flagged and what flagged them.";

/// The entries of a breakdown, those named in `order` first in that order, then the rest in
/// key order, `(none)` last (so positions read start, middle, end and channels user, tool,
/// retrieved).
fn ordered<'a>(
    map: &'a BTreeMap<String, Breakdown>,
    order: &[&str],
) -> Vec<(&'a String, &'a Breakdown)> {
    let rank = |k: &str| {
        order
            .iter()
            .position(|o| *o == k)
            .unwrap_or(order.len() + usize::from(k == NONE_KEY))
    };
    let mut v: Vec<_> = map.iter().collect();
    v.sort_by_key(|(k, _)| rank(k));
    v
}

/// A rate with its counts, e.g. "90.00% (9/10)", or "n/a (0)".
fn rate_n(rate: Option<f64>, k: u64, n: u64) -> String {
    match rate {
        Some(_) => format!("{} ({k}/{n})", pct(rate)),
        None => format!("n/a ({n})"),
    }
}

/// TPR and FPR per channel, payload position and carrier for every report that has those
/// breakdowns: one row per (dataset, configuration, breakdown, slice). `None` when no report
/// has any (sets with one channel and no embedded-payload fields).
fn channel_table(s: &Summary) -> Option<Table> {
    let channel_order = rampart_datasets::Channel::ALL.map(|c| c.name());
    let position_order = rampart_datasets::PayloadPosition::ALL.map(|p| p.name());
    let mut t = Table::new(&[
        "dataset", "config", "by", "slice", "attacks", "TPR", "benign", "FPR",
    ]);
    for r in &s.reports {
        for (by, map, order) in [
            ("channel", &r.by_channel, &channel_order[..]),
            ("position", &r.by_position, &position_order[..]),
            ("carrier", &r.by_carrier, &[][..]),
        ] {
            for (k, b) in ordered(map, order) {
                let c = b.confusion;
                t.row(vec![
                    r.dataset.clone(),
                    r.config.clone(),
                    by.to_string(),
                    k.clone(),
                    c.positives().to_string(),
                    rate_n(b.tpr, c.tp, c.positives()),
                    c.negatives().to_string(),
                    rate_n(b.fpr, c.fp, c.negatives()),
                ]);
            }
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

/// The note under the channel table.
const CHANNEL_NOTE: &str = "Channel: the role of the segment an attacker writes (`tool` if \
     the prompt has a tool segment, else `retrieved` if it has a retrieved one, else `user`). \
     Position and carrier: where the payload sits and in what kind of document, from the \
     dataset's `position` and `carrier` fields; `(none)` for prompts without them (benign \
     carriers have no position). TPR (k/n): attacks flagged of attacks; FPR (k/n): benign \
     prompts flagged of benign prompts.";

/// "54.00% (270/500); published reference 55.7%": an accuracy with its counts and, for
/// PromptGuard sets, the reference.
fn accuracy_cell(accuracy: Option<f64>, correct: u64, f: &crate::report::FineLabels) -> String {
    format!(
        "{} ({correct}/{}){}",
        pct(accuracy),
        f.total,
        f.reference_accuracy.map_or(String::new(), |x| format!(
            "; published reference {:.1}%",
            x * 100.0
        ))
    )
}

fn label_is_attack(name: &str) -> Option<bool> {
    rampart_datasets::Label::ALL
        .iter()
        .find(|l| l.name() == name)
        .map(|l| l.is_attack())
}

/// The headline Markdown: run facts, the results table, the comparison, four-label
/// accuracy and gates (printed to stdout by the CLI).
pub fn markdown_headline(s: &Summary) -> String {
    let mut md = format!("# Rampart evaluation `{}`\n\n", s.eval_run_id);
    for l in run_lines(s) {
        let _ = writeln!(md, "- {l}");
    }
    md.push_str("\n## Results\n\n");
    md.push_str(&results_table(s).md());
    if let Some(t) = comparison_table(s) {
        md.push_str("\n## Comparison\n\n");
        md.push_str(&t.md());
    }
    if let Some(t) = four_label_table(s) {
        md.push_str("\n## Four-label accuracy\n\n");
        md.push_str(&t.md());
    }
    if let Some(t) = channel_table(s) {
        md.push_str("\n## By channel, payload position and carrier\n\n");
        md.push_str(&t.md());
        let _ = writeln!(md, "\n{CHANNEL_NOTE}");
    }
    if let Some(t) = conversation_table(s) {
        md.push_str("\n## Conversations\n\n");
        md.push_str(&t.md());
        let _ = writeln!(md, "\n{CONVERSATION_NOTE}");
    }
    if let Some(t) = judge_table(s) {
        md.push_str("\n## Intent layer (judge)\n\n");
        md.push_str(&t.md());
        if let Some(t) = judge_effect_table(s) {
            md.push_str("\n**How the judge changed decisions**\n\n");
            md.push_str(&t.md());
        }
        let _ = writeln!(md, "\n{JUDGE_NOTE}");
    }
    if let Some(t) = relational_table(s) {
        md.push_str("\n## Relational layer\n\n");
        md.push_str(&t.md());
        let _ = writeln!(md, "\n{RELATIONAL_NOTE}");
    }
    if let Some(t) = gates_table(s) {
        let failed = s.gates.iter().filter(|g| !g.passed).count();
        let _ = write!(
            md,
            "\n## Gates: {}\n\n",
            if failed == 0 {
                "all passed".to_string()
            } else {
                format!("{failed} failed")
            }
        );
        md.push_str(&t.md());
    }
    md
}

/// What `rampart eval` prints: the headline, and for a run over one dataset (a red-team
/// file, one set) its "By category" table per configuration, which otherwise was only in the
/// Markdown and HTML reports.
pub fn terminal_summary(s: &Summary) -> String {
    let mut md = markdown_headline(s);
    if s.datasets.len() != 1 {
        return md;
    }
    for r in &s.reports {
        if r.by_category.len() < 2 {
            continue;
        }
        let mut tables = Vec::new();
        slice_tables(r, &mut tables);
        if let Some((title, t)) = tables.into_iter().find(|(t, _)| *t == "By category") {
            let _ = write!(md, "\n## {title}: {} ({})\n\n", r.dataset, r.config);
            md.push_str(&t.md());
        }
    }
    md
}

/// The full Markdown summary (`eval_{ts}_summary.md`).
pub fn markdown(s: &Summary) -> String {
    let mut md = markdown_headline(s);
    md.push_str("\n## Datasets\n\n");
    md.push_str(&datasets_table(s).md());
    md.push_str(&format!(
        "\nOutcome: flagged = any action but ALLOW; prompts over the input limits count as \
         flagged (BLOCK). Four-label reference: {:.1}% (published, PromptGuard 680).\n",
        PROMPTGUARD_REFERENCE_ACCURACY * 100.0
    ));
    md.push_str("\n## Details\n");
    for r in &s.reports {
        let _ = write!(md, "\n### {} · {}\n", r.dataset, r.config);
        for (title, t) in detail_tables(r) {
            let _ = write!(md, "\n**{title}**\n\n");
            md.push_str(&t.md());
        }
    }
    md
}

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;\
margin:24px;color:#1b1b1b;max-width:1500px}h1{font-size:22px}h2{font-size:18px;margin-top:32px;\
border-bottom:1px solid #ddd}h3{font-size:15px;margin-top:24px}table{border-collapse:collapse;\
margin:8px 0 16px;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}\
thead th,th[scope=row]{white-space:normal}thead th{vertical-align:bottom}.scroll{overflow-x:auto}\
th[scope=row],thead th{text-align:left;background:#f4f6f8}.plots{display:flex;flex-wrap:wrap;\
gap:16px}.plots figure{margin:0;border:1px solid #e3e3e3;padding:6px}.note{color:#555;font-size:13px}\
.fail{color:#b00020;font-weight:bold}.pass{color:#006b2d;font-weight:bold}details{margin:6px 0}";

/// The self-contained HTML report (`eval_{ts}_report.html`): no external resource, plots as
/// inline SVG.
pub fn html(run: &EvalRun, s: &Summary) -> Result<String, EvalError> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Rampart evaluation {id}</title>\n<style>{CSS}</style>\n</head>\n<body>\n\
         <h1>Rampart evaluation <code>{id}</code></h1>\n<ul>\n",
        id = esc_html(&s.eval_run_id)
    );
    for l in run_lines(s) {
        let _ = writeln!(h, "<li>{}</li>", esc_html(&l));
    }
    h.push_str("</ul>\n");
    if !s.gates.is_empty() {
        let failed = s.gates.iter().filter(|g| !g.passed).count();
        let _ = writeln!(
            h,
            "<h2>Gates: <span class=\"{}\">{}</span></h2>",
            if failed == 0 { "pass" } else { "fail" },
            if failed == 0 {
                "all passed".to_string()
            } else {
                format!("{failed} failed")
            }
        );
        if let Some(t) = gates_table(s) {
            h.push_str(&t.html());
        }
    }
    h.push_str("<h2>Results</h2>\n");
    h.push_str(&results_table(s).html());
    if let Some(t) = comparison_table(s) {
        h.push_str("<h2>Comparison</h2>\n");
        h.push_str(&t.html());
    }
    if let Some(t) = four_label_table(s) {
        h.push_str("<h2>Four-label accuracy</h2>\n");
        h.push_str(&t.html());
    }
    if let Some(t) = channel_table(s) {
        h.push_str("<h2>By channel, payload position and carrier</h2>\n");
        h.push_str(&t.html());
        let _ = writeln!(
            h,
            "<p class=\"note\">{}</p>",
            esc_html(&CHANNEL_NOTE.replace('`', ""))
        );
    }
    if let Some(t) = conversation_table(s) {
        h.push_str("<h2>Conversations</h2>\n");
        h.push_str(&t.html());
        let _ = writeln!(
            h,
            "<p class=\"note\">{}</p>",
            esc_html(&CONVERSATION_NOTE.replace('`', ""))
        );
    }
    if let Some(t) = judge_table(s) {
        h.push_str("<h2>Intent layer (judge)</h2>\n");
        h.push_str(&t.html());
        if let Some(t) = judge_effect_table(s) {
            h.push_str("<h3>How the judge changed decisions</h3>\n");
            h.push_str(&t.html());
        }
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc_html(JUDGE_NOTE));
    }
    if let Some(t) = relational_table(s) {
        h.push_str("<h2>Relational layer</h2>\n");
        h.push_str(&t.html());
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc_html(RELATIONAL_NOTE));
    }
    h.push_str("<h2>Plots</h2>\n");
    h.push_str(&plots_html(run)?);
    h.push_str("<h2>Datasets</h2>\n");
    h.push_str(&datasets_table(s).html());
    h.push_str(
        "<p class=\"note\">Outcome: flagged = any action but ALLOW; prompts over the input \
         limits count as flagged (BLOCK). Score = the highest layer score (n/a when no layer \
         yields one). Attribution: the first layer, in pipeline order, whose own action was not \
         ALLOW; <code>(combined)</code> when only the combined score of all findings flagged the \
         prompt.</p>\n",
    );
    h.push_str("<h2>Details</h2>\n");
    for r in &s.reports {
        let _ = writeln!(
            h,
            "<details><summary><b>{} · {}</b></summary>",
            esc_html(&r.dataset),
            esc_html(&r.config)
        );
        for (title, t) in detail_tables(r) {
            let _ = writeln!(h, "<h3>{}</h3>", esc_html(title));
            h.push_str(&t.html());
        }
        h.push_str("</details>\n");
    }
    h.push_str("</body>\n</html>\n");
    Ok(h)
}

/// Why no ROC curve could be drawn: a curve needs scored attacks and scored benign prompts in
/// one set under one configuration.
fn roc_missing_reason(run: &EvalRun) -> &'static str {
    let logs = || run.datasets.iter().flat_map(|d| d.logs.iter());
    if logs().next().is_none() {
        "the sets hold no prompts"
    } else if !logs().any(|l| l.attack) {
        "the sets hold no attack prompts; a ROC curve needs attacks and benign prompts"
    } else if logs().all(|l| l.attack) {
        "the sets hold no benign prompts; a ROC curve needs attacks and benign prompts"
    } else if logs().all(|l| l.score.is_none()) {
        "no layer of any configuration yields a score (a rules layer gives verdicts, not scores)"
    } else {
        "no configuration yields scores for both attacks and benign prompts of one set"
    }
}

fn figure(svg: &str) -> String {
    format!("<figure>{svg}</figure>\n")
}

fn plots_html(run: &EvalRun) -> Result<String, EvalError> {
    let mut h = String::new();
    let by_config = |name: &str| -> Vec<&EvalLogRecord> {
        run.datasets
            .iter()
            .flat_map(|d| d.logs.iter())
            .filter(|l| l.config == name)
            .collect()
    };

    // ROC curves: for each dataset with both classes and the pool, one curve per config.
    h.push_str("<h3>ROC curves</h3>\n<div class=\"plots\">\n");
    let mut groups: Vec<(String, Vec<&EvalLogRecord>)> = run
        .datasets
        .iter()
        .map(|d| (d.name.clone(), d.logs.iter().collect()))
        .collect();
    if run.datasets.len() > 1 {
        groups.push((
            POOLED_ALL.to_string(),
            run.datasets.iter().flat_map(|d| d.logs.iter()).collect(),
        ));
    }
    let mut any_roc = false;
    for (name, logs) in &groups {
        let curves: Vec<(String, Vec<crate::metrics::RocPoint>)> = run
            .configs
            .iter()
            .map(|c| {
                let scored: Vec<(f64, bool)> = logs
                    .iter()
                    .filter(|l| l.config == c.name)
                    .filter_map(|l| l.score.map(|s| (f64::from(s), l.attack)))
                    .collect();
                (c.name.clone(), roc_curve(&scored))
            })
            .filter(|(_, pts)| !pts.is_empty())
            .collect();
        if !curves.is_empty() {
            any_roc = true;
            h.push_str(&figure(&plots::roc(&format!("ROC · {name}"), &curves)?));
        }
    }
    if !any_roc {
        let _ = writeln!(h, "<p class=\"note\">n/a: {}.</p>", roc_missing_reason(run));
    }
    h.push_str("</div>\n");

    // Score histograms per label, per config (pooled over datasets).
    h.push_str("<h3>Score histograms per label</h3>\n<div class=\"plots\">\n");
    let mut any_hist = false;
    for c in &run.configs {
        let mut per_label: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for l in by_config(&c.name) {
            if let Some(s) = l.score {
                per_label
                    .entry(l.label.name())
                    .or_default()
                    .push(f64::from(s));
            }
        }
        if per_label.is_empty() {
            continue;
        }
        any_hist = true;
        let series: Vec<(String, Vec<f64>)> = per_label
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        h.push_str(&figure(&plots::score_histograms(
            &format!("Scores · {}", c.name),
            &series,
        )?));
    }
    if !any_hist {
        h.push_str("<p class=\"note\">n/a: no layer of any configuration yields a score.</p>\n");
    }
    h.push_str("</div>\n");

    // Heatmap: attack category × layer detection rate, per config.
    h.push_str(
        "<h3>Attack category × layer detection rate</h3>\n<p class=\"note\">Share of the \
         attacks of each category that each layer flagged on its own (its own action not \
         ALLOW); <code>(final)</code> is the pipeline's verdict.</p>\n<div class=\"plots\">\n",
    );
    let mut any_heat = false;
    for c in &run.configs {
        let logs = by_config(&c.name);
        let attacks: Vec<&&EvalLogRecord> = logs.iter().filter(|l| l.attack).collect();
        if attacks.is_empty() {
            continue;
        }
        any_heat = true;
        let mut cols: Vec<String> = c.layers.clone();
        cols.push(FINAL_COLUMN.to_string());
        let mut counts: BTreeMap<String, (u64, Vec<u64>)> = BTreeMap::new();
        for l in attacks {
            let cat = l
                .category
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "(none)".into());
            let e = counts
                .entry(cat)
                .or_insert_with(|| (0, vec![0; cols.len()]));
            e.0 += 1;
            for (j, col) in cols.iter().enumerate() {
                let hit = if col == FINAL_COLUMN {
                    l.action != rampart_core::Action::Allow
                } else {
                    l.layers
                        .iter()
                        .any(|x| x.layer == *col && x.action != rampart_core::Action::Allow)
                };
                if hit {
                    e.1[j] += 1;
                }
            }
        }
        let rows: Vec<String> = counts
            .iter()
            .map(|(k, (n, _))| format!("{k} (n={n})"))
            .collect();
        let cells: Vec<Vec<Option<f64>>> = counts
            .values()
            .map(|(n, hits)| {
                hits.iter()
                    .map(|&x| (*n > 0).then(|| x as f64 / *n as f64))
                    .collect()
            })
            .collect();
        h.push_str(&figure(&plots::heatmap(
            &format!("Detection rate · {}", c.name),
            &rows,
            &cols,
            &cells,
        )?));
    }
    if !any_heat {
        h.push_str("<p class=\"note\">n/a: no attack prompts in this run.</p>\n");
    }
    h.push_str("</div>\n");

    // Latency distribution.
    h.push_str("<h3>Latency distribution</h3>\n<div class=\"plots\">\n");
    let series: Vec<(String, Vec<u64>)> = run
        .configs
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                by_config(&c.name).iter().map(|l| l.elapsed_us).collect(),
            )
        })
        .collect();
    h.push_str(&figure(&plots::latency("Whole-scan latency", &series)?));
    h.push_str("</div>\n");
    Ok(h)
}
