//! The PromptGuard validation sets convert with their fine labels and layers, from the copy
//! vendored in the repository (datasets/promptguard).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use rampart_core::Role;
use rampart_datasets::{Catalog, FetchOptions, Label, fetch, read_jsonl};
use rampart_fetch::{Downloader, FetchError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

struct Offline;

impl Downloader for Offline {
    fn pip_download(&self, p: &str, _: &str, _: &Path) -> Result<(), FetchError> {
        panic!("no pip in tests ({p})")
    }
    fn http_get(&self, url: &str, _: &Path) -> Result<(), FetchError> {
        panic!("no network in tests ({url})")
    }
}

fn promptguard_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/promptguard")
}

fn label_counts(
    name: &str,
    dir: &Path,
    data: &Path,
) -> (BTreeMap<Label, usize>, Vec<rampart_datasets::Record>) {
    let cat = Catalog::builtin().unwrap();
    let opts = FetchOptions {
        data_dir: data.to_path_buf(),
        force: false,
        local_dir: Some(dir.to_path_buf()),
    };
    let r = fetch(cat.get(name).unwrap(), cat.version, &opts, &Offline).unwrap();
    assert!(r.skipped.is_empty(), "{name}: {:?}", r.errors);
    assert!(r.warnings.is_empty(), "{name}: {:?}", r.warnings);
    let (recs, errs) = read_jsonl(&data.join(format!("{name}.jsonl"))).unwrap();
    assert!(errs.is_empty());
    let mut counts = BTreeMap::new();
    for rec in &recs {
        *counts.entry(rec.label).or_default() += 1;
    }
    (counts, recs)
}

#[test]
fn promptguard_sets_keep_labels_and_layers() {
    let dir = promptguard_dir();
    let data = tempfile::tempdir().unwrap();

    let (counts, recs) = label_counts("promptguard_benign_malicious", &dir, data.path());
    assert_eq!(
        counts,
        BTreeMap::from([(Label::Manipulative, 265), (Label::Reciprocal, 235)])
    );
    assert!(
        recs.iter()
            .all(|r| r.text.is_some() && r.segments.is_none())
    );

    let (counts, recs) = label_counts("promptguard_extractive", &dir, data.path());
    assert_eq!(counts, BTreeMap::from([(Label::Extractive, 80)]));
    for r in &recs {
        let segs = r.segments.as_ref().unwrap();
        assert_eq!(segs.len(), 2, "{}", r.id);
        assert_eq!((segs[0].role, segs[1].role), (Role::System, Role::User));
        assert!(!segs[0].text.is_empty() && !segs[1].text.is_empty());
        assert!(r.text.is_none());
        assert!(r.category.is_some());
    }

    let (counts, recs) = label_counts("promptguard_or_bench", &dir, data.path());
    assert_eq!(
        counts,
        BTreeMap::from([(Label::Borderline, 5), (Label::Reciprocal, 95)])
    );
    assert!(recs.iter().all(|r| r.category.is_some()));

    // 680 in all; the four fine labels map to the documented binary truth.
    let all: usize = [
        "promptguard_benign_malicious",
        "promptguard_extractive",
        "promptguard_or_bench",
    ]
    .iter()
    .map(|n| {
        read_jsonl(&data.path().join(format!("{n}.jsonl")))
            .unwrap()
            .0
            .len()
    })
    .sum();
    assert_eq!(all, 680);
    assert!(Label::Manipulative.is_attack() && Label::Extractive.is_attack());
    assert!(!Label::Reciprocal.is_attack() && !Label::Borderline.is_attack());
}
