//! Trains the fabricated-agreement model on the train split of
//! `datasets/history_claims_v1.jsonl`, prints the cross-validation and test figures, and
//! writes the model.
//!
//! ```text
//! cargo run -p rampart-conversation --example train_agreement -- \
//!     --out crates/conversation/models/agreement_v1.bin
//! ```
//!
//! Options: `--data PATH` (default: the set in the repository), `--out PATH` (default: print
//! the figures only).

use rampart_conversation::{
    AgreementDetector, AgreementTrainOptions, ClaimSplit, Confusion, HISTORY_PACK_ORIGIN,
    HISTORY_PACK_SRC, parse_claims, train_agreement,
};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut data =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/history_claims_v1.jsonl");
    let mut out: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--data" => data = args.next().ok_or("--data needs a path")?.into(),
            "--out" => out = Some(args.next().ok_or("--out needs a path")?.into()),
            other => return Err(format!("unknown argument {other:?} (--data, --out)").into()),
        }
    }
    let src =
        std::fs::read_to_string(&data).map_err(|e| format!("reading {}: {e}", data.display()))?;
    let records = parse_claims(&src)?;
    let count = |split: ClaimSplit, attack: bool| {
        records
            .iter()
            .filter(|r| {
                r.split == split && (r.label == rampart_conversation::ClaimLabel::Attack) == attack
            })
            .count()
    };
    println!(
        "data: {} (train {} attack / {} benign, test {} attack / {} benign)",
        data.display(),
        count(ClaimSplit::Train, true),
        count(ClaimSplit::Train, false),
        count(ClaimSplit::Test, true),
        count(ClaimSplit::Test, false)
    );

    let opts = AgreementTrainOptions::default();
    let trained = train_agreement(&records, &opts)?;
    let h = trained.model.header();
    let cv = &trained.cross_validation;
    println!(
        "train, {}-fold out-of-fold: AUC {:.4}, TPR {:.4}, FPR {:.4} at threshold {:.4} \
         (target FPR {}), calibration a = {:.4}, b = {:.4}",
        opts.folds,
        cv.auc,
        cv.tpr,
        cv.fpr,
        h.threshold,
        opts.target_fpr,
        h.calibration.a,
        h.calibration.b
    );

    let detector =
        AgreementDetector::new(HISTORY_PACK_SRC, HISTORY_PACK_ORIGIN, trained.model.clone())?;
    let test: Vec<_> = records
        .iter()
        .filter(|r| r.split == ClaimSplit::Test)
        .collect();
    let report = detector.evaluate(test.iter().copied());
    println!(
        "test ({} records), classifier AUC {:.4}",
        test.len(),
        report.auc
    );
    let line = |name: &str, c: &Confusion| {
        println!(
            "  {name:<13} precision {:.4}  recall {:.4}  FPR {:.4}  (tp {} fp {} fn {} tn {})",
            c.precision(),
            c.recall(),
            c.fpr(),
            c.tp,
            c.fp,
            c.fn_,
            c.tn
        );
    };
    line("classifier", &report.classifier);
    line("strong rules", &report.strong_rules);
    line("fires", &report.fires);

    if let Some(path) = out {
        let bytes = trained.model.to_bytes();
        std::fs::write(&path, &bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!(
            "wrote {} ({} bytes, blake3 {})",
            path.display(),
            bytes.len(),
            blake3::hash(&bytes)
        );
    }
    Ok(())
}
