//! Keypoint selection: per-level budget and spatial spread (CPU reference for
//! `kernels/select.cu`).
//!
//! Everything here is deterministic: equal responses are broken by position, `(y, x)`
//! ascending, so the GPU twin can reproduce the exact same set.

use std::cmp::Ordering;

use super::{fast, Corner};
use crate::config::{SelectConfig, Spread};
use crate::image::GrayImage;

/// ORB's split of `total` keypoints over `levels` levels (geometric in the scale), with
/// OpenCV's float arithmetic: `n_0 = total * (1 - f) / (1 - f^levels)`, `f = 1 / scale`,
/// `n_i = cvRound(n_0 * f^i)` for all but the last level, which gets the remainder.
pub fn features_per_level(total: usize, levels: usize, scale_factor: f32) -> Vec<usize> {
    if levels == 0 {
        return Vec::new();
    }
    // ORB: (float)(1.0 / scaleFactor), the float factor widened to double.
    let factor = (1.0 / scale_factor as f64) as f32;
    let mut desired =
        total as f32 * (1.0 - factor) / (1.0 - (factor as f64).powf(levels as f64) as f32);
    let mut out = Vec::with_capacity(levels);
    let mut sum = 0usize;
    for _ in 0..levels - 1 {
        // OpenCV rounds each level on its own, so many levels with a tiny budget can sum
        // to more than the total; cap at what is left so the frame budget always holds.
        // (Never binds for ORB-like settings: those reproduce OpenCV exactly.)
        let n = (desired.round_ties_even().max(0.0) as usize).min(total - sum);
        out.push(n);
        sum += n;
        desired *= factor;
    }
    out.push(total.saturating_sub(sum));
    out
}

/// Best first: response descending, then `(y, x)` ascending.
fn by_rank(a: &Corner, b: &Corner) -> Ordering {
    b.response
        .total_cmp(&a.response)
        .then(a.y.cmp(&b.y))
        .then(a.x.cmp(&b.x))
}

/// Keeps exactly the `n` best corners by response (all when there are fewer), ties at the
/// cut broken by `(y, x)` ascending; the kept corners end up best first.
///
/// OpenCV's `KeyPointsFilter::retainBest` instead keeps *every* corner tied with the n-th
/// response (so it may return more than `n`); see [`retain_best_with_ties`].
pub fn retain_best(corners: &mut Vec<Corner>, n: usize) {
    if corners.len() > n {
        if n > 0 {
            corners.select_nth_unstable_by(n - 1, by_rank);
        }
        corners.truncate(n);
    }
    corners.sort_unstable_by(by_rank);
}

/// OpenCV's `KeyPointsFilter::retainBest`: keeps every corner whose response is at least the
/// n-th best response (ties included, so possibly more than `n`). Still deterministic as a
/// set; the kept corners end up best first.
pub fn retain_best_with_ties(corners: &mut Vec<Corner>, n: usize) {
    if n == 0 {
        corners.clear();
        return;
    }
    corners.sort_unstable_by(by_rank);
    if corners.len() > n {
        let cut = corners[n - 1].response;
        let keep = n + corners[n..]
            .iter()
            .take_while(|c| c.response >= cut)
            .count();
        corners.truncate(keep);
    }
}

/// Keeps at most `n` corners, spread as configured (`width x height` is the level size):
///
/// - `None`: [`retain_best`].
/// - `Grid`: corners are bucketed into `cell_size` squares; round `r` offers every
///   cell's r-th best corner. Whole rounds are taken while they fit; the round that does not
///   fit contributes its best offers (by response, then `(y, x)`).
/// - `Quadtree`: ORB-SLAM3's `DistributeOctTree`, see [`quadtree`].
///
/// Output order: best first for `None`; raster order `(y, x)` for the spread modes.
pub fn select(
    corners: &mut Vec<Corner>,
    n: usize,
    cfg: &SelectConfig,
    width: usize,
    height: usize,
) {
    match cfg.spread {
        Spread::None => retain_best(corners, n),
        _ if corners.len() <= n => corners.sort_unstable_by_key(|c| (c.y, c.x)),
        Spread::Grid => grid(corners, n, cfg.cell_size.max(1) as usize),
        Spread::Quadtree => quadtree(corners, n, width, height),
    }
}

fn grid(corners: &mut Vec<Corner>, n: usize, cell: usize) {
    let key = |c: &Corner| (c.y as usize / cell, c.x as usize / cell);
    // Cells in raster order, each best first.
    corners.sort_unstable_by(|a, b| key(a).cmp(&key(b)).then(by_rank(a, b)));
    // Rank of each corner within its cell.
    let mut rank = vec![0usize; corners.len()];
    for i in 1..corners.len() {
        if key(&corners[i]) == key(&corners[i - 1]) {
            rank[i] = rank[i - 1] + 1;
        }
    }
    let mut order: Vec<usize> = (0..corners.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        rank[a]
            .cmp(&rank[b])
            .then(by_rank(&corners[a], &corners[b]))
    });
    order.truncate(n);
    let mut kept: Vec<Corner> = order.into_iter().map(|i| corners[i]).collect();
    kept.sort_unstable_by_key(|c| (c.y, c.x));
    *corners = kept;
}

/// A quadtree node: the half-open box `[x0, x1) x [y0, y1)` and the corners inside it.
struct Node {
    x0: u32,
    y0: u32,
    x1: u32,
    y1: u32,
    pts: Vec<Corner>,
}

impl Node {
    /// Splittable while it holds several corners and is larger than a pixel (corners are
    /// distinct pixels, so this always ends).
    fn splittable(&self) -> bool {
        self.pts.len() > 1 && (self.x1 - self.x0 > 1 || self.y1 - self.y0 > 1)
    }

    /// ORB-SLAM3's `DivideNode`: halves rounded up, empty children dropped.
    fn split(self) -> Vec<Node> {
        let mx = self.x0 + (self.x1 - self.x0).div_ceil(2);
        let my = self.y0 + (self.y1 - self.y0).div_ceil(2);
        let mut kids: Vec<Node> = [
            (self.x0, self.y0, mx, my),
            (mx, self.y0, self.x1, my),
            (self.x0, my, mx, self.y1),
            (mx, my, self.x1, self.y1),
        ]
        .into_iter()
        .map(|(x0, y0, x1, y1)| Node {
            x0,
            y0,
            x1,
            y1,
            pts: Vec::new(),
        })
        .collect();
        for c in self.pts {
            let i = (c.x >= mx) as usize + 2 * (c.y >= my) as usize;
            kids[i].pts.push(c);
        }
        kids.retain(|k| !k.pts.is_empty());
        kids
    }
}

/// ORB-SLAM3's `DistributeOctTree`, made deterministic and budget-exact:
///
/// 1. `round(w / h)` (at least 1) root nodes side by side over the level.
/// 2. Every splittable node is split, round after round, until there are at least `n` nodes
///    or nothing can be split. When a full round could overshoot `n` (`nodes + 3 *
///    splittable > n`), nodes are split one at a time, most corners first (ties: top-left
///    node first, where ORB-SLAM3 uses pointer order), stopping as soon as `n` is reached.
/// 3. Each node keeps its best corner (ties by `(y, x)`).
///
/// Differences from ORB-SLAM3: it also stops when a whole round left the node count
/// unchanged (all corners of each node in one child), which can end early; here the loop
/// only ends when nothing is splittable. A final split may leave up to `n + 3` nodes, which
/// ORB-SLAM3 keeps; here the best `n` of them are kept ([`retain_best`]).
pub fn quadtree(corners: &mut Vec<Corner>, n: usize, width: usize, height: usize) {
    if n == 0 || corners.is_empty() {
        corners.clear();
        return;
    }
    // The box must contain every corner, even if the caller's size is off.
    let w = (width as u32).max(corners.iter().map(|c| c.x + 1).max().unwrap_or(1));
    let h = (height as u32).max(corners.iter().map(|c| c.y + 1).max().unwrap_or(1));
    let n_roots = ((w as f32 / h as f32).round() as u32).clamp(1, w);
    let root_w = w as f32 / n_roots as f32;
    let bound = |i: u32| {
        if i == n_roots {
            w
        } else {
            (root_w * i as f32) as u32
        }
    };
    let mut nodes: Vec<Node> = (0..n_roots)
        .map(|i| Node {
            x0: bound(i),
            y0: 0,
            x1: bound(i + 1),
            y1: h,
            pts: Vec::new(),
        })
        .collect();
    for &c in corners.iter() {
        let mut i = ((c.x as f32 / root_w) as u32).min(n_roots - 1) as usize;
        // Float rounding of the boundaries: move to the node that really holds x.
        while c.x < nodes[i].x0 {
            i -= 1;
        }
        while c.x >= nodes[i].x1 {
            i += 1;
        }
        nodes[i].pts.push(c);
    }
    nodes.retain(|nd| !nd.pts.is_empty());

    let mut first_round = true;
    while nodes.len() < n {
        let split_count = nodes.iter().filter(|nd| nd.splittable()).count();
        if split_count == 0 {
            break;
        }
        if first_round || nodes.len() + 3 * split_count <= n {
            // A full round (ORB-SLAM3 always splits all roots once).
            nodes = nodes
                .into_iter()
                .flat_map(|nd| {
                    if nd.splittable() {
                        nd.split()
                    } else {
                        vec![nd]
                    }
                })
                .collect();
        } else {
            // One at a time, most corners first, until the budget is met.
            let mut order: Vec<usize> = (0..nodes.len())
                .filter(|&i| nodes[i].splittable())
                .collect();
            order.sort_by(|&a, &b| {
                let (na, nb) = (&nodes[a], &nodes[b]);
                nb.pts
                    .len()
                    .cmp(&na.pts.len())
                    .then((na.y0, na.x0).cmp(&(nb.y0, nb.x0)))
            });
            let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
            let mut count = slots.len();
            let mut added = Vec::new();
            for i in order {
                if count >= n {
                    break;
                }
                let kids = slots[i].take().expect("split once").split();
                count += kids.len() - 1;
                added.extend(kids);
            }
            nodes = slots.into_iter().flatten().chain(added).collect();
        }
        first_round = false;
    }

    let mut kept: Vec<Corner> = nodes
        .iter()
        .map(|nd| {
            *nd.pts
                .iter()
                .min_by(|a, b| by_rank(a, b))
                .expect("non-empty")
        })
        .collect();
    retain_best(&mut kept, n);
    kept.sort_unstable_by_key(|c| (c.y, c.x));
    *corners = kept;
}

/// The FAST windows of [`fast_in_cells`], `(x0, y0, x1, y1)` half-open, in raster order.
///
/// The detectable area is `[border, size - border)` (what the border filter keeps). As in
/// ORB-SLAM3 (`EDGE_THRESHOLD = border`), it is grown by FAST's 3 px margin to a span of
/// `size - 2 * border + 6`, cut into `floor(span / cell_size)` cells (at least 1) of side
/// `ceil(span / cells)`, and each window is a cell plus 6 px (the overlap that FAST's margins
/// eat), clipped to the span. Windows too small for FAST (under 7 px) are skipped. The
/// windows' detectable parts tile the area without overlap.
pub fn cell_windows(
    width: usize,
    height: usize,
    cell_size: u32,
    border: u32,
) -> Vec<(u32, u32, u32, u32)> {
    let b = border.max(3) as i64;
    let (lo, hi_x, hi_y) = (b - 3, width as i64 - b + 3, height as i64 - b + 3);
    let (span_x, span_y) = (hi_x - lo, hi_y - lo);
    if span_x <= 6 || span_y <= 6 {
        return Vec::new();
    }
    let cell = cell_size.max(1) as i64;
    let (cols, rows) = ((span_x / cell).max(1), (span_y / cell).max(1));
    let (cw, ch) = ((span_x + cols - 1) / cols, (span_y + rows - 1) / rows);
    let mut out = Vec::new();
    for r in 0..rows {
        let y0 = lo + r * ch;
        let y1 = (y0 + ch + 6).min(hi_y);
        for c in 0..cols {
            let x0 = lo + c * cw;
            let x1 = (x0 + cw + 6).min(hi_x);
            if x1 - x0 >= 7 && y1 - y0 >= 7 {
                out.push((x0 as u32, y0 as u32, x1 as u32, y1 as u32));
            }
        }
    }
    out
}

/// ORB-SLAM3's `ComputeKeyPointsOctTree` detection: FAST on each of [`cell_windows`] at
/// `threshold`, again at `min_threshold` in windows where that found nothing. NMS does not
/// look across window edges (ORB-SLAM3 runs FAST on each window alone). The result is
/// deduplicated and in raster order, `response` = FAST score.
///
/// Computed in one FAST pass at `lo = min(threshold, min_threshold)` over the detectable
/// area instead of two per window (as the CUDA `fast_cells` + `cell_filter` do):
/// - a pixel is a corner at `t >= 1` iff it is one at `lo` with score `>= t`;
/// - FAST with NMS on a window compares each corner with its 8 neighbours, which count as 0
///   outside the window's detectable part (its cell): so a survivor beats its same-cell
///   neighbours' scores and 0;
/// - a corner with score `s >= t > lo` beats a neighbour's `lo` score `s' < t` as it beats
///   the 0 that neighbour counts at `t`, so the survivors at `t` are the survivors at `lo`
///   with `s >= t`, and a cell's first pass is empty iff none of its `lo` survivors reaches
///   `threshold`;
/// - the detectable parts tile the area without overlap, so there is nothing to dedup.
pub fn fast_in_cells(
    img: &GrayImage,
    threshold: u8,
    min_threshold: u8,
    nonmax_suppression: bool,
    cell_size: u32,
    border: u32,
) -> Vec<Corner> {
    let Some(grid) = CellGrid::new(img.width, img.height, cell_size, border) else {
        return Vec::new();
    };
    // No retry when min_threshold >= threshold: every cell uses `threshold` = lo.
    let lo = threshold.min(min_threshold);
    let retry = lo < threshold;
    let mut reached = vec![false; grid.cells];
    let mut out = Vec::new();
    let ys = grid.area_y.clone();
    if nonmax_suppression {
        let w = img.width;
        let mut nms = CellNms {
            scores: [vec![0u8; w], vec![0u8; w], vec![0u8; w]],
            xs: [Vec::new(), Vec::new(), Vec::new()],
            open: ys.start - 1,
            grid: &grid,
            threshold,
            reached: &mut reached,
            out: &mut out,
        };
        fast::scan_corners(img, lo, ys.clone(), &mut |x, y, s| {
            if grid.col[x] != NO_CELL {
                nms.open_to(y);
                nms.scores[y % 3][x] = s;
                nms.xs[y % 3].push(x as u32);
            }
        });
        // Two more (empty) rows let the last area row go through NMS.
        nms.open_to(ys.end + 1);
    } else {
        fast::scan_corners(img, lo, ys, &mut |x, y, s| {
            let c = grid.col[x];
            if c != NO_CELL {
                if s >= threshold {
                    reached[grid.row[y] as usize + c as usize] = true;
                }
                out.push(Corner {
                    x: x as u32,
                    y: y as u32,
                    fast_score: s,
                    response: s as f32,
                });
            }
        });
    }
    if retry {
        // Cells whose first pass found something keep only the corners at `threshold`.
        out.retain(|k| {
            k.fast_score >= threshold
                || !reached[grid.row[k.y as usize] as usize + grid.col[k.x as usize] as usize]
        });
    }
    out
}

/// Marks a column or row outside the detectable area in [`CellGrid`].
const NO_CELL: u32 = u32::MAX;

/// The cells of [`cell_windows`] (their detectable parts) as per-column and per-row indices.
struct CellGrid {
    /// Cell column of each x, [`NO_CELL`] outside the area.
    col: Vec<u32>,
    /// `cell row * cols` of each y, [`NO_CELL`] outside the area.
    row: Vec<u32>,
    /// The area's rows.
    area_y: std::ops::Range<usize>,
    /// Number of cells.
    cells: usize,
}

impl CellGrid {
    /// `None` when no window fits. Same arithmetic as [`cell_windows`]: the span
    /// `size - 2b + 6` is cut into `max(span / cell, 1)` cells of side `ceil(span / n)`, and
    /// cell `i`'s detectable part is `[b + i * side, b + (i + 1) * side)` clipped to the area
    /// `[b, size - b)`.
    fn new(width: usize, height: usize, cell_size: u32, border: u32) -> Option<CellGrid> {
        let b = border.max(3) as usize;
        if width <= 2 * b || height <= 2 * b {
            return None;
        }
        let cell = cell_size.max(1) as usize;
        let axis = |size: usize| {
            let span = size - 2 * b + 6;
            let n = (span / cell).max(1);
            let side = span.div_ceil(n);
            let idx = (0..size)
                .map(|v| {
                    if (b..size - b).contains(&v) {
                        ((v - b) / side) as u32
                    } else {
                        NO_CELL
                    }
                })
                .collect::<Vec<u32>>();
            (idx, n)
        };
        let (col, cols) = axis(width);
        let (mut row, rows) = axis(height);
        for r in row.iter_mut().filter(|r| **r != NO_CELL) {
            *r *= cols as u32;
        }
        Some(CellGrid {
            col,
            row,
            area_y: b..height - b,
            cells: cols * rows,
        })
    }
}

/// Non-maximum suppression within cells over a ring of 3 score rows (`fast::detect`'s ring,
/// with neighbours in other cells counting as 0): slot `y % 3` holds row y's scores
/// (0 = no corner) and the x of its corners.
struct CellNms<'a> {
    scores: [Vec<u8>; 3],
    xs: [Vec<u32>; 3],
    /// The last row opened (rows up to `open - 1` are complete).
    open: usize,
    grid: &'a CellGrid,
    threshold: u8,
    /// Per cell: a survivor reaches `threshold`.
    reached: &'a mut [bool],
    out: &'a mut Vec<Corner>,
}

impl CellNms<'_> {
    /// Opens rows `open + 1 ..= to`: suppresses row r - 2 then clears r's slot.
    fn open_to(&mut self, to: usize) {
        while self.open < to {
            self.open += 1;
            let r = self.open;
            if r >= self.grid.area_y.start + 2 {
                self.suppress(r - 2);
            }
            let slot = r % 3;
            for &x in &self.xs[slot] {
                self.scores[slot][x as usize] = 0;
            }
            self.xs[slot].clear();
        }
    }

    /// Keeps the corners of row y (an area row) strictly above 0 and above their same-cell
    /// neighbours.
    fn suppress(&mut self, y: usize) {
        let g = self.grid;
        let (above, mid, below) = (
            &self.scores[(y + 2) % 3],
            &self.scores[y % 3],
            &self.scores[(y + 1) % 3],
        );
        let rc = g.row[y];
        let (up, down) = (g.row[y - 1] == rc, g.row[y + 1] == rc);
        for &x in &self.xs[y % 3] {
            let x = x as usize;
            let s = mid[x];
            let c = g.col[x];
            let (l, r) = (g.col[x - 1] == c, g.col[x + 1] == c);
            // The 3 neighbours of row `n` in this cell (0 for the others).
            let row_max = |n: &[u8]| {
                let mut m = n[x];
                if l {
                    m = m.max(n[x - 1]);
                }
                if r {
                    m = m.max(n[x + 1]);
                }
                m
            };
            let mut m = 0u8;
            if l {
                m = m.max(mid[x - 1]);
            }
            if r {
                m = m.max(mid[x + 1]);
            }
            if up {
                m = m.max(row_max(above));
            }
            if down {
                m = m.max(row_max(below));
            }
            if s > m {
                if s >= self.threshold {
                    self.reached[rc as usize + c as usize] = true;
                }
                self.out.push(Corner {
                    x: x as u32,
                    y: y as u32,
                    fast_score: s,
                    response: s as f32,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corner(x: u32, y: u32, response: f32) -> Corner {
        Corner {
            x,
            y,
            fast_score: 0,
            response,
        }
    }

    /// A deterministic pseudo-random corner set (LCG), distinct positions.
    fn cloud(n: usize, w: u32, h: u32, seed: u64) -> Vec<Corner> {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut v: Vec<Corner> = (0..n)
            .map(|_| corner(next() % w, next() % h, (next() % 50) as f32))
            .collect();
        v.sort_unstable_by_key(|c| (c.y, c.x));
        v.dedup_by_key(|c| (c.y, c.x));
        v
    }

    fn is_subset(kept: &[Corner], all: &[Corner]) -> bool {
        kept.iter().all(|k| all.contains(k))
    }

    #[test]
    fn features_per_level_orb_default() {
        // OpenCV ORB's nfeaturesPerLevel (the 500 case is also the per-octave count of every
        // orb_default.csv golden with enough corners).
        assert_eq!(
            features_per_level(500, 8, 1.2),
            [109, 90, 75, 63, 52, 44, 36, 31]
        );
        assert_eq!(
            features_per_level(2000, 8, 1.2),
            [434, 362, 302, 251, 209, 175, 145, 122]
        );
        for (total, levels, sf) in [(2000, 8, 1.2f32), (1000, 8, 1.2), (7, 5, 2.0), (0, 3, 1.5)] {
            let v = features_per_level(total, levels, sf);
            assert_eq!(v.len(), levels);
            assert_eq!(v.iter().sum::<usize>(), total, "{total} {levels} {sf}");
            assert!(v.windows(2).take(levels - 2).all(|p| p[0] >= p[1]));
        }
        assert_eq!(features_per_level(100, 1, 1.2), [100]);
        // Per-level rounding would give 31 x 1 here (OpenCV's split): the cap keeps 17.
        let v = features_per_level(17, 32, 1.0001);
        assert_eq!(v.iter().sum::<usize>(), 17);
        assert_eq!(&v[..17], &[1; 17]);
    }

    #[test]
    fn retain_best_is_exact_and_deterministic() {
        let all = vec![
            corner(5, 1, 3.0),
            corner(1, 1, 3.0),
            corner(0, 2, 9.0),
            corner(2, 0, 3.0),
            corner(9, 9, 1.0),
        ];
        let mut v = all.clone();
        retain_best(&mut v, 3);
        // 9 first, then the tied 3s by (y, x): (2,0) then (1,1).
        assert_eq!(v, [all[2], all[3], all[1]]);
        let mut r = all.clone();
        r.reverse();
        retain_best(&mut r, 3);
        assert_eq!(r, v, "independent of input order");
        let mut t = all.clone();
        retain_best_with_ties(&mut t, 3);
        assert_eq!(t.len(), 4, "OpenCV keeps every tie of the 3rd response");
        let mut z = all.clone();
        retain_best(&mut z, 0);
        assert!(z.is_empty());
    }

    #[test]
    fn spread_modes_respect_budget_and_pick_candidates() {
        let all = cloud(3000, 640, 480, 7);
        for spread in [Spread::None, Spread::Grid, Spread::Quadtree] {
            let cfg = SelectConfig {
                max_keypoints: 0,
                spread,
                cell_size: 30,
            };
            for n in [0, 1, 5, 100, 777, all.len(), all.len() + 10] {
                let mut v = all.clone();
                select(&mut v, n, &cfg, 640, 480);
                assert_eq!(v.len(), n.min(all.len()), "{spread:?} n={n}");
                assert!(is_subset(&v, &all), "{spread:?}");
                let mut again = all.clone();
                again.reverse();
                select(&mut again, n, &cfg, 640, 480);
                again.sort_unstable_by_key(|c| (c.y, c.x));
                v.sort_unstable_by_key(|c| (c.y, c.x));
                assert_eq!(v, again, "{spread:?} n={n} depends on input order");
            }
        }
    }

    /// Occupied 64x64 blocks: a crude spread measure.
    fn coverage(v: &[Corner]) -> usize {
        let mut b: Vec<_> = v.iter().map(|c| (c.x / 64, c.y / 64)).collect();
        b.sort_unstable();
        b.dedup();
        b.len()
    }

    #[test]
    fn spread_beats_none_on_a_clustered_set() {
        // A dense strong cluster in one corner plus weak points everywhere.
        let mut all = cloud(2000, 100, 100, 3);
        for c in all.iter_mut() {
            c.response += 100.0;
        }
        all.extend(
            cloud(400, 640, 480, 11)
                .into_iter()
                .filter(|c| c.x >= 100 || c.y >= 100),
        );
        let n = 200;
        let mut none = all.clone();
        retain_best(&mut none, n);
        assert_eq!(coverage(&none), 4, "the best 200 are all in the cluster");
        for spread in [Spread::Grid, Spread::Quadtree] {
            let cfg = SelectConfig {
                max_keypoints: 0,
                spread,
                cell_size: 30,
            };
            let mut v = all.clone();
            select(&mut v, n, &cfg, 640, 480);
            assert!(coverage(&v) > 30, "{spread:?}: {}", coverage(&v));
        }
    }

    #[test]
    fn quadtree_keeps_the_best_of_each_node() {
        // Two far-apart pairs and n = 2: one point per pair, the stronger one.
        let mut v = vec![
            corner(10, 10, 1.0),
            corner(11, 10, 5.0),
            corner(600, 400, 7.0),
            corner(600, 401, 2.0),
        ];
        quadtree(&mut v, 2, 640, 480);
        assert_eq!(v, [corner(11, 10, 5.0), corner(600, 400, 7.0)]);
    }

    #[test]
    fn grid_round_robin() {
        // Cell A has 3 strong corners, cell B one weak: n = 2 takes A's best and B's.
        let mut v = vec![
            corner(1, 1, 9.0),
            corner(2, 1, 8.0),
            corner(3, 1, 7.0),
            corner(50, 1, 1.0),
        ];
        let cfg = SelectConfig {
            max_keypoints: 0,
            spread: Spread::Grid,
            cell_size: 30,
        };
        select(&mut v, 2, &cfg, 64, 32);
        assert_eq!(v, [corner(1, 1, 9.0), corner(50, 1, 1.0)]);
    }

    /// Noise: full contrast left of x = 160, +-12 grey levels right of it (few corners at
    /// threshold 20, many at 7).
    fn noise(w: usize, h: usize) -> GrayImage {
        let mut s = 12345u64;
        let data = (0..w * h)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (s >> 56) as u8;
                if i % w < 160 {
                    r
                } else {
                    128 - 12 + r % 25
                }
            })
            .collect();
        GrayImage::from_vec(w, h, data).unwrap()
    }

    #[test]
    fn cell_windows_tile_the_detectable_area() {
        for (w, h, cell, b) in [(640, 480, 30, 19), (101, 77, 30, 31), (300, 200, 8, 3)] {
            let win = cell_windows(w, h, cell, b);
            let mut hits = vec![0u8; w * h];
            for &(x0, y0, x1, y1) in &win {
                assert!(x1 - x0 <= cell.max(1) * 2 + 6 && y1 - y0 >= 7);
                for y in y0 + 3..y1 - 3 {
                    for x in x0 + 3..x1 - 3 {
                        hits[y as usize * w + x as usize] += 1;
                    }
                }
            }
            for y in 0..h {
                for x in 0..w {
                    let inside = (b as usize..w - b as usize).contains(&x)
                        && (b as usize..h - b as usize).contains(&y);
                    assert_eq!(
                        hits[y * w + x],
                        inside as u8,
                        "{w}x{h} c{cell} b{b} ({x},{y})"
                    );
                }
            }
        }
        assert!(
            cell_windows(38, 60, 30, 19).is_empty(),
            "no room left inside the border"
        );
        assert_eq!(
            cell_windows(40, 40, 30, 19),
            [(16, 16, 24, 24)],
            "2x2 px inside"
        );
    }

    #[test]
    fn fast_in_cells_without_retry_is_fast_inside_the_border() {
        // Without NMS nothing looks across cells: exactly FAST's corners inside the border.
        let img = noise(320, 200);
        let b = 19;
        let mut want = fast::detect(&img, 20, false);
        want.retain(|c| c.x >= b && c.y >= b && c.x + b < 320 && c.y + b < 200);
        assert!(want.len() > 100);
        assert_eq!(fast_in_cells(&img, 20, 20, false, 30, b), want);
        // With NMS: a subset of the plain FAST corners, missing none of FAST's NMS survivors.
        let all = fast::detect(&img, 20, false);
        let nms = fast::detect(&img, 20, true);
        let cells = fast_in_cells(&img, 20, 20, true, 30, b);
        assert!(cells.iter().all(|c| all.contains(c)));
        assert!(nms
            .iter()
            .filter(|c| c.x >= b && c.y >= b && c.x + b < 320 && c.y + b < 200)
            .all(|c| cells.contains(c)));
    }

    #[test]
    fn fast_in_cells_retries_only_empty_cells() {
        let img = noise(320, 200);
        let (b, hi, lo) = (19, 60, 7);
        let strong = fast::detect(&img, hi, false);
        let weak = fast::detect(&img, lo, false);
        let got = fast_in_cells(&img, hi, lo, false, 30, b);
        let win = cell_windows(320, 200, 30, b);
        let (mut retried, mut kept) = (0, 0);
        for &(x0, y0, x1, y1) in &win {
            let inner =
                |c: &&Corner| c.x >= x0 + 3 && c.x + 3 < x1 && c.y >= y0 + 3 && c.y + 3 < y1;
            let s: Vec<_> = strong.iter().filter(inner).copied().collect();
            let g: Vec<_> = got.iter().filter(inner).copied().collect();
            if s.is_empty() {
                let w: Vec<_> = weak.iter().filter(inner).copied().collect();
                assert_eq!(g, w, "empty cell {x0},{y0}: the min-threshold corners");
                retried += !w.is_empty() as usize;
            } else {
                assert_eq!(g, s, "cell {x0},{y0}: the threshold corners only");
                kept += 1;
            }
        }
        assert!(retried > 5 && kept > 5, "retried {retried}, kept {kept}");
    }
}
