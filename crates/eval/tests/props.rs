//! Invariants of the metrics on arbitrary scored sets.

use proptest::prelude::*;
use rampart_eval::metrics::{roc_auc, roc_curve, tpr_at_fpr};

fn scored() -> impl Strategy<Value = Vec<(f64, bool)>> {
    // Few distinct scores so that ties are frequent.
    prop::collection::vec(
        ((0u8..6).prop_map(|s| f64::from(s) / 5.0), any::<bool>()),
        0..40,
    )
}

proptest! {
    #[test]
    fn auc_is_a_probability_and_flips_with_the_scores(s in scored()) {
        if let Some(a) = roc_auc(&s) {
            prop_assert!((0.0..=1.0).contains(&a));
            let flipped: Vec<(f64, bool)> = s.iter().map(|&(x, l)| (-x, l)).collect();
            let b = roc_auc(&flipped).unwrap();
            prop_assert!((a + b - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn roc_curve_is_monotone_and_ends_at_one(s in scored()) {
        let c = roc_curve(&s);
        if let Some(last) = c.last() {
            prop_assert_eq!((last.fpr, last.tpr), (1.0, 1.0));
            for w in c.windows(2) {
                prop_assert!(w[0].fpr <= w[1].fpr && w[0].tpr <= w[1].tpr);
                prop_assert!(w[0].threshold > w[1].threshold);
            }
        }
    }

    #[test]
    fn tpr_at_fpr_never_exceeds_the_bound(s in scored(), bound in 0.0f64..1.0) {
        if let Some(p) = tpr_at_fpr(&s, bound) {
            prop_assert!(p.fpr <= bound);
            // Flagging by its threshold reproduces its rates.
            let pos = s.iter().filter(|x| x.1).count() as f64;
            let neg = s.len() as f64 - pos;
            let tp = s.iter().filter(|x| x.1 && x.0 >= p.threshold).count() as f64;
            let fp = s.iter().filter(|x| !x.1 && x.0 >= p.threshold).count() as f64;
            prop_assert!((tp / pos - p.tpr).abs() < 1e-12);
            prop_assert!((fp / neg - p.fpr).abs() < 1e-12);
        }
    }
}
