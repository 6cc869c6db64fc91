//! The normalization pipeline: builds all views of one input within the configured bounds.

use crate::decode::{self, Decoded};
use crate::fold;
use crate::map::OffsetMap;
use crate::{
    NormalizeConfig, Normalized, TransformKind, TransformRecord, View, ViewKind,
};
use std::collections::VecDeque;
use std::ops::Range;

/// Mutable state of one run.
struct State {
    views: Vec<View>,
    transforms: Vec<TransformRecord>,
    total: usize,
    budget: usize,
    max_views: usize,
    limit_hit: bool,
}

impl State {
    fn record(&mut self, kind: TransformKind, count: usize, span: Range<usize>, depth: usize) {
        self.transforms.push(TransformRecord {
            kind,
            count,
            span,
            depth,
        });
    }

    /// Records the (single) `LimitReached` transform.
    fn limit(&mut self, span: Range<usize>, depth: usize) {
        if !self.limit_hit {
            self.limit_hit = true;
            self.record(TransformKind::LimitReached, 1, span, depth);
        }
    }

    /// Whether `views` more views with `bytes` more text fit in the bounds.
    fn fits(&self, views: usize, bytes: usize) -> bool {
        self.views.len() + views <= self.max_views && self.total.saturating_add(bytes) <= self.budget
    }

    fn push(&mut self, kind: ViewKind, text: String, map: OffsetMap, chain: Vec<TransformKind>) {
        self.total = self.total.saturating_add(text.len());
        self.views.push(View {
            kind,
            text,
            decode_chain: chain,
            map,
        });
    }
}

/// A decoded text waiting to become a view.
struct Candidate {
    text: String,
    /// Map to the original input.
    map: OffsetMap,
    chain: Vec<TransformKind>,
    records: Vec<TransformRecord>,
}

/// Runs every decoder on `text` (whose map to the original is `map`), producing at most one
/// inline-decoded text and one text per blob decoder.
fn decode_step(
    config: &NormalizeConfig,
    text: &str,
    map: &OffsetMap,
    chain: &[TransformKind],
    depth: usize,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    // Inline decoders, applied one after the other.
    let mut cur: Option<(String, OffsetMap)> = None;
    let mut kinds = Vec::new();
    let mut records = Vec::new();
    type Inline = fn(&str) -> Option<Decoded>;
    for dec in [decode::url as Inline, decode::html, decode::unicode_escapes] {
        let (cur_text, cur_map) = match &cur {
            Some((t, m)) => (t.as_str(), m),
            None => (text, map),
        };
        if let Some(d) = dec(cur_text) {
            let new_map = d.map.compose(cur_map);
            records.push(TransformRecord {
                kind: d.kind,
                count: d.count,
                span: cur_map.to_original(d.first_span.clone()),
                depth: depth + 1,
            });
            kinds.push(d.kind);
            cur = Some((d.text, new_map));
        }
    }
    if let Some((t, m)) = cur {
        let mut c = chain.to_vec();
        c.extend(kinds);
        out.push(Candidate {
            text: t,
            map: m,
            chain: c,
            records,
        });
    }
    let blobs = [
        decode::base64(text, config.min_base64_len),
        decode::hex(text, config.min_hex_len),
    ];
    for d in blobs.into_iter().flatten() {
        let mut c = chain.to_vec();
        c.push(d.kind);
        out.push(Candidate {
            records: vec![TransformRecord {
                kind: d.kind,
                count: d.count,
                span: map.to_original(d.first_span.clone()),
                depth: depth + 1,
            }],
            map: d.map.compose(map),
            text: d.text,
            chain: c,
        });
    }
    out
}

/// Normalizes `text` into views (see [`crate::Normalizer::normalize`]).
pub(crate) fn run(config: &NormalizeConfig, text: &str) -> Normalized {
    let n = text.len();
    let ratio = config.max_expansion_ratio;
    let by_ratio = if ratio.is_finite() && ratio > 0.0 {
        (ratio * n as f64) as usize
    } else {
        0
    };
    let mut st = State {
        views: Vec::with_capacity(8),
        transforms: Vec::new(),
        total: 0,
        budget: by_ratio.max(config.expansion_floor),
        max_views: config.max_views,
        limit_hit: false,
    };
    let whole = 0..n;

    // Raw and folded views are always present.
    st.push(ViewKind::Raw, text.to_owned(), OffsetMap::for_text(text), Vec::new());
    let folded = fold::fold(text);
    st.transforms.extend(folded.transforms);
    st.push(ViewKind::Folded, folded.text, folded.map, Vec::new());

    // Letter-spacing collapse, on a fold that keeps whitespace runs apart.
    let mut leet_src = 1;
    if st.views.get(1).is_some_and(|v| decode::has_letter_spacing(&v.text)) {
        let keep = fold::fold_with(text, false);
        if let Some(c) = decode::collapse_spacing(&keep.text) {
            let refold = fold::fold(&c.text);
            if st.views.get(1).is_some_and(|v| v.text != refold.text) {
                let span = keep.map.to_original(c.first_span.clone());
                st.record(TransformKind::SpacingCollapse, c.count, span.clone(), 0);
                if st.fits(1, refold.text.len()) {
                    let map = refold.map.compose(&c.map.compose(&keep.map));
                    st.push(ViewKind::Collapsed, refold.text, map, Vec::new());
                    leet_src = st.views.len() - 1;
                } else {
                    st.limit(span, 0);
                }
            }
        }
    }

    // Leetspeak, on the collapsed view when there is one.
    if let Some(src) = st.views.get(leet_src)
        && let Some(l) = decode::leet(&src.text)
    {
        let span = src.map.to_original(l.first_span.clone());
        let map = l.map.compose(&src.map);
        st.record(TransformKind::Leet, l.count, span.clone(), 0);
        if st.fits(1, l.text.len()) {
            st.push(ViewKind::Leet, l.text, map, Vec::new());
        } else {
            st.limit(span, 0);
        }
    }

    // Decoding, breadth first from the raw view.
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    queue.push_back((0, 0));
    'outer: while let Some((idx, depth)) = queue.pop_front() {
        if st.limit_hit {
            break;
        }
        let Some(src) = st.views.get(idx) else { continue };
        let cands = decode_step(config, &src.text, &src.map, &src.decode_chain, depth);
        if cands.is_empty() {
            continue;
        }
        let src_span = src.map.to_original(0..src.text.len());
        if depth >= config.max_decode_depth {
            st.limit(src_span, depth);
            break;
        }
        for cand in cands {
            let dup = st.views.iter().any(|v| {
                matches!(v.kind, ViewKind::Raw | ViewKind::Decoded) && v.text == cand.text
            });
            if dup {
                continue;
            }
            let span = cand.records.first().map_or(whole.clone(), |r| r.span.clone());
            if !st.fits(2, cand.text.len()) {
                st.limit(span, depth + 1);
                break 'outer;
            }
            let f = fold::fold(&cand.text);
            if !st.fits(2, cand.text.len().saturating_add(f.text.len())) {
                st.limit(span, depth + 1);
                break 'outer;
            }
            st.transforms.extend(cand.records);
            for t in f.transforms {
                let span = cand.map.to_original(t.span);
                st.record(t.kind, t.count, span, depth + 1);
            }
            let fmap = f.map.compose(&cand.map);
            st.push(ViewKind::Decoded, cand.text, cand.map, cand.chain.clone());
            queue.push_back((st.views.len() - 1, depth + 1));
            st.push(ViewKind::DecodedFolded, f.text, fmap, cand.chain);
        }
    }

    Normalized {
        original_len: n,
        views: st.views,
        transforms: st.transforms,
    }
}
