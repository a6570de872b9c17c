//! ORB-SLAM3's per-cell FAST with the low-threshold retry (`detector.low_threshold_retry`;
//! CPU reference for `fast_cells` + `cell_filter` in `kernels/fast_harris.cu`).

use super::fast::{self, ScoreRing};
use crate::image::AsGray;
use crate::select::Corner;

/// The FAST windows of [`fast_in_cells`], `(x0, y0, x1, y1)` half-open, in raster order.
///
/// The detectable area is `[border, size - border)` (what the border filter keeps). As in
/// ORB-SLAM3 (`EDGE_THRESHOLD = border`), it is grown by FAST's 3 px margin to a span of
/// `size - 2 * border + 6`, cut into `floor(span / cell_size)` cells of side
/// `ceil(span / cells)` (none, so nothing is detected, where a span is shorter than a cell:
/// ORB-SLAM3's `nCols` or `nRows` is 0 there), and each window is a cell plus 6 px (the
/// overlap that FAST's margins eat), clipped to the span. Windows too small for FAST (under 7 px) are skipped. The
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
    // ORB-SLAM3's `nCols = width / W`: no cell at all on a level narrower than one.
    let (cols, rows) = (span_x / cell, span_y / cell);
    if cols == 0 || rows == 0 {
        return Vec::new();
    }
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
/// With NMS (ORB-SLAM3's case): one FAST pass at `threshold` over the detectable area (its
/// first FAST per window), then one at `min_threshold` over the cells where that kept
/// nothing, the NMS of each within its cell. Without NMS, one pass at
/// `lo = min(threshold, min_threshold)` (as the CUDA `fast_cells` + `cell_filter` do),
/// the same corners as two per window:
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
    img: impl AsGray,
    threshold: u8,
    min_threshold: u8,
    nonmax_suppression: bool,
    cell_size: u32,
    border: u32,
) -> Vec<Corner> {
    let mut out = Vec::new();
    let settings = CellSettings {
        threshold,
        min_threshold,
        nonmax_suppression,
        cell_size,
        border,
    };
    fast_in_cells_into(img, settings, &mut CellScratch::default(), &mut out);
    out
}

/// The settings of [`fast_in_cells`].
#[derive(Clone, Copy, Debug)]
pub struct CellSettings {
    /// FAST's threshold of the first pass (ORB-SLAM3's `iniThFAST`).
    pub threshold: u8,
    /// The retry's threshold in cells the first pass left empty (`minThFAST`).
    pub min_threshold: u8,
    pub nonmax_suppression: bool,
    /// The cell side before the span is divided evenly (ORB-SLAM3's `W`, 30).
    pub cell_size: u32,
    /// The distance to the image edge within which nothing is detected (`EDGE_THRESHOLD`).
    pub border: u32,
}

/// The buffers of [`fast_in_cells_into`], kept between calls: the cell grid (remade when
/// the image size, the cell size or the border changes), the per-cell flags and the
/// suppression's rows. Once they have grown, a call allocates nothing.
#[derive(Default)]
pub struct CellScratch {
    /// The grid and the `(width, height, cell_size, border)` it was made for.
    grid: Option<((usize, usize, u32, u32), CellGrid)>,
    reached: Vec<bool>,
    todo: Vec<bool>,
    cols: Vec<usize>,
    ring: ScoreRing,
}

/// [`fast_in_cells`] into `out` (cleared first), in `scratch`'s buffers.
pub fn fast_in_cells_into(
    img: impl AsGray,
    settings: CellSettings,
    scratch: &mut CellScratch,
    out: &mut Vec<Corner>,
) {
    let img = img.gray();
    out.clear();
    let CellSettings {
        threshold,
        min_threshold,
        nonmax_suppression,
        cell_size,
        border,
    } = settings;
    let key = (img.width, img.height, cell_size, border);
    if scratch.grid.as_ref().map(|g| g.0) != Some(key) {
        scratch.grid = CellGrid::new(img.width, img.height, cell_size, border).map(|g| (key, g));
    }
    let CellScratch {
        grid,
        reached,
        todo,
        cols,
        ring,
    } = scratch;
    let Some((_, grid)) = grid.as_ref() else {
        return; // no cell fits
    };
    // No retry when min_threshold >= threshold: every cell uses `threshold` = lo.
    let lo = threshold.min(min_threshold);
    let retry = lo < threshold;
    reached.clear();
    reached.resize(grid.cells, false);
    let ys = grid.area_y.clone();
    if nonmax_suppression {
        // ORB-SLAM3's first FAST per window, every cell at `threshold`.
        let mut nms = CellNms::new(img.width, grid, threshold, ring, reached, out);
        fast::scan_corners(img, threshold, ys.clone(), &mut |x, y, s| nms.add(x, y, s));
        nms.open_to(ys.end + 1);
        if retry {
            // Again at `min_threshold`, in the cells where that kept nothing: row by row,
            // each such cell's columns, so the NMS ring still sees raster order.
            todo.clear();
            todo.extend(reached.iter().map(|r| !r));
            let first = out.len();
            let ncols = grid.col_spans.len();
            let mut nms = CellNms::new(img.width, grid, threshold, ring, reached, out);
            for (r, rows) in grid.row_spans.iter().enumerate() {
                cols.clear();
                cols.extend((0..ncols).filter(|&c| todo[r * ncols + c]));
                if cols.is_empty() {
                    continue;
                }
                for y in rows.clone() {
                    for &c in cols.iter() {
                        let xs = grid.col_spans[c].clone();
                        fast::scan_corners_in(img, lo, y..y + 1, xs, &mut |x, y, s| {
                            nms.add(x, y, s)
                        });
                    }
                }
            }
            nms.open_to(ys.end + 1);
            if out.len() > first {
                // The cells tile the area: merging the passes is a sort by position.
                out.sort_unstable_by_key(|k| (k.y, k.x));
            }
        }
        return;
    }
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
    if retry {
        // Cells whose first pass found something keep only the corners at `threshold`.
        out.retain(|k| {
            k.fast_score >= threshold
                || !reached[grid.row[k.y as usize] as usize + grid.col[k.x as usize] as usize]
        });
    }
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
    /// Each cell column's and cell row's pixels (the detectable parts).
    col_spans: Vec<std::ops::Range<usize>>,
    row_spans: Vec<std::ops::Range<usize>>,
    /// Number of cells.
    cells: usize,
}

impl CellGrid {
    /// `None` when no window fits. Same arithmetic as [`cell_windows`]: the span
    /// `size - 2b + 6` is cut into `span / cell` cells (none: `None`) of side `ceil(span / n)`, and
    /// cell `i`'s detectable part is `[b + i * side, b + (i + 1) * side)` clipped to the area
    /// `[b, size - b)`.
    fn new(width: usize, height: usize, cell_size: u32, border: u32) -> Option<CellGrid> {
        let b = border.max(3) as usize;
        if width <= 2 * b || height <= 2 * b {
            return None;
        }
        let cell = cell_size.max(1) as usize;
        if width + 6 < 2 * b + cell || height + 6 < 2 * b + cell {
            return None; // a span shorter than one cell: no cell (cell_windows)
        }
        let axis = |size: usize| {
            let span = size - 2 * b + 6;
            let n = span / cell;
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
        let spans = |idx: &[u32], n: usize| {
            // Cells run left to right: each one's first and last pixel.
            let mut out = vec![0..0; n];
            for (v, &i) in idx.iter().enumerate() {
                if i != NO_CELL {
                    let r = &mut out[i as usize];
                    if r.start == r.end {
                        r.start = v;
                    }
                    r.end = v + 1;
                }
            }
            out
        };
        let (col_spans, row_spans) = (spans(&col, cols), spans(&row, rows));
        for r in row.iter_mut().filter(|r| **r != NO_CELL) {
            *r *= cols as u32;
        }
        Some(CellGrid {
            col,
            row,
            area_y: b..height - b,
            col_spans,
            row_spans,
            cells: cols * rows,
        })
    }
}

/// Non-maximum suppression within cells over FAST's [`ScoreRing`], with neighbours in
/// other cells counting as 0.
struct CellNms<'a> {
    ring: &'a mut ScoreRing,
    grid: &'a CellGrid,
    threshold: u8,
    /// Per cell: a survivor reaches `threshold`.
    reached: &'a mut [bool],
    out: &'a mut Vec<Corner>,
}

impl<'a> CellNms<'a> {
    /// The suppression of `grid`'s area in `ring`'s rows (emptied here).
    fn new(
        width: usize,
        grid: &'a CellGrid,
        threshold: u8,
        ring: &'a mut ScoreRing,
        reached: &'a mut [bool],
        out: &'a mut Vec<Corner>,
    ) -> Self {
        ring.start(width, grid.area_y.start);
        CellNms {
            ring,
            grid,
            threshold,
            reached,
            out,
        }
    }

    /// A corner of the area (raster order), kept for the NMS of its row.
    fn add(&mut self, x: usize, y: usize, s: u8) {
        if self.grid.col[x] != NO_CELL {
            let CellNms {
                ring,
                grid,
                threshold,
                reached,
                out,
            } = self;
            ring.push(x, y, s, |ring, y| {
                suppress(ring, y, grid, *threshold, reached, out)
            });
        }
    }

    /// Opens rows up to `to`: every row before `to - 1` goes through the suppression.
    fn open_to(&mut self, to: usize) {
        let CellNms {
            ring,
            grid,
            threshold,
            reached,
            out,
        } = self;
        ring.open_to(to, |ring, y| {
            suppress(ring, y, grid, *threshold, reached, out)
        });
    }
}

/// Keeps the corners of row y (an area row) strictly above 0 and above their same-cell
/// neighbours; marks the cells of those that reach `threshold` in `reached`.
fn suppress(
    ring: &ScoreRing,
    y: usize,
    g: &CellGrid,
    threshold: u8,
    reached: &mut [bool],
    out: &mut Vec<Corner>,
) {
    let (xs, [above, mid, below]) = ring.around(y);
    let rc = g.row[y];
    let (up, down) = (g.row[y - 1] == rc, g.row[y + 1] == rc);
    for &x in xs {
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
            if s >= threshold {
                reached[rc as usize + c as usize] = true;
            }
            out.push(Corner {
                x: x as u32,
                y: y as u32,
                fast_score: s,
                response: s as f32,
            });
        }
    }
}

#[cfg(test)]
mod tests;
