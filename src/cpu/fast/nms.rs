//! FAST's non-maximum suppression, row by row behind the scan (`cv::FAST`'s 3x3 rule: a
//! corner is kept when its score is strictly above all 8 neighbours').

use super::corner;
use crate::select::Corner;

/// The score rows and x-lists of FAST's suppression (`Nms`), kept between calls (a
/// frame's levels and the next frame's) so that a scan allocates nothing once they have
/// grown.
#[derive(Default)]
pub struct FastScratch {
    scores: [Vec<u8>; 3],
    xs: [Vec<usize>; 3],
}

/// Non-maximum suppression over a ring of 3 score rows: slot `y % 3` holds row y's scores
/// (0 = no corner) and the x of its corners.
pub(super) struct Nms<'a> {
    scores: &'a mut [Vec<u8>; 3],
    xs: &'a mut [Vec<usize>; 3],
    /// The first row scanned (the one above it counts as empty).
    first: usize,
    /// The last row opened (rows up to `open - 1` are complete).
    open: usize,
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
        let FastScratch { scores, xs } = scratch;
        for (row, xs) in scores.iter_mut().zip(xs.iter_mut()) {
            // A ring left by an earlier scan holds scores at its x-lists only.
            for &x in xs.iter() {
                row[x] = 0;
            }
            xs.clear();
            row.resize(width, 0);
        }
        Nms {
            scores,
            xs,
            first,
            open: first - 1,
            out,
        }
    }

    /// A corner of the scan (rows in order, x rising within a row).
    #[inline]
    pub(super) fn push(&mut self, x: usize, y: usize, score: u8) {
        self.open_to(y);
        self.scores[y % 3][x] = score;
        self.xs[y % 3].push(x);
    }

    /// Appends the kept corners, once every row before `end` was scanned: two more (empty)
    /// rows let the last one go through the suppression.
    pub(super) fn finish(mut self, end: usize) {
        self.open_to(end + 1);
    }

    /// Opens rows `open + 1 ..= to`. Opening row r means r - 1 is complete, so row r - 2 is
    /// suppressed first, then r's slot (row r - 3's) is cleared.
    fn open_to(&mut self, to: usize) {
        while self.open < to {
            self.open += 1;
            let r = self.open;
            if r >= self.first + 2 {
                self.suppress(r - 2);
            }
            let slot = r % 3;
            for &x in &self.xs[slot] {
                self.scores[slot][x] = 0;
            }
            self.xs[slot].clear();
        }
    }

    /// Keeps the corners of row y strictly above all 8 neighbours.
    fn suppress(&mut self, y: usize) {
        let (above, mid, below) = (
            &self.scores[(y + 2) % 3],
            &self.scores[y % 3],
            &self.scores[(y + 1) % 3],
        );
        for &x in &self.xs[y % 3] {
            let s = mid[x];
            let beats = |r: &[u8]| s > r[x - 1] && s > r[x] && s > r[x + 1];
            if s > mid[x - 1] && s > mid[x + 1] && beats(above) && beats(below) {
                self.out.push(corner(x, y, s));
            }
        }
    }
}
