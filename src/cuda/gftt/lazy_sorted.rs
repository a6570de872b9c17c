//! goodFeaturesToTrack's candidates in its order, sorted only as far as they are read (at
//! 1080p there are tens of thousands of candidates and a VINS frame wants a few).

/// The candidates (value bits, pixel index) in goodFeaturesToTrack's order, value descending
/// then the later pixel first (a strict total order: indices are unique), yielding their
/// indices; the slice is sorted a chunk at a time as it is read (the chunk's members picked
/// by `select_nth_unstable_by`, then sorted; each chunk twice the last).
pub(super) struct LazySorted<'a> {
    v: &'a mut [(u32, u32)],
    pos: usize,
    sorted_end: usize,
    chunk: usize,
}

impl<'a> LazySorted<'a> {
    pub(super) fn new(v: &'a mut [(u32, u32)], first_chunk: usize) -> Self {
        LazySorted {
            v,
            pos: 0,
            sorted_end: 0,
            chunk: first_chunk.max(1),
        }
    }

    fn order(a: &(u32, u32), b: &(u32, u32)) -> std::cmp::Ordering {
        f32::from_bits(b.0)
            .total_cmp(&f32::from_bits(a.0))
            .then(b.1.cmp(&a.1))
    }
}

impl Iterator for LazySorted<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.pos == self.sorted_end {
            let rest = &mut self.v[self.pos..];
            if rest.is_empty() {
                return None;
            }
            let k = self.chunk.min(rest.len());
            if k < rest.len() {
                rest.select_nth_unstable_by(k - 1, Self::order);
            }
            rest[..k].sort_unstable_by(Self::order);
            self.sorted_end = self.pos + k;
            self.chunk = self.chunk.saturating_mul(2);
        }
        self.pos += 1;
        Some(self.v[self.pos - 1].1)
    }
}

#[cfg(test)]
mod tests {
    use super::LazySorted;

    #[test]
    fn lazy_sort_yields_the_full_sort_in_order_with_any_chunk() {
        let mut s = 0x9e37_79b9u32;
        let v: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // Few distinct values, so that ties go to the index.
                ((1.0f32 + (s >> 28) as f32).to_bits(), i * 7 % 5003)
            })
            .collect();
        let mut full = v.clone();
        full.sort_by(LazySorted::order);
        let want: Vec<u32> = full.iter().map(|c| c.1).collect();
        for chunk in [1, 3, 256, 4999, 5000, 9000] {
            let mut w = v.clone();
            let got: Vec<u32> = LazySorted::new(&mut w, chunk).collect();
            assert_eq!(got, want, "chunk {chunk}");
            let mut w = v.clone();
            let head: Vec<u32> = LazySorted::new(&mut w, chunk).take(10).collect();
            assert_eq!(head, want[..10], "chunk {chunk}");
        }
    }
}
