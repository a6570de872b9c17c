//! Host-side keypoint selection, shared by both backends: per-level budget (ORB's split and
//! `retainBest`), spatial spread (grid, ORB-SLAM3's quadtree) and the conversion of level
//! corners to level-0 keypoints. The CPU reference runs it on its own candidates; the CUDA
//! backend on downloaded candidates for the spread modes (`cuda::select::assemble`), and its
//! GPU budget selection (`kernels/select.cu`) reproduces [`select_level`] for spread `none`.
//!
//! Everything here is deterministic: equal responses are broken by position, `(y, x)`
//! ascending, so the GPU twin can reproduce the exact same set.
//!
//! May import: `config`, `features`, `levels`, `std_sort`.

mod grid;
mod quadtree;

use std::cmp::Ordering;

pub use self::quadtree::{quadtree, QuadtreeArea};
use crate::config::{Config, DetectorMethod, Scales, ScoreType, SelectConfig, Spread};
use crate::features::Keypoint;

/// A corner on one pyramid level, in that level's pixel coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Corner {
    pub x: u32,
    pub y: u32,
    /// The FAST score (0 for dense Harris corners).
    pub fast_score: u8,
    /// The ranking response: Harris score, FAST score or dense Harris response.
    pub response: f32,
}

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

/// [`features_per_level`] for the settings last asked for (budget, levels, scale factor),
/// made again only when they change: a frame that asks again allocates nothing. The CPU
/// detection and the GPU selection each keep one.
#[derive(Default)]
pub struct LevelBudgets {
    made_for: Option<(usize, usize, u32)>,
    per_level: Vec<usize>,
}

impl LevelBudgets {
    /// The per-level budgets of `cfg` over `levels` levels.
    pub fn get(&mut self, cfg: &Config, levels: usize) -> &[usize] {
        let (budget, f) = (cfg.select.max_keypoints as usize, cfg.pyramid.scale_factor);
        let key = (budget, levels, f.to_bits());
        if self.made_for != Some(key) {
            self.per_level = features_per_level(budget, levels, f);
            self.made_for = Some(key);
        }
        &self.per_level
    }

    /// The budgets [`LevelBudgets::get`] gave last (empty before the first call).
    pub fn last(&self) -> &[usize] {
        &self.per_level
    }
}

/// Best first: response descending, then `(y, x)` ascending.
pub(crate) fn by_rank(a: &Corner, b: &Corner) -> Ordering {
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

/// Keeps `n` corners, spread as configured (`area`: the level, for the quadtree):
///
/// - `None`: [`retain_best`], at most `n`.
/// - `Grid`: at most `n`; corners are bucketed into `cell_size` squares; round `r` offers
///   every cell's r-th best corner. Whole rounds are taken while they fit; the round that
///   does not fit contributes its best offers (by response, then `(y, x)`).
/// - `Quadtree`: ORB-SLAM3's `DistributeOctTree` exactly, see [`quadtree`]: it may keep up
///   to `n + 2`, or fewer than `n` where its splitting stalls, as ORB-SLAM3 does.
///
/// Output order: best first for `None`; raster order `(y, x)` for `grid`; ORB-SLAM3's node
/// order for `quadtree`.
pub fn select(corners: &mut Vec<Corner>, n: usize, cfg: &SelectConfig, area: QuadtreeArea) {
    match cfg.spread {
        Spread::None => retain_best(corners, n),
        Spread::Quadtree => quadtree(corners, n, area),
        _ if corners.len() <= n => corners.sort_unstable_by_key(|c| (c.y, c.x)),
        Spread::Grid => grid::grid(corners, n, cfg.cell_size.max(1) as usize),
    }
}

/// The most keypoints a frame with these level sizes can get: the budget, except with
/// ORB-SLAM3's quadtree, which keeps per level up to two nodes more than its share, or the
/// four children of each root its first round always makes (`select::quadtree`).
pub fn max_kept(cfg: &Config, level_sizes: &[(usize, usize)]) -> usize {
    let budget = cfg.select.max_keypoints as usize;
    if cfg.select.spread != Spread::Quadtree || budget == 0 {
        return budget;
    }
    let per = features_per_level(budget, level_sizes.len(), cfg.pyramid.scale_factor);
    let b = cfg.detector.border.max(3) as f32;
    level_sizes
        .iter()
        .zip(per)
        .map(|(&(w, h), n)| {
            let (bw, bh) = (
                (w as f32 - 2.0 * b + 6.0).max(1.0),
                (h as f32 - 2.0 * b + 6.0).max(1.0),
            );
            let roots = ((bw / bh).round() as usize).max(1);
            (n + 2).max(4 * roots)
        })
        .sum()
}

/// A level corner as a level-0 keypoint, with the level's scale (`pyramid.scales`: ORB's
/// `(float)pow((double)scale, level)`, not an f32 `powi`, which differs from level 3 on; or
/// ORB-SLAM3's running product, whose keypoint size is truncated to an integer).
pub fn to_keypoint(cfg: &Config, level: usize, c: &Corner, angle: f32) -> Keypoint {
    let scale = crate::levels::level_scale(cfg.pyramid.scales, cfg.pyramid.scale_factor, level);
    Keypoint {
        x: c.x as f32 * scale,
        y: c.y as f32 * scale,
        response: c.response,
        size: keypoint_size(cfg, scale),
        angle,
        octave: level as i32,
    }
}

/// The `size` of a keypoint on a level of this `scale`: the patch diameter times the scale
/// (7 without orientation: cv::FAST's size), truncated to an integer with ORB-SLAM3's
/// scales (its `int(PATCH_SIZE * scale)`).
pub fn keypoint_size(cfg: &Config, scale: f32) -> f32 {
    let diameter = if cfg.orient.enabled {
        cfg.orient.patch_size as f32
    } else {
        7.0
    };
    match cfg.pyramid.scales {
        Scales::Orb => diameter * scale,
        Scales::OrbSlam3 => (diameter * scale) as i32 as f32,
    }
}

/// ORB's selection on one level's candidates, shared by every backend: with the Harris
/// score, a first cut to 2n by FAST score, then `harris(c)` as the response; then the budget
/// `n` with the configured spread; leaves the kept corners in (y, x) order, or in
/// ORB-SLAM3's node order with the quadtree (its keypoint order).
pub fn select_level(
    cfg: &Config,
    corners: &mut Vec<Corner>,
    n: Option<usize>,
    width: usize,
    height: usize,
    mut harris: impl FnMut(&Corner) -> f32,
) {
    if cfg.detector.method == DetectorMethod::Fast && cfg.detector.score == ScoreType::Harris {
        // ORB ranks by FAST score first and keeps 2n before paying for Harris. OpenCV's
        // retainBest keeps every tie of the 2n-th FAST score; so do we (a set, hence still
        // deterministic), or the Harris ranking would see other candidates.
        if let (Some(n), Spread::None) = (n, cfg.select.spread) {
            retain_best_with_ties(corners, 2 * n);
        }
        for c in corners.iter_mut() {
            c.response = harris(c);
        }
    }
    if let Some(n) = n {
        let d = &cfg.detector;
        let area = QuadtreeArea {
            width,
            height,
            border: d.border,
            cell: (d.method == DetectorMethod::Fast && d.low_threshold_retry)
                .then_some(cfg.select.cell_size),
        };
        select(corners, n, &cfg.select, area);
        if cfg.select.spread == Spread::Quadtree {
            return;
        }
    }
    // Unstable (no buffer to allocate) and the same order: corners at one position are
    // the same corner (a detector's score and the response are functions of the pixel).
    corners.sort_unstable_by_key(|c| (c.y, c.x));
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

    /// A level of this size whose quadtree box is all of it (border 3), candidates in
    /// raster order.
    fn area(width: usize, height: usize) -> QuadtreeArea {
        QuadtreeArea {
            width,
            height,
            border: 3,
            cell: None,
        }
    }

    /// The same with ORB-SLAM3's border (19): the box is `[16, size - 16)`.
    fn orb_area(width: usize, height: usize) -> QuadtreeArea {
        QuadtreeArea {
            border: 19,
            ..area(width, height)
        }
    }

    fn is_subset(kept: &[Corner], all: &[Corner]) -> bool {
        kept.iter().all(|k| all.contains(k))
    }

    #[test]
    fn level_budgets_follow_the_settings() {
        let mut b = LevelBudgets::default();
        assert!(b.last().is_empty());
        let mut cfg = Config::default();
        for (budget, levels, f) in [(2000, 8, 1.2), (2000, 8, 1.2), (500, 8, 1.2), (500, 4, 1.5)] {
            cfg.select.max_keypoints = budget;
            cfg.pyramid.scale_factor = f;
            let want = features_per_level(budget as usize, levels, f);
            assert_eq!(b.get(&cfg, levels), want.as_slice());
            assert_eq!(b.last(), want.as_slice());
        }
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
                select(&mut v, n, &cfg, area(640, 480));
                if spread == Spread::Quadtree {
                    // ORB-SLAM3's count: one corner per node, n..n+2 nodes where the corners
                    // allow (a stalled round may stop short of n); its first round always
                    // runs, so n = 0 keeps the root's (one here) children.
                    assert!(v.len() <= (n + 2).max(4).min(all.len()), "{spread:?} n={n}");
                    assert!(v.len() >= n.min(all.len()) * 9 / 10, "{spread:?} n={n}");
                } else {
                    assert_eq!(v.len(), n.min(all.len()), "{spread:?} n={n}");
                }
                assert!(is_subset(&v, &all), "{spread:?}");
                let mut again = all.clone();
                again.reverse();
                select(&mut again, n, &cfg, area(640, 480));
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
            select(&mut v, n, &cfg, area(640, 480));
            assert!(coverage(&v) > 30, "{spread:?}: {}", coverage(&v));
        }
    }

    #[test]
    fn quadtree_keeps_the_best_of_each_node() {
        // Two far-apart pairs and n = 2: one point per pair, the stronger one.
        let mut v = vec![
            corner(30, 30, 1.0),
            corner(31, 30, 5.0),
            corner(600, 400, 7.0),
            corner(600, 401, 2.0),
        ];
        quadtree(&mut v, 2, orb_area(640, 480));
        // Round 1 splits the root (608 / 448 rounds to 1): the children go to the front of
        // ORB-SLAM3's list in push order n1..n4, so the last pushed (bottom right) is first.
        assert_eq!(v, [corner(600, 400, 7.0), corner(31, 30, 5.0)]);
    }

    #[test]
    fn quadtree_stops_when_a_round_adds_no_node() {
        // Two neighbours and n = 3: every split puts both in one child, so ORB-SLAM3's first
        // round leaves one node and it stops there with one corner, the first best.
        let mut v = vec![corner(200, 200, 4.0), corner(201, 200, 4.0)];
        quadtree(&mut v, 3, orb_area(640, 480));
        assert_eq!(v, [corner(200, 200, 4.0)]);
    }

    #[test]
    fn quadtree_keeps_the_first_of_equal_responses_in_cell_order() {
        // Both end in the root's top-left child, which round 1 leaves alone (no new node:
        // the stop). Detected per 35 px cell (36 x 38 px here), (40, 50) is in the first
        // cell and (100, 30) in the third, so (40, 50) arrives first and wins the tie; in
        // raster order (100, 30) comes first.
        let cells = QuadtreeArea {
            cell: Some(35),
            ..orb_area(640, 480)
        };
        let mut v = vec![corner(100, 30, 9.0), corner(40, 50, 9.0)];
        quadtree(&mut v, 1, cells);
        assert_eq!(v, [corner(40, 50, 9.0)]);
        let mut r = vec![corner(40, 50, 9.0), corner(100, 30, 9.0)];
        quadtree(&mut r, 1, orb_area(640, 480));
        assert_eq!(r, [corner(100, 30, 9.0)], "raster order without cells");
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
        select(&mut v, 2, &cfg, area(64, 32));
        assert_eq!(v, [corner(1, 1, 9.0), corner(50, 1, 1.0)]);
    }
}
