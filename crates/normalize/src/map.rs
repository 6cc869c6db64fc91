//! Offset maps from a view's bytes back to the original input's bytes.
//!
//! A map is a sorted list of segments. Each segment covers a byte range of the view text
//! (from its `view_start` up to the next segment's start) and a byte range of the original.
//! A *linear* segment maps character for character, every character on both sides being
//! `width` bytes wide (an ASCII run, a run of two-byte Cyrillic letters that were only
//! lower-cased, …), so a sub-range maps to the matching sub-range. A *non-linear* segment
//! maps any byte in it to its whole original range (a decoded base64 blob, a ligature,
//! a collapsed whitespace run …). Unchanged text therefore costs one segment per run of
//! equally wide characters, and every change costs one segment.

use std::ops::Range;

/// One run of the map. `width == 0` means non-linear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    view_start: usize,
    orig_start: usize,
    orig_end: usize,
    width: u8,
}

/// Maps byte ranges of a view's text to byte ranges of the original input.
///
/// Built with [`OffsetMapBuilder`], [`OffsetMap::identity`] or [`OffsetMap::for_text`];
/// maps of successive transformations are chained with [`OffsetMap::compose`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetMap {
    segs: Vec<Seg>,
    view_len: usize,
    original_len: usize,
}

impl OffsetMap {
    /// The identity map of a byte-exact copy of `len` bytes, treating every byte as one
    /// character. Use [`OffsetMap::for_text`] for text that may contain non-ASCII characters,
    /// so that mapped ranges stay on character boundaries.
    pub fn identity(len: usize) -> Self {
        let mut b = OffsetMapBuilder::new(len);
        b.linear(0, len, 1);
        b.finish()
    }

    /// The identity map of `text` (a view that is the original, byte for byte). Mapped ranges
    /// are widened to `text`'s character boundaries.
    pub fn for_text(text: &str) -> Self {
        let mut b = OffsetMapBuilder::new(text.len());
        b.copy(0, text);
        b.finish()
    }

    /// Length in bytes of the view text this map covers.
    pub fn view_len(&self) -> usize {
        self.view_len
    }

    /// Length in bytes of the original input.
    pub fn original_len(&self) -> usize {
        self.original_len
    }

    /// Number of segments (a measure of how much the view differs from the original).
    pub fn segment_count(&self) -> usize {
        self.segs.len()
    }

    /// Maps a byte range of the view to the byte range of the original it came from.
    ///
    /// The result always lies within `0..original_len`, starts and ends on character
    /// boundaries of the original (given maps built from `&str` offsets) and is never empty
    /// when the original is not. Out-of-range or empty input ranges are clamped: an empty
    /// range maps like the one byte at its position.
    pub fn to_original(&self, range: Range<usize>) -> Range<usize> {
        let (s, e) = match self.clamp(range) {
            Ok(se) => se,
            Err(r) => return r,
        };
        let (a0, a1) = self.map_byte(s);
        let (b0, b1) = self.map_byte(e - 1);
        self.span(a0, a1, b0, b1)
    }

    /// Clamps a view range to a non-empty one inside the view, or gives the answer for
    /// degenerate maps (empty original or view).
    fn clamp(&self, range: Range<usize>) -> Result<(usize, usize), Range<usize>> {
        if self.original_len == 0 {
            return Err(0..0);
        }
        if self.view_len == 0 || self.segs.is_empty() {
            return Err(0..self.original_len);
        }
        let mut s = range.start.min(self.view_len);
        let mut e = range.end.min(self.view_len).max(s);
        if s == e {
            if s == self.view_len {
                s -= 1;
            }
            e = s + 1;
        }
        Ok((s, e))
    }

    /// The original span of a range whose first and last bytes map to `a0..a1` and `b0..b1`.
    /// Min/max of both ends: views such as the reversed one map backwards.
    fn span(&self, a0: usize, a1: usize, b0: usize, b1: usize) -> Range<usize> {
        let start = a0.min(b0).min(self.original_len);
        let end = a1.max(b1).min(self.original_len);
        if start < end {
            start..end
        } else {
            // Only reachable with maps whose segments are inconsistent; stay safe.
            0..self.original_len
        }
    }

    /// [`OffsetMap::to_original`], remembering in `cache` the segment last used, so that
    /// walking a view in order (either direction) skips the binary searches.
    pub(crate) fn to_original_cached(
        &self,
        range: Range<usize>,
        cache: &mut usize,
    ) -> Range<usize> {
        let (s, e) = match self.clamp(range) {
            Ok(se) => se,
            Err(r) => return r,
        };
        let a_idx = self.seg_index_cached(s, cache);
        let (a0, a1) = self.map_byte_in(a_idx, s);
        let b_idx = self.seg_index_cached(e - 1, cache);
        let (b0, b1) = self.map_byte_in(b_idx, e - 1);
        self.span(a0, a1, b0, b1)
    }

    /// [`OffsetMap::seg_index`], trying the segment in `cache` and its neighbours first.
    fn seg_index_cached(&self, v: usize, cache: &mut usize) -> usize {
        let holds = |i: usize| {
            self.segs.get(i).is_some_and(|s| s.view_start <= v)
                && self.segs.get(i + 1).is_none_or(|s| s.view_start > v)
        };
        let h = *cache;
        let idx = if holds(h) {
            h
        } else if h > 0 && holds(h - 1) {
            h - 1
        } else if h.checked_add(1).is_some_and(holds) {
            h + 1
        } else {
            self.seg_index(v)
        };
        *cache = idx;
        idx
    }

    /// Maps one view byte to the original range of the character (or non-linear segment)
    /// holding it.
    fn map_byte(&self, v: usize) -> (usize, usize) {
        self.map_byte_in(self.seg_index(v), v)
    }

    /// [`OffsetMap::map_byte`] given the index of the segment holding `v`.
    fn map_byte_in(&self, idx: usize, v: usize) -> (usize, usize) {
        let Some(seg) = self.segs.get(idx) else {
            return (0, self.original_len);
        };
        if seg.width == 0 {
            return (seg.orig_start, seg.orig_end);
        }
        let w = usize::from(seg.width);
        let off = v.saturating_sub(seg.view_start) / w * w;
        let start = seg.orig_start.saturating_add(off).min(seg.orig_end);
        let end = start.saturating_add(w).min(seg.orig_end);
        if start < end {
            (start, end)
        } else {
            (seg.orig_start, seg.orig_end)
        }
    }

    /// Index of the segment containing view byte `v` (the last one starting at or before it).
    fn seg_index(&self, v: usize) -> usize {
        self.segs
            .partition_point(|s| s.view_start <= v)
            .saturating_sub(1)
    }

    /// End (exclusive) in the view of segment `i`.
    fn seg_view_end(&self, i: usize) -> usize {
        self.segs.get(i + 1).map_or(self.view_len, |s| s.view_start)
    }

    /// Chains two maps: `self` maps a view to an intermediate text, `inner` maps that
    /// intermediate text to the original. The result maps the view straight to the original.
    pub fn compose(&self, inner: &OffsetMap) -> OffsetMap {
        let mut b = OffsetMapBuilder::new(inner.original_len);
        for (i, seg) in self.segs.iter().enumerate() {
            let vs = seg.view_start;
            let ve = self.seg_view_end(i);
            if ve <= vs {
                continue;
            }
            if seg.width == 0 {
                let r = inner.to_original(seg.orig_start..seg.orig_end);
                b.replace(ve - vs, r);
                continue;
            }
            // Linear: walk the inner segments overlapping seg.orig_start..seg.orig_end.
            let (os, oe) = (seg.orig_start, seg.orig_end.min(seg.orig_start + (ve - vs)));
            let mut pos = os;
            let mut j = inner.seg_index(pos);
            while pos < oe {
                let Some(iseg) = inner.segs.get(j) else {
                    let r = inner.to_original(pos..oe);
                    b.replace(oe - pos, r);
                    break;
                };
                let iend = inner.seg_view_end(j).min(oe);
                if iend <= pos {
                    j += 1;
                    continue;
                }
                let piece = iend - pos;
                if iseg.width == seg.width && iseg.width != 0 {
                    let start = iseg.orig_start + (pos - iseg.view_start);
                    b.linear(start, piece, seg.width);
                } else {
                    b.replace(piece, inner.to_original(pos..iend));
                }
                pos = iend;
                j += 1;
            }
        }
        b.finish()
    }
}

/// Offset of the first non-ASCII byte of `bytes` at or after `i` (or the length).
fn next_non_ascii(bytes: &[u8], i: usize) -> usize {
    let mut pos = i;
    while let Some(block) = bytes.get(pos..bytes.len().min(pos + 64)) {
        if block.is_empty() {
            break;
        }
        let m = crate::decode::block_mask(block, |x| x >= 0x80);
        if m != 0 {
            return pos + m.trailing_zeros() as usize;
        }
        pos += block.len();
    }
    bytes.len()
}

/// Incrementally builds an [`OffsetMap`], appending view text left to right.
#[derive(Debug, Clone)]
pub struct OffsetMapBuilder {
    map: OffsetMap,
}

impl OffsetMapBuilder {
    /// A builder for a view of an original text `original_len` bytes long.
    pub fn new(original_len: usize) -> Self {
        Self {
            map: OffsetMap {
                segs: Vec::new(),
                view_len: 0,
                original_len,
            },
        }
    }

    /// Bytes of view text appended so far.
    pub fn view_len(&self) -> usize {
        self.map.view_len
    }

    /// Appends `len` view bytes that correspond character for character to
    /// `orig_start..orig_start + len`, every character on both sides `width` bytes wide.
    pub fn linear(&mut self, orig_start: usize, len: usize, width: u8) {
        if len == 0 {
            return;
        }
        let width = width.clamp(1, 4);
        let view_start = self.map.view_len;
        self.map.view_len += len;
        if let Some(last) = self.map.segs.last_mut()
            && last.width == width
            && last.orig_end == orig_start
        {
            last.orig_end = orig_start + len;
            return;
        }
        self.map.segs.push(Seg {
            view_start,
            orig_start,
            orig_end: orig_start + len,
            width,
        });
    }

    /// Appends `len` view bytes that as a whole came from `orig` (non-linear).
    pub fn replace(&mut self, len: usize, orig: Range<usize>) {
        if len == 0 {
            return;
        }
        let view_start = self.map.view_len;
        self.map.view_len += len;
        if let Some(last) = self.map.segs.last_mut()
            && last.width == 0
            && last.orig_start == orig.start
            && last.orig_end == orig.end
        {
            return;
        }
        self.map.segs.push(Seg {
            view_start,
            orig_start: orig.start,
            orig_end: orig.end.max(orig.start),
            width: 0,
        });
    }

    /// Appends `text`, an unchanged copy of the original starting at `orig_start`.
    pub fn copy(&mut self, orig_start: usize, text: &str) {
        if text.is_ascii() {
            self.linear(orig_start, text.len(), 1);
            return;
        }
        let bytes = text.as_bytes();
        let mut run_start = 0;
        let mut run_w = 0u8;
        let mut i = 0;
        while let Some(&lead) = bytes.get(i) {
            if lead < 0x80 && run_w == 1 {
                // Skip the rest of an ASCII stretch at once.
                i = next_non_ascii(bytes, i);
                continue;
            }
            // Width of the character starting at `i` (from its lead byte).
            let w = match lead {
                0..=0x7f => 1,
                0x80..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            if w != run_w {
                if i > run_start {
                    self.linear(orig_start + run_start, i - run_start, run_w);
                }
                run_start = i;
                run_w = w;
            }
            i += usize::from(w);
        }
        if text.len() > run_start {
            self.linear(orig_start + run_start, text.len() - run_start, run_w);
        }
    }

    /// Finishes the map.
    pub fn finish(self) -> OffsetMap {
        self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_maps_ranges_to_themselves() {
        let m = OffsetMap::identity(10);
        assert_eq!(m.to_original(2..5), 2..5);
        assert_eq!(m.to_original(8..100), 8..10);
        assert_eq!(m.to_original(20..30), 9..10);
        assert_eq!(m.segment_count(), 1);
    }

    #[test]
    fn for_text_snaps_to_char_boundaries() {
        let t = "aпр b";
        let m = OffsetMap::for_text(t);
        // byte 2 is inside 'п' (bytes 1..3)
        assert_eq!(m.to_original(2..3), 1..3);
        assert_eq!(m.to_original(0..2), 0..3);
    }

    #[test]
    fn empty_original_maps_to_empty() {
        let m = OffsetMap::identity(0);
        assert_eq!(m.to_original(0..5), 0..0);
    }

    use proptest::prelude::*;

    proptest! {
        /// `copy` (which skips ASCII stretches) builds the same map as one `linear` call per
        /// run of equally wide characters, and the cached lookup agrees with the plain one.
        #[test]
        fn copy_and_cached_lookup_match(s in "(\\PC|[a-z ]{1,80}){0,40}", at in 0usize..64) {
            let mut b = OffsetMapBuilder::new(s.len() + at);
            b.copy(at, &s);
            let m = b.finish();
            let mut r = OffsetMapBuilder::new(s.len() + at);
            for (i, c) in s.char_indices() {
                let w = c.len_utf8();
                r.linear(at + i, w, w as u8);
            }
            prop_assert_eq!(&m, &r.finish());
            let mut cache = 0;
            for (i, c) in s.char_indices().rev() {
                let range = i..i + c.len_utf8();
                prop_assert_eq!(m.to_original_cached(range.clone(), &mut cache), m.to_original(range));
            }
        }
    }

    #[test]
    fn compose_points_at_original() {
        // original "xx%41yy" → intermediate "xxAyy" → view "AYY" (say).
        let mut b = OffsetMapBuilder::new(7);
        b.linear(0, 2, 1);
        b.replace(1, 2..5);
        b.linear(5, 2, 1);
        let inner = b.finish();
        let mut b = OffsetMapBuilder::new(5);
        b.linear(2, 3, 1);
        let outer = b.finish();
        let m = outer.compose(&inner);
        assert_eq!(m.to_original(0..1), 2..5);
        assert_eq!(m.to_original(1..3), 5..7);
        assert_eq!(m.to_original(0..3), 2..7);
    }
}
