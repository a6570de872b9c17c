//! FAST's non-maximum suppression, row by row behind the scan (`cv::FAST`'s 3x3 rule: a
//! corner is kept when its score is strictly above all 8 neighbours'), and the ring of
//! score rows it runs on, which the per-cell suppression (`cpu::cells`) shares.

use super::corner;
use crate::select::Corner;

/// Three rows of scores behind a scan of rows in order: slot `y % 3` holds row y's scores
/// (0 = no corner) and the x of its corners. Opening a row completes the one above it, so
/// the row above that has all 8 neighbours known and goes through the caller's
/// suppression. Kept between scans (a frame's levels and the next frame's): a scan
/// allocates nothing once its rows have grown.
#[derive(Default)]
pub(crate) struct ScoreRing {
    scores: [Vec<u8>; 3],
    xs: [Vec<u32>; 3],
    /// The first row of the scan (the one above it counts as empty).
    first: usize,
    /// The last row opened (rows up to `open - 1` are complete).
    open: usize,
}

impl ScoreRing {
    /// Emptied for a scan of rows of `width` pixels from row `first` (at least 1) on.
    pub(crate) fn start(&mut self, width: usize, first: usize) {
        for (row, xs) in self.scores.iter_mut().zip(self.xs.iter_mut()) {
            // A ring left by an earlier scan holds scores at its x-lists only.
            for &x in xs.iter() {
                row[x as usize] = 0;
            }
            xs.clear();
            row.resize(width, 0);
        }
        self.first = first;
        self.open = first - 1;
    }

    /// A corner of the scan (rows in order, x rising within a row); rows it completes go
    /// through `suppress` first.
    #[inline]
    pub(crate) fn push(&mut self, x: usize, y: usize, s: u8, suppress: impl FnMut(&Self, usize)) {
        self.open_to(y, suppress);
        self.scores[y % 3][x] = s;
        self.xs[y % 3].push(x as u32);
    }

    /// Opens rows `open + 1 ..= to`. Opening row r means r - 1 is complete, so row r - 2
    /// goes through `suppress(self, r - 2)`, then r's slot (row r - 3's) is emptied.
    pub(crate) fn open_to(&mut self, to: usize, mut suppress: impl FnMut(&Self, usize)) {
        while self.open < to {
            self.open += 1;
            let r = self.open;
            if r >= self.first + 2 {
                suppress(self, r - 2);
            }
            let slot = r % 3;
            for &x in &self.xs[slot] {
                self.scores[slot][x as usize] = 0;
            }
            self.xs[slot].clear();
        }
    }

    /// Row y's corners' x, and the scores of rows y - 1, y and y + 1.
    pub(crate) fn around(&self, y: usize) -> (&[u32], [&[u8]; 3]) {
        let s = &self.scores;
        (
            &self.xs[y % 3],
            [&s[(y + 2) % 3], &s[y % 3], &s[(y + 1) % 3]],
        )
    }
}

/// The score rows of FAST's suppression (`Nms`), kept between calls.
#[derive(Default)]
pub struct FastScratch {
    ring: ScoreRing,
}

/// `cv::FAST`'s suppression over a [`ScoreRing`].
pub(super) struct Nms<'a> {
    ring: &'a mut ScoreRing,
    out: &'a mut Vec<Corner>,
}

impl<'a> Nms<'a> {
    /// Suppression of rows of `width` pixels from row `first` on (the row above it counts
    /// as empty), its corners appended to `out`, in `scratch`'s rows (emptied here).
    pub(super) fn new(
        width: usize,
        first: usize,
        scratch: &'a mut FastScratch,
        out: &'a mut Vec<Corner>,
    ) -> Self {
        scratch.ring.start(width, first);
        Nms {
            ring: &mut scratch.ring,
            out,
        }
    }

    /// A corner of the scan (rows in order, x rising within a row).
    #[inline]
    pub(super) fn push(&mut self, x: usize, y: usize, score: u8) {
        let out = &mut *self.out;
        self.ring
            .push(x, y, score, |ring, y| suppress(ring, y, out));
    }

    /// Appends the kept corners, once every row before `end` was scanned: two more (empty)
    /// rows let the last one go through the suppression.
    pub(super) fn finish(self, end: usize) {
        let out = self.out;
        self.ring.open_to(end + 1, |ring, y| suppress(ring, y, out));
    }
}

/// Keeps the corners of row y strictly above all 8 neighbours.
fn suppress(ring: &ScoreRing, y: usize, out: &mut Vec<Corner>) {
    let (xs, [above, mid, below]) = ring.around(y);
    for &x in xs {
        let x = x as usize;
        let s = mid[x];
        let beats = |r: &[u8]| s > r[x - 1] && s > r[x] && s > r[x + 1];
        if s > mid[x - 1] && s > mid[x + 1] && beats(above) && beats(below) {
            out.push(corner(x, y, s));
        }
    }
}
