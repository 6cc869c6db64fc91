//! Invariants of the relational model over arbitrary triples.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rampart_relational::ModelParams;
use rampart_relational::model::{balance, judge};
use rampart_relational::{
    LayerAssessment, Neutrosophic, PromptLayer, RelationalLabel, TrustViolation, ViolationKind,
};

fn triple() -> impl Strategy<Value = Neutrosophic> {
    (0.0..=1.0f64, 0.0..=1.0f64).prop_map(|(f, i)| Neutrosophic::from_evidence(f, i))
}

fn layers() -> impl Strategy<Value = Vec<LayerAssessment>> {
    (
        proptest::option::of(triple()),
        proptest::option::of(triple()),
        triple(),
    )
        .prop_map(|(s, a, u)| {
            [
                (PromptLayer::System, s),
                (PromptLayer::Application, a),
                (PromptLayer::User, Some(u)),
            ]
            .into_iter()
            .filter_map(|(layer, v)| {
                v.map(|value| LayerAssessment {
                    layer,
                    segments: vec![0],
                    bytes: 10,
                    value,
                    evidence: vec![],
                    reasoning: None,
                })
            })
            .collect()
        })
}

proptest! {
    #[test]
    fn balance_stays_in_range(l in layers()) {
        let b = balance(&l, &[], &ModelParams::default());
        prop_assert!((-1.0..=1.0).contains(&b));
    }

    #[test]
    fn a_violation_is_never_reciprocal_or_borderline(l in layers()) {
        let v = [TrustViolation { kind: ViolationKind::RoleConfusion, layer: PromptLayer::User, evidence: vec![] }];
        let j = judge(&l, &v, &ModelParams::default());
        prop_assert!(j.label.is_attack(), "{:?}", j);
        if l.len() > 1 {
            prop_assert_eq!(j.label, RelationalLabel::Extractive);
        }
    }

    #[test]
    fn truth_turned_falsehood_never_raises_the_balance(l in layers(), share in 0.0..=1.0f64) {
        // Moving belief from truth to falsehood (indeterminacy unchanged) in the user layer.
        let p = ModelParams::default();
        let before = balance(&l, &[], &p);
        let mut worse = l.clone();
        let last = worse.len() - 1;
        let v = worse[last].value;
        let d = v.truth * share;
        worse[last].value = Neutrosophic::checked(v.truth - d, v.indeterminacy, v.falsehood + d).unwrap();
        prop_assert!(balance(&worse, &[], &p) <= before + 1e-12);
    }

    #[test]
    fn one_layer_is_never_extractive_without_a_deep_deficit(u in triple()) {
        let l = vec![LayerAssessment { layer: PromptLayer::User, segments: vec![0], bytes: 1, value: u, evidence: vec![], reasoning: None }];
        let j = judge(&l, &[], &ModelParams::default());
        if j.label == RelationalLabel::Extractive {
            prop_assert!(j.balance < -0.3);
        }
    }
}
