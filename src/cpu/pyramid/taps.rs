//! The pyramid's horizontal taps, made once per resolution from a [`AxisTable`]: the
//! form its horizontal passes read without clamping.

use super::AxisTable;

/// The horizontal taps in a form the inner loop can use without clamping: every pair reads
/// `row[ofs[d]]` and `row[ofs[d] + 1]`, with `ofs[d] + 1 < src width`. A tap on the last
/// sample (whose second sample is clamped to itself) becomes the pair ending there with
/// weights `(0, w0 + w1)`: the same products, so the same sums. A 1-pixel-wide source has
/// no pairs; it is read as `(row[0], row[0])`, which is exact for the same reason.
pub(super) struct HTaps {
    pub(super) ofs: Vec<u32>,
    pub(super) w0: Vec<u32>,
    pub(super) w1: Vec<u32>,
    /// `w0 | w1 << 16`, for `pmaddwd`.
    pub(super) wpack: Vec<u32>,
    /// The source is a single column (`ofs` are all 0 and `w1` all 0).
    pub(super) single: bool,
    /// Per group of 8 outputs: the first source byte of a 16-byte window holding all its
    /// pairs, or `u32::MAX` when they span more (or the window would pass the row's end).
    pub(super) win: Vec<u32>,
    /// Per group: the `pshufb` indices that spread its pairs from the window (the same
    /// 16 bytes in both 128-bit lanes) to `(p0, 0, p1, 0)` per output.
    pub(super) spread: Vec<[u8; 32]>,
}

impl HTaps {
    pub(super) fn new(t: &AxisTable, sw: usize) -> Self {
        // (An empty source has no taps: `check_tables` allows it only for an empty output.)
        let last = (sw as u32).saturating_sub(1);
        let single = sw == 1;
        let n = t.offsets.len();
        let mut h = HTaps {
            ofs: Vec::with_capacity(n),
            w0: Vec::with_capacity(n),
            w1: Vec::with_capacity(n),
            wpack: Vec::new(),
            single,
            win: Vec::new(),
            spread: Vec::new(),
        };
        for (&o, &[a0, a1]) in t.offsets.iter().zip(&t.weights) {
            let (a0, a1) = (a0 as u32, a1 as u32);
            if single {
                h.ofs.push(0);
                h.w0.push(a0 + a1);
                h.w1.push(0);
            } else if o >= last {
                h.ofs.push(last - 1);
                h.w0.push(0);
                h.w1.push(a0 + a1);
            } else {
                h.ofs.push(o);
                h.w0.push(a0);
                h.w1.push(a1);
            }
        }
        h.wpack = h.w0.iter().zip(&h.w1).map(|(&a, &b)| a | b << 16).collect();
        // Rows are read with 2 bytes past the source width (`resize_rows_avx2`).
        for g in h.ofs.chunks_exact(8) {
            let base = g[0];
            let fits = !single && g[7] + 2 - base <= 16 && base as usize + 16 <= sw + 2;
            let mut m = [0x80u8; 32];
            for (i, &o) in g.iter().enumerate() {
                m[4 * i] = (o - base) as u8;
                m[4 * i + 2] = (o - base + 1) as u8;
            }
            h.win.push(if fits { base } else { u32::MAX });
            h.spread.push(m);
        }
        h
    }
}
