//! ORB-SLAM3's per-cell FAST with the low-threshold retry on the GPU: the cell grid the
//! `fast_cells` and `cell_filter` kernels (kernels/fast_harris.cu) index, host twin of
//! `cpu::cells` (launched by `fast_harris::Detector::run_cells`).

pub use super::kernels::params::CellParams;
use crate::levels::MAX_LEVELS;

impl CellParams {
    /// The cell grid of `cpu::cells::cell_windows(w, h, cell_size, border)` for every level:
    /// the windows' detectable parts are the cells `[b + c * cw, b + (c + 1) * cw)` (clipped
    /// to the area), `cols = span / cell` (no window when that is 0) and `cw = ceil(span / cols)`, where
    /// `span = w - 2b + 6`; no window when a span is at most 6. Also returns the total cell
    /// count.
    pub fn new(
        levels: &[(usize, usize)],
        cell_size: u32,
        border: u32,
        threshold: u32,
        min_threshold: u32,
    ) -> (Self, usize) {
        let b = border.max(3) as i64;
        let cell = cell_size.max(1) as i64;
        let mut p = CellParams {
            b: b as i32,
            ini: threshold as i32,
            lo: min_threshold.min(threshold) as i32,
            cw: [1; MAX_LEVELS],
            ch: [1; MAX_LEVELS],
            cols: [0; MAX_LEVELS],
            rows: [0; MAX_LEVELS],
            start: [0; MAX_LEVELS],
        };
        let mut total = 0i64;
        for (l, &(w, h)) in levels.iter().enumerate().take(MAX_LEVELS) {
            p.start[l] = total as i32;
            let (span_x, span_y) = (w as i64 - 2 * b + 6, h as i64 - 2 * b + 6);
            // No cell on a level whose span is shorter than one (ORB-SLAM3's nCols = 0).
            if span_x <= 6 || span_y <= 6 || span_x < cell || span_y < cell {
                continue;
            }
            let (cols, rows) = (span_x / cell, span_y / cell);
            p.cols[l] = cols as i32;
            p.rows[l] = rows as i32;
            p.cw[l] = ((span_x + cols - 1) / cols) as i32;
            p.ch[l] = ((span_y + rows - 1) / rows) as i32;
            total += cols * rows;
        }
        (p, total as usize)
    }

    /// Global cell of `(x, y)` on level `l`, `None` outside the detectable area (the
    /// kernels' `cell_of`).
    pub fn cell_of(&self, l: usize, w: usize, h: usize, x: i64, y: i64) -> Option<usize> {
        let b = self.b as i64;
        if self.cols[l] == 0 || x < b || y < b || x >= w as i64 - b || y >= h as i64 - b {
            return None;
        }
        let (cx, cy) = ((x - b) / self.cw[l] as i64, (y - b) / self.ch[l] as i64);
        Some(self.start[l] as usize + (cy * self.cols[l] as i64 + cx) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{cells, fast};
    use crate::cuda::fast_harris::slot_cap;
    use crate::image::GrayImage;
    use crate::select::Corner;

    /// The per-cell detection as `fast_cells` + `cell_filter` compute it (one score pass at
    /// the lower threshold, NMS within each cell, per-cell flags, each cell's threshold),
    /// on the host, in raster order.
    fn kernels_on_host(
        img: &GrayImage,
        ini: u8,
        lo: u8,
        nms: bool,
        cell: u32,
        border: u32,
    ) -> Vec<Corner> {
        let (w, h) = (img.width, img.height);
        let (cp, ncells) = CellParams::new(&[(w, h)], cell, border, ini as u32, lo as u32);
        let score = |x: i64, y: i64| -> u32 {
            if x < 3 || y < 3 || x >= w as i64 - 3 || y >= h as i64 - 3 {
                return 0;
            }
            let s = fast::score(img, x as usize, y as usize) as u32;
            if s >= cp.lo as u32 {
                s
            } else {
                0
            }
        };
        let mut kept = Vec::new();
        let mut flags = vec![false; ncells];
        for y in 0..h as i64 {
            for x in 0..w as i64 {
                let s = score(x, y);
                let Some(cell) = cp.cell_of(0, w, h, x, y).filter(|_| s > 0) else {
                    continue;
                };
                let beats = (-1..=1).all(|dy| {
                    (-1..=1).all(|dx| {
                        (dx == 0 && dy == 0)
                            || cp.cell_of(0, w, h, x + dx, y + dy) != Some(cell)
                            || s > score(x + dx, y + dy)
                    })
                });
                if nms && !beats {
                    continue;
                }
                flags[cell] |= s >= cp.ini as u32;
                kept.push((x as u32, y as u32, s, cell));
            }
        }
        kept.into_iter()
            .filter(|&(_, _, s, cell)| s >= if flags[cell] { cp.ini } else { cp.lo } as u32)
            .map(|(x, y, s, _)| Corner {
                x,
                y,
                fast_score: s as u8,
                response: s as f32,
            })
            .collect()
    }

    /// Noise with contrast varying over the image (some cells empty at `ini`, some not).
    fn noise(w: usize, h: usize, seed: u64) -> GrayImage {
        GrayImage::from_vec(w, h, crate::cuda::test_images::contrast_noise(w, h, seed)).unwrap()
    }

    #[test]
    fn one_score_pass_and_cell_nms_equal_fast_in_cells() {
        let mut cases = 0;
        for (w, h, seed) in [(160, 120, 1), (97, 83, 2), (64, 40, 3), (41, 300, 4)] {
            let img = noise(w, h, seed);
            for (ini, lo) in [(20, 7), (20, 20), (40, 5), (12, 11)] {
                for nms in [true, false] {
                    for cell in [8, 16, 30, 64] {
                        for border in [3, 19, 31] {
                            let want = cells::fast_in_cells(&img, ini, lo, nms, cell, border);
                            let got = kernels_on_host(&img, ini, lo, nms, cell, border);
                            assert_eq!(
                                got, want,
                                "{w}x{h} ini {ini} lo {lo} nms {nms} cell {cell} border {border}"
                            );
                            cases += !want.is_empty() as usize;
                        }
                    }
                }
            }
        }
        assert!(cases > 200, "{cases}");
    }

    #[test]
    fn slot_cap_bounds_the_cell_nms_survivors() {
        assert_eq!(slot_cap(true, None), 64);
        assert_eq!(slot_cap(false, Some(30)), 256);
        assert_eq!(slot_cap(true, Some(8)), 90);
        assert_eq!(slot_cap(true, Some(30)), 85);
        assert_eq!(slot_cap(true, Some(1)), 256);
        // Every pixel a corner at threshold 1: the densest cell-NMS survivors, per tile.
        let img = noise(400, 300, 9);
        for cell in [8, 16, 30] {
            let got = kernels_on_host(&img, 1, 1, true, cell, 3);
            let mut per_tile = std::collections::HashMap::new();
            for c in &got {
                *per_tile.entry((c.x / 32, c.y / 8)).or_insert(0usize) += 1;
            }
            let most = per_tile.values().copied().max().unwrap_or(0);
            assert!(most <= slot_cap(true, Some(cell)), "cell {cell}: {most}");
        }
    }
}
