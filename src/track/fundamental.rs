//! Outlier rejection with the fundamental matrix (VINS's `rejectWithF`): OpenCV's
//! `findFundamentalMat(FM_RANSAC)` procedure rebuilt with nalgebra: `cv::RNG` seeded as
//! OpenCV seeds it, the same 7-point samples (collinear ones redrawn), the 7-point
//! algorithm's 1 to 3 candidates, OpenCV's error (the larger squared point-to-epipolar-line
//! distance, in f32) against `threshold^2`, its rule for a better model and its iteration
//! bound. Deterministic: the same pairs give the same mask.
//!
//! Not bit-exact: the null space of a 7-point system has no canonical basis, so our
//! elimination and OpenCV's SVD give the same candidate matrices only to rounding (and the
//! roots, hence the candidates, may come in another order), and a pair at the threshold can
//! fall either way. `tests/exact_track.rs` measures the agreement of the masks
//! on the real sequence and bounds it. (OpenCV switches to LMeDS below 15 pairs; this runs
//! RANSAC from 8.)

use nalgebra::Matrix3;

/// RANSAC settings (VINS: 1 px, confidence 0.99; OpenCV's 1000 iterations at most).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RansacParams {
    pub threshold: f64,
    pub confidence: f64,
    pub max_iters: usize,
}

impl Default for RansacParams {
    fn default() -> Self {
        RansacParams {
            threshold: 1.0,
            confidence: 0.99,
            max_iters: 1000,
        }
    }
}

/// `cv::RNG`: a multiply-with-carry generator; `findFundamentalMat` seeds it with all ones.
struct CvRng(u64);

impl CvRng {
    fn next(&mut self) -> u32 {
        self.0 = (self.0 as u32 as u64)
            .wrapping_mul(4_164_903_690)
            .wrapping_add(self.0 >> 32);
        self.0 as u32
    }

    /// `RNG::uniform(0, n)` for ints.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u32) as usize
    }
}

/// OpenCV's `haveCollinearPoints` on the first `count` points: the last one on a line
/// through two earlier ones (or too close to them).
fn collinear(p: &[(f32, f32)]) -> bool {
    let i = p.len() - 1;
    for j in 0..i {
        // OpenCV subtracts the float coordinates in float, then widens.
        let dx1 = (p[j].0 - p[i].0) as f64;
        let dy1 = (p[j].1 - p[i].1) as f64;
        for k in 0..j {
            let dx2 = (p[k].0 - p[i].0) as f64;
            let dy2 = (p[k].1 - p[i].1) as f64;
            if (dx2 * dy1 - dy2 * dx1).abs()
                <= f32::EPSILON as f64 * (dx1.abs() + dy1.abs() + dx2.abs() + dy2.abs())
            {
                return true;
            }
        }
    }
    false
}

/// Up to three values on the stack (the cubic's roots, the 7-point candidates).
#[derive(Clone, Copy, Debug)]
struct Up3<T: Copy> {
    items: [T; 3],
    len: usize,
}

impl<T: Copy> Up3<T> {
    fn of(fill: T, values: &[T]) -> Self {
        let mut items = [fill; 3];
        items[..values.len()].copy_from_slice(values);
        Up3 {
            items,
            len: values.len(),
        }
    }

    fn as_slice(&self) -> &[T] {
        &self.items[..self.len]
    }
}

/// The real roots of `c0 x^3 + c1 x^2 + c2 x + c3` in OpenCV's `solveCubic` order.
fn solve_cubic(c: [f64; 4]) -> Up3<f64> {
    let roots = |r: &[f64]| Up3::of(0.0, r);
    let [a0, a1, a2, a3] = c;
    if a0 == 0.0 {
        if a1 == 0.0 {
            return if a2 == 0.0 {
                roots(&[])
            } else {
                roots(&[-a3 / a2])
            };
        }
        let d = a2 * a2 - 4.0 * a1 * a3;
        if d < 0.0 {
            return roots(&[]);
        }
        let d = d.sqrt();
        let (q1, q2) = ((-a2 + d) * 0.5, (a2 + d) * -0.5);
        let (x0, x1) = if q1.abs() > q2.abs() {
            (q1 / a1, a3 / q1)
        } else {
            (q2 / a1, a3 / q2)
        };
        return if d > 0.0 {
            roots(&[x0, x1])
        } else {
            roots(&[x0])
        };
    }
    let inv = 1.0 / a0;
    let (a1, a2, a3) = (a1 * inv, a2 * inv, a3 * inv);
    let q = (a1 * a1 - 3.0 * a2) * (1.0 / 9.0);
    let r = (2.0 * a1 * a1 * a1 - 9.0 * a1 * a2 + 27.0 * a3) * (1.0 / 54.0);
    let d = (4.0 * a1 * a1 * a1 * a3 - a1 * a1 * a2 * a2 - 18.0 * a1 * a2 * a3
        + 4.0 * a2 * a2 * a2
        + 27.0 * a3 * a3)
        * (-1.0 / 108.0);
    if d > 0.0 {
        let theta = (r / (q * q * q).sqrt()).acos();
        let t0 = -2.0 * q.sqrt();
        let (t1, t2) = (theta * (1.0 / 3.0), a1 * (1.0 / 3.0));
        let pi = std::f64::consts::PI;
        roots(&[
            t0 * t1.cos() - t2,
            t0 * (t1 + 2.0 * pi / 3.0).cos() - t2,
            t0 * (t1 + 4.0 * pi / 3.0).cos() - t2,
        ])
    } else if d == 0.0 {
        let (x0, x1) = if r >= 0.0 {
            (
                -2.0 * r.powf(1.0 / 3.0) - a1 / 3.0,
                r.powf(1.0 / 3.0) - a1 / 3.0,
            )
        } else {
            (
                2.0 * (-r).powf(1.0 / 3.0) - a1 / 3.0,
                -(-r).powf(1.0 / 3.0) - a1 / 3.0,
            )
        };
        if x0 == x1 {
            roots(&[x0])
        } else {
            roots(&[x0, x1])
        }
    } else {
        let d = (-d).sqrt();
        let mut e = (d + r.abs()).powf(1.0 / 3.0);
        if r > 0.0 {
            e = -e;
        }
        roots(&[(e + q / e) - a1 * (1.0 / 3.0)])
    }
}

/// A basis of the two-dimensional null space of a 7x9 system of rank 7 (Gauss-Jordan
/// elimination with complete pivoting, on the stack: a third of the F test's time of the 9x9
/// SVD it replaced, which gave another basis of the same space; performance.md change 62).
/// None when the rank is below 7 or an entry is not finite.
fn null_space_7x9(mut m: [[f64; 9]; 7]) -> Option<[[f64; 9]; 2]> {
    if m.iter().flatten().any(|v| !v.is_finite()) {
        return None;
    }
    let mut col: [usize; 9] = std::array::from_fn(|j| j);
    let scale = m.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    for r in 0..7 {
        // The largest entry left (rows r.., columns col[r..]) becomes the pivot.
        let (mut pi, mut pj, mut best) = (r, r, -1.0);
        for (i, row) in m.iter().enumerate().skip(r) {
            for (j, &c) in col.iter().enumerate().skip(r) {
                if row[c].abs() > best {
                    (pi, pj, best) = (i, j, row[c].abs());
                }
            }
        }
        // (A rank below 7 leaves no usable pivot.)
        if best.partial_cmp(&(scale * 1e-12)) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        m.swap(r, pi);
        col.swap(r, pj);
        let pc = col[r];
        let inv = 1.0 / m[r][pc];
        for v in m[r].iter_mut() {
            *v *= inv;
        }
        let pivot_row = m[r];
        for (i, row) in m.iter_mut().enumerate() {
            let k = row[pc];
            if i != r && k != 0.0 {
                for (v, p) in row.iter_mut().zip(&pivot_row) {
                    *v -= k * p;
                }
            }
        }
    }
    // Each free column gives a null vector: 1 there, 0 at the other, minus its column
    // at the pivots.
    Some(std::array::from_fn(|k| {
        let free = col[7 + k];
        let mut n = [0.0; 9];
        n[free] = 1.0;
        for (r, row) in m.iter().enumerate() {
            n[col[r]] = -row[free];
        }
        n
    }))
}

/// OpenCV's 7-point algorithm (`run7Point`): Hartley-normalised, the two-dimensional null
/// space of the 7x9 system, the cubic `det(l F1 + (1 - l) F2) = 0`, each root a model with
/// `F33 = 1`.
fn seven_point(a: &[(f32, f32)], b: &[(f32, f32)]) -> Up3<Matrix3<f64>> {
    let none = Up3::of(Matrix3::zeros(), &[]);
    let norm = |p: &[(f32, f32)]| -> Option<((f64, f64), f64)> {
        let t = 1.0 / 7.0;
        let c = p
            .iter()
            .fold((0.0, 0.0), |s, q| (s.0 + q.0 as f64, s.1 + q.1 as f64));
        let c = (c.0 * t, c.1 * t);
        let s = p
            .iter()
            .map(|q| (q.0 as f64 - c.0).hypot(q.1 as f64 - c.1))
            .sum::<f64>()
            * t;
        (s >= f32::EPSILON as f64).then(|| (c, std::f64::consts::SQRT_2 / s))
    };
    let (Some((c1, s1)), Some((c2, s2))) = (norm(a), norm(b)) else {
        return none;
    };
    let mut m = [[0.0f64; 9]; 7];
    for (i, row) in m.iter_mut().enumerate() {
        let x0 = (a[i].0 as f64 - c1.0) * s1;
        let y0 = (a[i].1 as f64 - c1.1) * s1;
        let x1 = (b[i].0 as f64 - c2.0) * s2;
        let y1 = (b[i].1 as f64 - c2.1) * s2;
        *row = [x1 * x0, x1 * y0, x1, y1 * x0, y1 * y0, y1, x0, y0, 1.0];
    }
    let Some([n1, n2]) = null_space_7x9(m) else {
        return none;
    };
    let f2 = n2;
    let f1: [f64; 9] = std::array::from_fn(|j| n1[j] - f2[j]);
    let det3 = |p: &[f64], q: &[f64]| -> f64 {
        // sum over the cofactors of q times p's entries
        p[0] * (q[4] * q[8] - q[5] * q[7]) - p[1] * (q[3] * q[8] - q[5] * q[6])
            + p[2] * (q[3] * q[7] - q[4] * q[6])
            - p[3] * (q[1] * q[8] - q[2] * q[7])
            + p[4] * (q[0] * q[8] - q[2] * q[6])
            - p[5] * (q[0] * q[7] - q[1] * q[6])
            + p[6] * (q[1] * q[5] - q[2] * q[4])
            - p[7] * (q[0] * q[5] - q[2] * q[3])
            + p[8] * (q[0] * q[4] - q[1] * q[3])
    };
    let det = |p: &[f64]| {
        p[0] * (p[4] * p[8] - p[5] * p[7]) - p[1] * (p[3] * p[8] - p[5] * p[6])
            + p[2] * (p[3] * p[7] - p[4] * p[6])
    };
    let c = [det(&f1), det3(&f2, &f1), det3(&f1, &f2), det(&f2)];
    let t1 = Matrix3::new(s1, 0.0, -s1 * c1.0, 0.0, s1, -s1 * c1.1, 0.0, 0.0, 1.0);
    let t2 = Matrix3::new(s2, 0.0, -s2 * c2.0, 0.0, s2, -s2 * c2.1, 0.0, 0.0, 1.0);
    let mut out = none;
    for &root in solve_cubic(c).as_slice() {
        out.items[out.len] = {
            let (mut lambda, mut mu) = (root, 1.0);
            let s = f1[8] * root + f2[8];
            let mut f = [0.0; 9];
            if s.abs() > f64::EPSILON {
                mu = 1.0 / s;
                lambda *= mu;
                f[8] = 1.0;
            }
            for i in 0..8 {
                f[i] = f1[i] * lambda + f2[i] * mu;
            }
            let mut f = t2.transpose() * Matrix3::from_row_slice(&f) * t1;
            if f[(2, 2)].abs() > f32::EPSILON as f64 {
                f *= 1.0 / f[(2, 2)];
            }
            f
        };
        out.len += 1;
    }
    out
}

/// OpenCV's `findFundamentalMat` error of one pair: the larger squared distance of each
/// point to the epipolar line of the other, rounded to f32.
pub fn epipolar_error(f: &Matrix3<f64>, p: (f32, f32), q: (f32, f32)) -> f32 {
    let (px, py, qx, qy) = (p.0 as f64, p.1 as f64, q.0 as f64, q.1 as f64);
    let a = f[(0, 0)] * px + f[(0, 1)] * py + f[(0, 2)];
    let b = f[(1, 0)] * px + f[(1, 1)] * py + f[(1, 2)];
    let c = f[(2, 0)] * px + f[(2, 1)] * py + f[(2, 2)];
    let s2 = 1.0 / (a * a + b * b);
    let d2 = qx * a + qy * b + c;
    let a = f[(0, 0)] * qx + f[(1, 0)] * qy + f[(2, 0)];
    let b = f[(0, 1)] * qx + f[(1, 1)] * qy + f[(2, 1)];
    let c = f[(0, 2)] * qx + f[(1, 2)] * qy + f[(2, 2)];
    let s1 = 1.0 / (a * a + b * b);
    let d1 = px * a + py * b + c;
    (d1 * d1 * s1).max(d2 * d2 * s2) as f32
}

/// `RANSACUpdateNumIters`.
fn update_iters(p: f64, ep: f64, model_points: i32, max_iters: usize) -> usize {
    let (p, ep) = (p.clamp(0.0, 1.0), ep.clamp(0.0, 1.0));
    let num = (1.0 - p).max(f64::MIN_POSITIVE);
    let denom = 1.0 - (1.0 - ep).powi(model_points);
    if denom < f64::MIN_POSITIVE {
        return 0;
    }
    let (num, denom) = (num.ln(), denom.ln());
    if denom >= 0.0 || -num >= max_iters as f64 * -denom {
        max_iters
    } else {
        (num / denom).round_ties_even() as usize
    }
}

/// The inlier mask of the pairs `a[i] -> b[i]` by OpenCV's `FM_RANSAC` procedure: its
/// generator and seed, 7-point samples rejected when collinear, every root a candidate, a
/// model kept when it has more inliers than the best so far, the iteration bound updated
/// from the inlier share. Fewer than 8 pairs: every pair kept (VINS skips the test).
/// (Allocates the mask; the tracker keeps a [`Ransac`] instead.)
pub fn ransac_mask(a: &[(f32, f32)], b: &[(f32, f32)], p: &RansacParams) -> Vec<bool> {
    Ransac::default().mask(a, b, p).to_vec()
}

/// [`ransac_mask`] with its two mask buffers kept between calls: once they have grown to
/// the number of pairs, a call allocates nothing (the samples, the 9x9 system and the
/// candidates live on the stack).
#[derive(Debug, Default)]
pub struct Ransac {
    best: Vec<bool>,
    candidate: Vec<bool>,
}

impl Ransac {
    /// Room for `n` pairs (no growth below that).
    pub fn reserve(&mut self, n: usize) {
        self.best.reserve(n);
        self.candidate.reserve(n);
    }

    /// The inlier mask of `a[i] -> b[i]`, as [`ransac_mask`] computes it.
    pub fn mask(&mut self, a: &[(f32, f32)], b: &[(f32, f32)], p: &RansacParams) -> &[bool] {
        let n = a.len().min(b.len());
        self.best.clear();
        self.best.resize(n, true);
        if n < 8 {
            return &self.best;
        }
        let thr = (p.threshold * p.threshold) as f32;
        let mut rng = CvRng(u64::MAX);
        let mut best_count = 0usize;
        let mut niters = p.max_iters.max(1);
        let (mut sa, mut sb) = ([(0f32, 0f32); 7], [(0f32, 0f32); 7]);
        let mut idx = [0usize; 7];
        let mut iter = 0;
        while iter < niters {
            iter += 1;
            let mut found = false;
            for _ in 0..10_000 {
                for i in 0..7 {
                    idx[i] = loop {
                        let c = rng.below(n);
                        if !idx[..i].contains(&c) {
                            break c;
                        }
                    };
                }
                for (k, &i) in idx.iter().enumerate() {
                    (sa[k], sb[k]) = (a[i], b[i]);
                }
                if !collinear(&sa) && !collinear(&sb) {
                    found = true;
                    break;
                }
            }
            if !found {
                break;
            }
            for f in seven_point(&sa, &sb).as_slice() {
                self.candidate.clear();
                self.candidate.extend(
                    a.iter()
                        .zip(b)
                        .map(|(&p, &q)| epipolar_error(f, p, q) <= thr),
                );
                let good = self.candidate.iter().filter(|&&m| m).count();
                if good > best_count.max(6) {
                    std::mem::swap(&mut self.best, &mut self.candidate);
                    best_count = good;
                    niters = update_iters(p.confidence, (n - good) as f64 / n as f64, 7, niters);
                }
            }
        }
        &self.best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = (Vec<(f32, f32)>, Vec<(f32, f32)>);

    /// Two views of pseudo-random 3-D points: camera 2 translated and rotated a little.
    fn views(n: usize) -> Pairs {
        let mut rng = CvRng(7);
        let mut u = |k: f64| rng.below(10_000) as f64 / 10_000.0 * k;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (c, s) = (0.05f64.cos(), 0.05f64.sin());
        for _ in 0..n {
            let (x, y, z) = (u(2.0) - 1.0, u(2.0) - 1.0, 3.0 + u(3.0));
            a.push((
                (400.0 * x / z + 320.0) as f32,
                (400.0 * y / z + 240.0) as f32,
            ));
            let (x2, z2) = (c * x + s * z - 0.3, -s * x + c * z);
            let y2 = y + 0.05;
            b.push((
                (400.0 * x2 / z2 + 320.0) as f32,
                (400.0 * y2 / z2 + 240.0) as f32,
            ));
        }
        (a, b)
    }

    #[test]
    fn seven_points_fit_and_outliers_are_found() {
        let (a, mut b) = views(60);
        let fs = seven_point(&a[..7], &b[..7]);
        assert!(fs.len > 0);
        // One of the candidates explains all 60 pairs (to f32 rounding of the points).
        let best = fs
            .as_slice()
            .iter()
            .map(|f| {
                a.iter()
                    .zip(&b)
                    .map(|(&p, &q)| epipolar_error(f, p, q))
                    .fold(0f32, f32::max)
            })
            .fold(f32::MAX, f32::min);
        assert!(best < 0.01, "{best}");
        for i in [3, 17, 40] {
            b[i].0 += 25.0;
            b[i].1 -= 18.0;
        }
        let m = ransac_mask(&a, &b, &RansacParams::default());
        for (i, &keep) in m.iter().enumerate() {
            assert_eq!(keep, ![3, 17, 40].contains(&i), "pair {i}");
        }
        assert_eq!(
            m,
            ransac_mask(&a, &b, &RansacParams::default()),
            "deterministic"
        );
        assert_eq!(
            ransac_mask(&a[..5], &b[..5], &RansacParams::default()),
            vec![true; 5]
        );
        // Reused buffers: a kept Ransac gives each call the mask of a fresh one.
        let (a2, b2) = views(40);
        let mut kept = Ransac::default();
        for (x, y) in [(&a, &b), (&a2, &b2), (&a, &b)] {
            let fresh = ransac_mask(x, y, &RansacParams::default());
            assert_eq!(kept.mask(x, y, &RansacParams::default()), &fresh[..]);
        }
    }

    #[test]
    fn the_null_space_is_two_independent_solutions_or_none() {
        let mut rng = CvRng(3);
        let mut m = [[0.0f64; 9]; 7];
        for v in m.iter_mut().flatten() {
            *v = rng.below(2001) as f64 / 1000.0 - 1.0;
        }
        let [n1, n2] = null_space_7x9(m).expect("rank 7");
        for n in [n1, n2] {
            for row in &m {
                let r: f64 = row.iter().zip(&n).map(|(a, b)| a * b).sum();
                assert!(r.abs() < 1e-12, "{r}");
            }
        }
        // Independent: not parallel.
        let dot: f64 = n1.iter().zip(&n2).map(|(a, b)| a * b).sum();
        let norm = |v: &[f64; 9]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!(dot.abs() < 0.999 * norm(&n1) * norm(&n2));
        // Rank 6 (a repeated row), and NaN: no basis.
        let mut low = m;
        low[6] = low[0];
        assert!(null_space_7x9(low).is_none());
        let mut bad = m;
        bad[2][4] = f64::NAN;
        assert!(null_space_7x9(bad).is_none());
    }

    #[test]
    fn cubic_roots_and_iteration_bound() {
        let mut r = solve_cubic([1.0, -6.0, 11.0, -6.0]).as_slice().to_vec();
        r.sort_by(f64::total_cmp);
        assert!(
            r.iter()
                .zip([1.0, 2.0, 3.0])
                .all(|(x, y)| (x - y).abs() < 1e-9),
            "{r:?}"
        );
        assert_eq!(solve_cubic([0.0, 0.0, 2.0, -4.0]).as_slice(), &[2.0]);
        assert_eq!(update_iters(0.99, 0.0, 7, 1000), 0, "no outliers: stop now");
        assert_eq!(update_iters(0.99, 0.5, 7, 1000), 587);
    }
}
