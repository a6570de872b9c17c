//! goodFeaturesToTrack's candidates in its order, sorted only as far as they are read (at
//! 1080p there are tens of thousands of candidates and a VINS frame wants a few).

/// A candidate as one sort key: its value's bits above its pixel index. The values are
/// positive (above the quality threshold), so their bits order as the floats do, and the key
/// orders as goodFeaturesToTrack does, reversed: value descending, then the later pixel
/// first (a strict total order: indices are unique). One integer compare instead of a float
/// compare and a tie-break: the new scene's thousands of candidates sort ~2x faster.
pub(super) fn key(value_bits: u32, index: u32) -> u64 {
    (u64::from(value_bits) << 32) | u64::from(index)
}

/// The candidates' keys ([`key`]) in goodFeaturesToTrack's order, yielding their pixel
/// indices; the slice is sorted a chunk at a time as it is read (the chunk's members picked
/// by `select_nth_unstable_by`, then sorted; each chunk twice the last).
pub(super) struct LazySorted<'a> {
    v: &'a mut [u64],
    pos: usize,
    sorted_end: usize,
    chunk: usize,
}

impl<'a> LazySorted<'a> {
    pub(super) fn new(v: &'a mut [u64], first_chunk: usize) -> Self {
        LazySorted {
            v,
            pos: 0,
            sorted_end: 0,
            chunk: first_chunk.max(1),
        }
    }

    fn order(a: &u64, b: &u64) -> std::cmp::Ordering {
        b.cmp(a)
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
        Some(self.v[self.pos - 1] as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::{key, LazySorted};

    /// goodFeaturesToTrack's order as the CPU reference states it: value descending
    /// (`total_cmp`), then the later pixel first.
    fn reference(a: &(u32, u32), b: &(u32, u32)) -> std::cmp::Ordering {
        f32::from_bits(b.0)
            .total_cmp(&f32::from_bits(a.0))
            .then(b.1.cmp(&a.1))
    }

    #[test]
    fn lazy_sort_yields_the_reference_order_with_any_chunk() {
        let mut s = 0x9e37_79b9u32;
        let v: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                // Few distinct values, so that ties go to the index; positive floats from
                // the smallest subnormal to the largest finite, as the threshold lets by.
                let v = match s >> 29 {
                    0 => f32::from_bits(1),
                    1 => f32::MAX,
                    2 => 1e-30,
                    k => k as f32 * 0.37,
                };
                (v.to_bits(), i * 7 % 5003)
            })
            .collect();
        let mut full = v.clone();
        full.sort_by(reference);
        let want: Vec<u32> = full.iter().map(|c| c.1).collect();
        let keys: Vec<u64> = v.iter().map(|&(b, i)| key(b, i)).collect();
        for chunk in [1, 3, 256, 4999, 5000, 9000] {
            let mut w = keys.clone();
            let got: Vec<u32> = LazySorted::new(&mut w, chunk).collect();
            assert_eq!(got, want, "chunk {chunk}");
            let mut w = keys.clone();
            let head: Vec<u32> = LazySorted::new(&mut w, chunk).take(10).collect();
            assert_eq!(head, want[..10], "chunk {chunk}");
        }
    }
}
