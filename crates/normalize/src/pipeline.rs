//! The normalization pipeline: builds all views of one input within the configured bounds.

use crate::decode::{self, Decoded};
use crate::fold;
use crate::map::OffsetMap;
use crate::{NormalizeConfig, Normalized, TransformKind, TransformRecord, View, ViewKind};
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
        self.views.len() + views <= self.max_views
            && self.total.saturating_add(bytes) <= self.budget
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
    for dec in [
        decode::url as Inline,
        decode::html,
        decode::unicode_escapes,
        decode::nato,
    ] {
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
        decode::html_comments(text),
        decode::quoted_fragments(text),
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
    let mut st = State::new(config, n);

    // Raw and folded views are always present.
    st.push(
        ViewKind::Raw,
        text.to_owned(),
        OffsetMap::for_text(text),
        Vec::new(),
    );
    let folded = fold::fold(text);
    st.transforms.extend(folded.transforms);
    st.push(ViewKind::Folded, folded.text, folded.map, Vec::new());

    let leet_src = collapsed_view(&mut st, text);
    leet_view(&mut st, leet_src);
    speculative_views(&mut st, text);
    decoded_views(&mut st, config, 0..n);

    Normalized {
        original_len: n,
        views: st.views,
        transforms: st.transforms,
    }
}

impl State {
    /// The empty state of a run on `n` bytes of input.
    fn new(config: &NormalizeConfig, n: usize) -> Self {
        let ratio = config.max_expansion_ratio;
        let by_ratio = if ratio.is_finite() && ratio > 0.0 {
            (ratio * n as f64) as usize
        } else {
            0
        };
        State {
            views: Vec::with_capacity(8),
            transforms: Vec::new(),
            total: 0,
            budget: by_ratio.max(config.expansion_floor),
            max_views: config.max_views,
            limit_hit: false,
        }
    }
}

/// Letter-spacing collapse, on a fold that keeps whitespace runs apart. Returns the index
/// of the view leetspeak decoding reads: the collapsed view when there is one, else the
/// folded view.
fn collapsed_view(st: &mut State, text: &str) -> usize {
    let mut leet_src = 1;
    if st
        .views
        .get(1)
        .is_some_and(|v| decode::has_letter_spacing(&v.text))
    {
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
    leet_src
}

/// Leetspeak, on the view at `leet_src`.
fn leet_view(st: &mut State, leet_src: usize) {
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
}

/// Speculative ROT13 and reversed views of the folded text, only when the text hints at
/// them (cheap token check), so ordinary prompts pay nothing; then the Caesar view.
fn speculative_views(st: &mut State, text: &str) {
    if let Some(folded) = st.views.get(1) {
        let (rot, rev) = speculative_hints(&folded.text, text);
        if rot {
            speculative_view(ViewKind::Rot13, st);
        }
        if rev {
            speculative_view(ViewKind::Reversed, st);
        }
        caesar_view(st);
    }
}

/// The ROT13 (`kind` [`ViewKind::Rot13`]) or reversed view of the folded view, unless it
/// reads the same.
fn speculative_view(kind: ViewKind, st: &mut State) {
    let Some(src) = st.views.get(1) else { return };
    let (t, m) = match kind {
        ViewKind::Rot13 => (decode::rot13(&src.text), src.map.clone()),
        _ => reversed_with_map(&src.text, &src.map),
    };
    if t == src.text {
        return;
    }
    let span = m.to_original(0..t.len());
    if st.fits(1, t.len()) {
        st.push(kind, t, m, Vec::new());
    } else {
        st.limit(span, 0);
    }
}

/// Caesar: only when the text names it, and only with a shift that makes words.
fn caesar_view(st: &mut State) {
    if let Some(src) = st.views.get(1)
        && (src.text.contains("caesar") || src.text.contains("shift"))
        && let Some(k) = decode::caesar_shift(&src.text)
    {
        let (t, m) = (decode::caesar(&src.text, k), src.map.clone());
        let span = m.to_original(0..t.len());
        if st.fits(1, t.len()) {
            st.push(ViewKind::Caesar, t, m, Vec::new());
        } else {
            st.limit(span, 0);
        }
    }
}

/// Decoding, breadth first from the raw view; `whole` is the span of the whole input.
fn decoded_views(st: &mut State, config: &NormalizeConfig, whole: Range<usize>) {
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    queue.push_back((0, 0));
    'outer: while let Some((idx, depth)) = queue.pop_front() {
        if st.limit_hit {
            break;
        }
        let Some(src) = st.views.get(idx) else {
            continue;
        };
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
            match add_decoded(st, cand, &whole, depth) {
                Added::Duplicate => {}
                Added::View(i) => queue.push_back((i, depth + 1)),
                Added::Full => break 'outer,
            }
        }
    }
}

/// What [`add_decoded`] did with a candidate.
enum Added {
    /// Its text is already a raw or decoded view.
    Duplicate,
    /// It became the decoded view at this index (and its folded view after it).
    View(usize),
    /// It did not fit in the bounds (the limit is recorded).
    Full,
}

/// Adds a candidate decoded at `depth + 1` as a decoded view and its folded view, with its
/// transforms and those of folding it.
fn add_decoded(st: &mut State, cand: Candidate, whole: &Range<usize>, depth: usize) -> Added {
    let dup = st
        .views
        .iter()
        .any(|v| matches!(v.kind, ViewKind::Raw | ViewKind::Decoded) && v.text == cand.text);
    if dup {
        return Added::Duplicate;
    }
    let span = cand
        .records
        .first()
        .map_or(whole.clone(), |r| r.span.clone());
    if !st.fits(2, cand.text.len()) {
        st.limit(span, depth + 1);
        return Added::Full;
    }
    let f = fold::fold(&cand.text);
    if !st.fits(2, cand.text.len().saturating_add(f.text.len())) {
        st.limit(span, depth + 1);
        return Added::Full;
    }
    st.transforms.extend(cand.records);
    for t in f.transforms {
        let span = cand.map.to_original(t.span);
        st.record(t.kind, t.count, span, depth + 1);
    }
    let fmap = f.map.compose(&cand.map);
    st.push(ViewKind::Decoded, cand.text, cand.map, cand.chain.clone());
    let index = st.views.len() - 1;
    st.push(ViewKind::DecodedFolded, f.text, fmap, cand.chain);
    Added::View(index)
}

/// ROT13 encodings of common English and injection words (three letters or more).
const ROT13_MARKERS: &[&str] = &[
    "gur",
    "naq",
    "lbh",
    "lbhe",
    "nyy",
    "guvf",
    "jvgu",
    "sbe",
    "ner",
    "abj",
    "gryy",
    "vtaber",
    "cerivbhf",
    "vafgehpgvbaf",
    "vafgehpgvba",
    "flfgrz",
    "cebzcg",
    "ehyrf",
    "erirny",
    "frperg",
    "cnffjbeq",
    "qvfertneq",
    "sbetrg",
    "bhgchg",
    "cevag",
];

/// Reversed common English and injection words (three letters or more).
const REVERSED_MARKERS: &[&str] = &[
    "eht",
    "dna",
    "uoy",
    "ruoy",
    "lla",
    "siht",
    "htiw",
    "rof",
    "era",
    "won",
    "llet",
    "erongi",
    "suoiverp",
    "snoitcurtsni",
    "noitcurtsni",
    "metsys",
    "tpmorp",
    "selur",
    "laever",
    "terces",
    "drowssap",
    "dragersid",
    "tegrof",
    "tuptuo",
    "tnirp",
];

/// Index of a two-letter prefix (`None` unless both bytes are ASCII letters).
const fn prefix_index(a: u8, b: u8) -> Option<usize> {
    if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() {
        Some(((a | 0x20) - b'a') as usize * 26 + ((b | 0x20) - b'a') as usize)
    } else {
        None
    }
}

/// For each two-letter prefix, the markers starting with it: bit `i` for `ROT13_MARKERS[i]`,
/// bit `32 + i` for `REVERSED_MARKERS[i]`. Only a filter; tokens are compared exactly.
static MARKER_PREFIX: [u64; 26 * 26] = {
    let mut t = [0u64; 26 * 26];
    let mut i = 0;
    while i < ROT13_MARKERS.len() {
        let m = ROT13_MARKERS[i].as_bytes();
        if let Some(p) = prefix_index(m[0], m[1]) {
            t[p] |= 1 << i;
        }
        i += 1;
    }
    let mut i = 0;
    while i < REVERSED_MARKERS.len() {
        let m = REVERSED_MARKERS[i].as_bytes();
        if let Some(p) = prefix_index(m[0], m[1]) {
            t[p] |= 1 << (32 + i);
        }
        i += 1;
    }
    t
};

/// Whether the folded text suggests ROT13 and/or reversed content: an explicit mention, a
/// right-to-left override in the original, or at least two distinct encoded common words.
fn speculative_hints(folded: &str, original: &str) -> (bool, bool) {
    let mut rot = folded.contains("rot")
        && (folded.contains("rot13") || folded.contains("rot-13") || folded.contains("rot 13"));
    let mut rev = folded.contains("backward")
        || folded.contains("revers")
        || folded.contains("right to left")
        // A right-to-left override or isolate around reversed text: with an isolate (RLI)
        // Latin letters still display in their stored, reversed order, but the payload is
        // the same reversed text.
        || original.contains(['\u{202e}', '\u{2067}']);
    if rot && rev {
        return (rot, rev);
    }
    let (mut rot_seen, mut rev_seen) = (0u32, 0u32);
    // Tokens are maximal runs of ASCII letters (non-ASCII bytes are never letters, so this
    // splits exactly like splitting on non-ASCII-alphabetic characters).
    let bytes = folded.as_bytes();
    let mut prev_letter = 0u64;
    for (blk, block) in bytes.chunks(64).enumerate() {
        let letters = crate::decode::block_mask(block, |x| x.is_ascii_alphabetic());
        // Token starts: letters not preceded by a letter.
        let mut starts = letters & !(letters << 1 | prev_letter);
        prev_letter = letters >> 63;
        while starts != 0 {
            let s = blk * 64 + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            let (Some(&a), Some(&b)) = (bytes.get(s), bytes.get(s + 1)) else {
                continue;
            };
            let Some(mut mask) = prefix_index(a, b).map(|p| MARKER_PREFIX[p]) else {
                continue;
            };
            if mask == 0 {
                continue;
            }
            let len = bytes
                .get(s..)
                .unwrap_or_default()
                .iter()
                .take(13)
                .take_while(|x| x.is_ascii_alphabetic())
                .count();
            if !(3..=12).contains(&len) {
                continue;
            }
            let tok = bytes.get(s..s + len).unwrap_or_default();
            while mask != 0 {
                let bit = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                if bit < 32 {
                    if ROT13_MARKERS.get(bit).is_some_and(|m| m.as_bytes() == tok) {
                        rot_seen |= 1 << bit;
                    }
                } else if REVERSED_MARKERS
                    .get(bit - 32)
                    .is_some_and(|m| m.as_bytes() == tok)
                {
                    rev_seen |= 1 << (bit - 32);
                }
            }
        }
    }
    rot |= rot_seen.count_ones() >= 2;
    rev |= rev_seen.count_ones() >= 2;
    (rot, rev)
}

/// `text` with its characters in reverse order, and a map from it to the original via
/// `map` (each character maps to where it came from, so spans stay exact).
fn reversed_with_map(text: &str, map: &OffsetMap) -> (String, OffsetMap) {
    let mut out = String::with_capacity(text.len());
    // Same as building the map of each character to its own span, then composing it with
    // `map` (every segment of that map is one character, mapped through `to_original`).
    let mut b = crate::map::OffsetMapBuilder::new(map.original_len());
    let mut cache = 0;
    for (i, c) in text.char_indices().rev() {
        out.push(c);
        let w = c.len_utf8();
        b.replace(w, map.to_original_cached(i..i + w, &mut cache));
    }
    (out, b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The previous `speculative_hints`, kept as a reference.
    fn hints_reference(folded: &str, original: &str) -> (bool, bool) {
        let mut rot =
            folded.contains("rot13") || folded.contains("rot-13") || folded.contains("rot 13");
        let mut rev = folded.contains("backward")
            || folded.contains("revers")
            || folded.contains("right to left")
            || original.contains(['\u{202e}', '\u{2067}']);
        if rot && rev {
            return (rot, rev);
        }
        let (mut rot_seen, mut rev_seen) = (0u32, 0u32);
        for tok in folded.split(|c: char| !c.is_ascii_alphabetic()) {
            if !(3..=12).contains(&tok.len()) {
                continue;
            }
            if let Some(i) = ROT13_MARKERS.iter().position(|m| *m == tok) {
                rot_seen |= 1 << i;
            }
            if let Some(i) = REVERSED_MARKERS.iter().position(|m| *m == tok) {
                rev_seen |= 1 << i;
            }
        }
        rot |= rot_seen.count_ones() >= 2;
        rev |= rev_seen.count_ones() >= 2;
        (rot, rev)
    }

    /// The previous `reversed_with_map`, kept as a reference.
    fn reversed_reference(text: &str, map: &OffsetMap) -> (String, OffsetMap) {
        let mut out = String::with_capacity(text.len());
        let mut b = crate::map::OffsetMapBuilder::new(text.len());
        for (i, c) in text.char_indices().rev() {
            out.push(c);
            b.replace(c.len_utf8(), i..i + c.len_utf8());
        }
        (out, b.finish().compose(map))
    }

    fn wordy() -> impl Strategy<Value = String> {
        let markers: Vec<&'static str> = ROT13_MARKERS
            .iter()
            .chain(REVERSED_MARKERS)
            .copied()
            .collect();
        let piece = prop_oneof![
            3 => proptest::sample::select(markers).prop_map(str::to_string),
            2 => "[a-zA-Z]{1,14}",
            2 => "[ .,1-]{1,2}",
            1 => Just("rot13 ".to_string()),
            1 => Just("\u{202e}".to_string()),
            1 => "\\PC{1,2}",
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    #[test]
    fn markers_fit_the_bit_sets() {
        assert!(ROT13_MARKERS.len() <= 32 && REVERSED_MARKERS.len() <= 32);
        for list in [ROT13_MARKERS, REVERSED_MARKERS] {
            for (i, m) in list.iter().enumerate() {
                assert!(!list[..i].contains(m), "duplicate marker {m}");
                assert!(m.bytes().all(|b| b.is_ascii_lowercase()) && m.len() >= 3);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn hints_match_reference(s in wordy()) {
            prop_assert_eq!(speculative_hints(&s, &s), hints_reference(&s, &s));
            let f = crate::fold::fold(&s).text;
            prop_assert_eq!(speculative_hints(&f, &s), hints_reference(&f, &s));
        }

        #[test]
        fn reversed_map_matches_reference(s in wordy()) {
            let f = crate::fold::fold(&s);
            let (t1, m1) = reversed_with_map(&f.text, &f.map);
            let (t2, m2) = reversed_reference(&f.text, &f.map);
            prop_assert_eq!(t1, t2);
            prop_assert_eq!(m1, m2);
        }
    }
}
