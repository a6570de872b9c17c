//! Evaluation measures of the replay report.
//!
//! # Frame-to-frame tracking ([`track`])
//!
//! A keypoint `p` of frame t counts as *re-found* in frame t+1 when frame t+1 has a keypoint
//! `q` with
//! * `|q - p| <= TRACK_RADIUS` level-0 pixels (both coordinates, i.e. a square window),
//! * `|octave(q) - octave(p)| <= 1`, and
//! * a zero-mean normalised cross-correlation (ZNCC) of at least [`TRACK_MIN_ZNCC`] between
//!   the two 15x15-sample gray patches around `p` (in frame t) and `q` (in frame t+1),
//!   sampled every `s = round(1.2^octave)` level-0 pixels (so a patch covers the same
//!   neighbourhood at every pyramid level).
//!
//! The tracking ratio of a frame pair is re-found / tried, where tried counts the keypoints
//! of frame t whose patch lies inside the image. The report also gives the position-only
//! ratio (first two conditions only), an upper bound that ignores appearance.
//!
//! # Homography protocol ([`evaluate_pair`])
//!
//! Repeatability and matching score as in Mikolajczyk et al., "A comparison of affine region
//! detectors" (IJCV 2005), for image pairs with a known homography H (image 1 -> image 2):
//! * A keypoint is the disc of diameter `size` around (x, y), in level-0 pixels.
//! * Only keypoints in the common part count: `H p1` inside image 2, `H^-1 p2` inside image 1.
//! * The overlap error of a pair is `1 - area(A ∩ B) / area(A ∪ B)`, where A is the disc of
//!   p1 mapped into image 2 through the local affine approximation of H at p1 (an ellipse)
//!   and B the disc of p2. As in the protocol, both regions are first rescaled about their
//!   centres by the factor that gives A a radius of 30 px (the centres do not move), so the
//!   error does not favour large regions. Areas are integrated on a 48x48 sample grid over
//!   the pair's bounding box.
//! * Two keypoints correspond when their overlap error is below 0.4; correspondences are
//!   made one-to-one greedily, lowest error first. Repeatability = correspondences /
//!   min(n1, n2), over the common part.
//! * Matching score = correct nearest-neighbour descriptor matches / min(n1, n2): each
//!   keypoint of image 1 is matched to the image-2 keypoint at the smallest Hamming distance,
//!   and the match is correct when that pair's overlap error is below 0.4.
//!
//! The library computes no descriptor, so this module brings a steered BRIEF of its own:
//! 256 intensity comparisons of point pairs drawn once from an isotropic Gaussian
//! (sigma = patch/5, clamped to a 27x27 square) by a fixed-seed generator, rotated by the
//! keypoint's angle and sampled on the keypoint's own pyramid level after a 7x7 Gaussian blur
//! (sigma 2). It is ORB's recipe with an untrained pattern, so the matching score measures
//! our keypoints plus this descriptor; `scripts/eval_homography.py` also scores our
//! keypoints with OpenCV's ORB descriptor for a descriptor-neutral comparison.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::cpu::CpuPipeline;
use crate::error::{Error, Result};
use crate::image::{load_view_owned, GrayImage};
use crate::pipeline::Keypoint;

pub const TRACK_RADIUS: f32 = 8.0;
pub const TRACK_MIN_ZNCC: f64 = 0.8;
const TRACK_PATCH_R: i32 = 7;

/// Tracking result of one frame pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrackStats {
    /// Keypoints of the earlier frame that were tested.
    pub tried: usize,
    /// Re-found by position, octave and appearance (ZNCC).
    pub refound: usize,
    /// Re-found by position and octave only.
    pub refound_position: usize,
}

fn octave_step(octave: i32) -> i32 {
    (1.2f32.powi(octave.max(0))).round().max(1.0) as i32
}

/// The 15x15 patch of `img` around (x, y) with sample spacing `s`, or `None` if it leaves
/// the image.
fn patch(img: &GrayImage, x: f32, y: f32, s: i32, out: &mut [f64; 225]) -> bool {
    let (cx, cy) = (x.round() as i32, y.round() as i32);
    let r = TRACK_PATCH_R * s;
    if cx - r < 0 || cy - r < 0 || cx + r >= img.width as i32 || cy + r >= img.height as i32 {
        return false;
    }
    let mut i = 0;
    for dy in -TRACK_PATCH_R..=TRACK_PATCH_R {
        for dx in -TRACK_PATCH_R..=TRACK_PATCH_R {
            out[i] = img.get((cx + dx * s) as usize, (cy + dy * s) as usize) as f64;
            i += 1;
        }
    }
    true
}

fn zncc(a: &[f64; 225], b: &[f64; 225]) -> f64 {
    let n = a.len() as f64;
    let ma = a.iter().sum::<f64>() / n;
    let mb = b.iter().sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let (u, v) = (x - ma, y - mb);
        sab += u * v;
        saa += u * u;
        sbb += v * v;
    }
    if saa <= 1e-9 || sbb <= 1e-9 {
        // Flat patches: equal means match, anything else does not.
        return if (ma - mb).abs() < 1.0 { 1.0 } else { 0.0 };
    }
    sab / (saa * sbb).sqrt()
}

/// Buckets keypoints into square cells for radius queries.
struct Grid {
    cell: f32,
    cols: usize,
    rows: usize,
    cells: Vec<Vec<usize>>,
}

impl Grid {
    fn new(kps: &[Keypoint], cell: f32) -> Grid {
        let maxx = kps.iter().map(|k| k.x).fold(0.0f32, f32::max);
        let maxy = kps.iter().map(|k| k.y).fold(0.0f32, f32::max);
        let cols = (maxx / cell) as usize + 1;
        let rows = (maxy / cell) as usize + 1;
        let mut cells = vec![Vec::new(); cols * rows];
        for (i, k) in kps.iter().enumerate() {
            let (cx, cy) = (
                (k.x.max(0.0) / cell) as usize,
                (k.y.max(0.0) / cell) as usize,
            );
            cells[cy * cols + cx].push(i);
        }
        Grid {
            cell,
            cols,
            rows,
            cells,
        }
    }

    /// Indices of keypoints in cells touching the square of half-side `r` around (x, y).
    fn near(&self, x: f32, y: f32, r: f32, out: &mut Vec<usize>) {
        out.clear();
        let c0 = ((x - r).max(0.0) / self.cell) as usize;
        let r0 = ((y - r).max(0.0) / self.cell) as usize;
        let c1 = (((x + r).max(0.0) / self.cell) as usize).min(self.cols - 1);
        let r1 = (((y + r).max(0.0) / self.cell) as usize).min(self.rows - 1);
        for row in r0..=r1.max(r0).min(self.rows - 1) {
            for col in c0..=c1.max(c0).min(self.cols - 1) {
                out.extend_from_slice(&self.cells[row * self.cols + col]);
            }
        }
    }
}

/// Frame-to-frame tracking quality (see the module docs).
pub fn track(
    prev_gray: &GrayImage,
    prev: &[Keypoint],
    gray: &GrayImage,
    cur: &[Keypoint],
) -> TrackStats {
    let mut st = TrackStats::default();
    if cur.is_empty() {
        st.tried = prev
            .iter()
            .filter(|k| patch(prev_gray, k.x, k.y, octave_step(k.octave), &mut [0.0; 225]))
            .count();
        return st;
    }
    let grid = Grid::new(cur, 16.0);
    let mut cand = Vec::new();
    let (mut pa, mut pb) = ([0.0f64; 225], [0.0f64; 225]);
    for p in prev {
        let s = octave_step(p.octave);
        if !patch(prev_gray, p.x, p.y, s, &mut pa) {
            continue;
        }
        st.tried += 1;
        grid.near(p.x, p.y, TRACK_RADIUS, &mut cand);
        let mut by_pos = false;
        let mut by_look = false;
        for &i in &cand {
            let q = &cur[i];
            if (q.x - p.x).abs() > TRACK_RADIUS
                || (q.y - p.y).abs() > TRACK_RADIUS
                || (q.octave - p.octave).abs() > 1
            {
                continue;
            }
            by_pos = true;
            if patch(gray, q.x, q.y, s, &mut pb) && zncc(&pa, &pb) >= TRACK_MIN_ZNCC {
                by_look = true;
                break;
            }
        }
        st.refound_position += by_pos as usize;
        st.refound += by_look as usize;
    }
    st
}

// ---------------------------------------------------------------------------------------------
// Homography protocol

/// An image pair with its ground-truth homography (image 1 -> image 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomographyPair {
    pub name: String,
    pub img1: PathBuf,
    pub img2: PathBuf,
    /// OpenCV FileStorage XML/YAML with a 3x3 matrix, or a text file of 9 numbers.
    pub homography: PathBuf,
}

impl std::str::FromStr for HomographyPair {
    type Err = String;
    /// `IMG1,IMG2,H` or `NAME=IMG1,IMG2,H`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (name, rest) = match s.split_once('=') {
            Some((n, r)) => (Some(n.to_string()), r),
            None => (None, s),
        };
        let parts: Vec<&str> = rest.split(',').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(format!("{s:?}: expected [NAME=]IMG1,IMG2,HOMOGRAPHY"));
        }
        let stem = |p: &str| {
            Path::new(p)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        Ok(HomographyPair {
            name: name.unwrap_or_else(|| format!("{}-{}", stem(parts[0]), stem(parts[1]))),
            img1: parts[0].into(),
            img2: parts[1].into(),
            homography: parts[2].into(),
        })
    }
}

/// Reads a 3x3 homography: the `<data>` of an OpenCV matrix node (XML), the `data: [...]` of
/// a YAML one, or else the first 9 numbers of the file.
pub fn parse_homography(text: &str) -> Option<[f64; 9]> {
    let body = if let Some(i) = text.find("<data>") {
        let rest = &text[i + 6..];
        &rest[..rest.find("</data>")?]
    } else if let Some(i) = text.find("data:") {
        let rest = &text[i + 5..];
        let a = rest.find('[')?;
        let b = rest.find(']')?;
        &rest[a + 1..b]
    } else {
        text
    };
    let v: Vec<f64> = body
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse::<f64>())
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    (v.len() >= 9).then(|| {
        let mut h = [0.0; 9];
        h.copy_from_slice(&v[..9]);
        h
    })
}

fn apply(h: &[f64; 9], x: f64, y: f64) -> (f64, f64) {
    let w = h[6] * x + h[7] * y + h[8];
    (
        (h[0] * x + h[1] * y + h[2]) / w,
        (h[3] * x + h[4] * y + h[5]) / w,
    )
}

fn invert(h: &[f64; 9]) -> Option<[f64; 9]> {
    let [a, b, c, d, e, f, g, hh, i] = *h;
    let det = a * (e * i - f * hh) - b * (d * i - f * g) + c * (d * hh - e * g);
    if det.abs() < 1e-15 {
        return None;
    }
    let inv = [
        (e * i - f * hh) / det,
        (c * hh - b * i) / det,
        (b * f - c * e) / det,
        (f * g - d * i) / det,
        (a * i - c * g) / det,
        (c * d - a * f) / det,
        (d * hh - e * g) / det,
        (b * g - a * hh) / det,
        (a * e - b * d) / det,
    ];
    Some(inv)
}

/// Jacobian of the homography at (x, y): [[j00, j01], [j10, j11]].
fn jacobian(h: &[f64; 9], x: f64, y: f64) -> [f64; 4] {
    let w = h[6] * x + h[7] * y + h[8];
    let (u, v) = (h[0] * x + h[1] * y + h[2], h[3] * x + h[4] * y + h[5]);
    [
        (h[0] * w - u * h[6]) / (w * w),
        (h[1] * w - u * h[7]) / (w * w),
        (h[3] * w - v * h[6]) / (w * w),
        (h[4] * w - v * h[7]) / (w * w),
    ]
}

pub const OVERLAP_MAX_ERROR: f64 = 0.4;
const OVERLAP_GRID: usize = 48;
const NORM_RADIUS: f64 = 30.0;

/// A keypoint of image 1 mapped into image 2: centre and the inverse of the (rescaled)
/// affine map that takes the unit disc to its region, plus its scaled radius in image 1.
struct Mapped {
    c: (f64, f64),
    /// Inverse of k * J * r1 (maps image-2 offsets to the unit disc).
    inv: [f64; 4],
    /// Half-extent of the ellipse's bounding box.
    ext: (f64, f64),
    /// Normalisation factor k = 30 / r1.
    k: f64,
}

fn map_region(h: &[f64; 9], kp: &Keypoint) -> Option<Mapped> {
    let r1 = (kp.size as f64 / 2.0).max(0.5);
    let k = NORM_RADIUS / r1;
    let c = apply(h, kp.x as f64, kp.y as f64);
    let j = jacobian(h, kp.x as f64, kp.y as f64);
    let m = [j[0] * k * r1, j[1] * k * r1, j[2] * k * r1, j[3] * k * r1];
    let det = m[0] * m[3] - m[1] * m[2];
    if det.abs() < 1e-12 {
        return None;
    }
    let inv = [m[3] / det, -m[1] / det, -m[2] / det, m[0] / det];
    // Bounding box of {M u : |u| <= 1}: half-widths are the row norms of M.
    let ext = (m[0].hypot(m[1]), m[2].hypot(m[3]));
    Some(Mapped { c, inv, ext, k })
}

/// Overlap error between the mapped region `a` and the disc of `b` (image 2), both rescaled
/// by a's factor; 1.0 when they cannot overlap.
fn overlap_error(a: &Mapped, b: &Keypoint) -> f64 {
    let rb = a.k * (b.size as f64 / 2.0).max(0.5);
    let (bx, by) = (b.x as f64, b.y as f64);
    let x0 = (a.c.0 - a.ext.0).min(bx - rb);
    let x1 = (a.c.0 + a.ext.0).max(bx + rb);
    let y0 = (a.c.1 - a.ext.1).min(by - rb);
    let y1 = (a.c.1 + a.ext.1).max(by + rb);
    if (a.c.0 - bx).abs() > a.ext.0 + rb || (a.c.1 - by).abs() > a.ext.1 + rb {
        return 1.0;
    }
    let n = OVERLAP_GRID;
    let (sx, sy) = ((x1 - x0) / n as f64, (y1 - y0) / n as f64);
    let (mut inter, mut union) = (0usize, 0usize);
    let rb2 = rb * rb;
    for iy in 0..n {
        let y = y0 + (iy as f64 + 0.5) * sy;
        for ix in 0..n {
            let x = x0 + (ix as f64 + 0.5) * sx;
            let (dx, dy) = (x - a.c.0, y - a.c.1);
            let u = a.inv[0] * dx + a.inv[1] * dy;
            let v = a.inv[2] * dx + a.inv[3] * dy;
            let in_a = u * u + v * v <= 1.0;
            let in_b = (x - bx).powi(2) + (y - by).powi(2) <= rb2;
            inter += (in_a && in_b) as usize;
            union += (in_a || in_b) as usize;
        }
    }
    if union == 0 {
        1.0
    } else {
        1.0 - inter as f64 / union as f64
    }
}

/// Result of the protocol on one pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HomographyResult {
    pub name: String,
    pub n1: usize,
    pub n2: usize,
    /// Keypoints in the common part.
    pub n1_common: usize,
    pub n2_common: usize,
    pub correspondences: usize,
    pub repeatability: f64,
    pub correct_matches: usize,
    pub matching_score: f64,
}

/// Keypoints, their 256-bit descriptors and the image size.
pub type Described = (Vec<Keypoint>, Vec<[u64; 4]>, (usize, usize));

/// Keypoints + 256-bit descriptors of one image, on the CPU reference.
pub fn detect_with_descriptors(path: &Path, config: &Config) -> Result<Described> {
    let frame = load_view_owned(path)?;
    let view = frame.view()?;
    let mut cpu = CpuPipeline::new();
    let features = cpu.process(config, &view);
    let blurred: Vec<GrayImage> = cpu.levels().iter().map(gaussian7).collect();
    let pattern = brief_pattern(config.orient.patch_size);
    let scale = config.pyramid.scale_factor;
    let desc = features
        .keypoints
        .iter()
        .map(|k| {
            let lvl = &blurred[(k.octave.max(0) as usize).min(blurred.len() - 1)];
            let s = scale.powi(k.octave);
            describe(lvl, k.x / s, k.y / s, k.angle, &pattern)
        })
        .collect();
    Ok((features.keypoints, desc, (view.width(), view.height())))
}

/// Runs the protocol on one pair with the CPU reference.
pub fn evaluate_pair(pair: &HomographyPair, config: &Config) -> Result<HomographyResult> {
    let text =
        std::fs::read_to_string(&pair.homography).map_err(|e| Error::io(&pair.homography, e))?;
    let h = parse_homography(&text).ok_or_else(|| Error::ImageFile {
        path: pair.homography.clone(),
        msg: "no 3x3 homography found".into(),
    })?;
    let (k1, d1, size1) = detect_with_descriptors(&pair.img1, config)?;
    let (k2, d2, size2) = detect_with_descriptors(&pair.img2, config)?;
    evaluate_keypoints(&pair.name, &h, (&k1, &d1, size1), (&k2, &d2, size2)).ok_or_else(|| {
        Error::ImageFile {
            path: pair.homography.clone(),
            msg: "homography is singular".into(),
        }
    })
}

type Side<'a> = (&'a [Keypoint], &'a [[u64; 4]], (usize, usize));

/// The protocol on given keypoints and descriptors; `None` for a singular homography.
pub fn evaluate_keypoints(
    name: &str,
    h: &[f64; 9],
    (k1, d1, (w1, h1)): Side,
    (k2, d2, (w2, h2)): Side,
) -> Option<HomographyResult> {
    let hinv = invert(h)?;
    let inside = |(x, y): (f64, f64), w: usize, hh: usize| {
        x >= 0.0 && y >= 0.0 && x <= (w - 1) as f64 && y <= (hh - 1) as f64
    };
    let c1: Vec<usize> = (0..k1.len())
        .filter(|&i| inside(apply(h, k1[i].x as f64, k1[i].y as f64), w2, h2))
        .collect();
    let c2: Vec<usize> = (0..k2.len())
        .filter(|&i| inside(apply(&hinv, k2[i].x as f64, k2[i].y as f64), w1, h1))
        .collect();
    let kp2: Vec<Keypoint> = c2.iter().map(|&i| k2[i]).collect();
    let grid = (!kp2.is_empty()).then(|| Grid::new(&kp2, 32.0));
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    let mut near = Vec::new();
    let mut mapped_all = Vec::with_capacity(c1.len());
    for (a, &i) in c1.iter().enumerate() {
        let m = map_region(h, &k1[i]);
        if let (Some(m), Some(g)) = (&m, &grid) {
            // Regions reach at most ext + the largest disc of image 2.
            let maxr = kp2.iter().map(|k| k.size as f64 / 2.0).fold(0.0, f64::max) * m.k;
            let r = m.ext.0.max(m.ext.1) + maxr;
            g.near(m.c.0 as f32, m.c.1 as f32, r as f32, &mut near);
            for &b in &near {
                let e = overlap_error(m, &kp2[b]);
                if e < OVERLAP_MAX_ERROR {
                    pairs.push((e, a, b));
                }
            }
        }
        mapped_all.push(m);
    }
    pairs.sort_by(|x, y| x.0.total_cmp(&y.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    let mut used1 = vec![false; c1.len()];
    let mut used2 = vec![false; c2.len()];
    let mut corr = 0;
    for &(_, a, b) in &pairs {
        if !used1[a] && !used2[b] {
            used1[a] = true;
            used2[b] = true;
            corr += 1;
        }
    }
    // Nearest-neighbour descriptor matching, image 1 -> image 2.
    let mut correct = 0;
    if !c2.is_empty() {
        for (a, &i) in c1.iter().enumerate() {
            let best = c2
                .iter()
                .enumerate()
                .min_by_key(|(_, &j)| hamming(&d1[i], &d2[j]))
                .map(|(b, _)| b)
                .unwrap();
            if let Some(m) = &mapped_all[a] {
                if overlap_error(m, &kp2[best]) < OVERLAP_MAX_ERROR {
                    correct += 1;
                }
            }
        }
    }
    let denom = c1.len().min(c2.len());
    let ratio = |n: usize| {
        if denom == 0 {
            0.0
        } else {
            n as f64 / denom as f64
        }
    };
    Some(HomographyResult {
        name: name.to_string(),
        n1: k1.len(),
        n2: k2.len(),
        n1_common: c1.len(),
        n2_common: c2.len(),
        correspondences: corr,
        repeatability: ratio(corr),
        correct_matches: correct,
        matching_score: ratio(correct),
    })
}

fn hamming(a: &[u64; 4], b: &[u64; 4]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// 7x7 Gaussian blur, sigma 2, borders reflected (101), rounded to u8.
fn gaussian7(img: &GrayImage) -> GrayImage {
    let mut k = [0f32; 7];
    for (i, v) in k.iter_mut().enumerate() {
        let d = i as f32 - 3.0;
        *v = (-d * d / 8.0).exp();
    }
    let s: f32 = k.iter().sum();
    k.iter_mut().for_each(|v| *v /= s);
    let (w, h) = (img.width as i64, img.height as i64);
    let refl = |i: i64, n: i64| -> usize {
        if n == 1 {
            return 0;
        }
        let mut i = i;
        while i < 0 || i >= n {
            i = if i < 0 { -i } else { 2 * n - 2 - i };
        }
        i as usize
    };
    let mut tmp = vec![0f32; img.data.len()];
    for y in 0..h {
        for x in 0..w {
            let mut acc = 0.0;
            for (t, kv) in k.iter().enumerate() {
                acc += kv * img.get(refl(x + t as i64 - 3, w), y as usize) as f32;
            }
            tmp[(y * w + x) as usize] = acc;
        }
    }
    let mut out = GrayImage::new(img.width, img.height);
    for y in 0..h {
        for x in 0..w {
            let mut acc = 0.0;
            for (t, kv) in k.iter().enumerate() {
                acc += kv * tmp[refl(y + t as i64 - 3, h) * w as usize + x as usize];
            }
            out.data[(y * w + x) as usize] = acc.round().clamp(0.0, 255.0) as u8;
        }
    }
    out
}

/// 256 point pairs (x1, y1, x2, y2), fixed-seed Gaussian samples.
fn brief_pattern(patch_size: u32) -> Vec<[f32; 4]> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let sigma = patch_size as f64 / 5.0;
    let lim = (patch_size / 2).saturating_sub(2) as f64;
    let mut gauss = move || {
        let (u1, u2) = (next().max(1e-12), next());
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos() * sigma).clamp(-lim, lim)
            as f32
    };
    (0..256)
        .map(|_| [gauss(), gauss(), gauss(), gauss()])
        .collect()
}

fn describe(img: &GrayImage, x: f32, y: f32, angle: f32, pattern: &[[f32; 4]]) -> [u64; 4] {
    let a = if angle >= 0.0 {
        angle.to_radians()
    } else {
        0.0
    };
    let (c, s) = (a.cos(), a.sin());
    let (cx, cy) = (x.round(), y.round());
    let at = |px: f32, py: f32| {
        let xx = (cx + (px * c - py * s).round()).clamp(0.0, img.width as f32 - 1.0);
        let yy = (cy + (px * s + py * c).round()).clamp(0.0, img.height as f32 - 1.0);
        img.get(xx as usize, yy as usize)
    };
    let mut d = [0u64; 4];
    for (i, p) in pattern.iter().enumerate() {
        if at(p[0], p[1]) < at(p[2], p[3]) {
            d[i / 64] |= 1 << (i % 64);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kp(x: f32, y: f32, size: f32, octave: i32) -> Keypoint {
        Keypoint {
            x,
            y,
            response: 1.0,
            size,
            angle: 0.0,
            octave,
        }
    }

    const ID: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];

    #[test]
    fn overlap_error_of_identical_and_shifted_discs() {
        let a = map_region(&ID, &kp(100.0, 100.0, 31.0, 0)).unwrap();
        assert!(overlap_error(&a, &kp(100.0, 100.0, 31.0, 0)) < 0.02);
        // Disjoint after normalisation (radius 30, shift 100): error 1.
        assert_eq!(overlap_error(&a, &kp(200.0, 100.0, 31.0, 0)), 1.0);
        // Scale 2 apart: areas 1:4, error = 1 - 1/4.
        let e = overlap_error(&a, &kp(100.0, 100.0, 62.0, 0));
        assert!((e - 0.75).abs() < 0.03, "{e}");
    }

    #[test]
    fn protocol_on_exact_correspondences() {
        // Image 2 = image 1 shifted by (10, 5): every keypoint has its twin.
        let h = [1.0, 0.0, 10.0, 0.0, 1.0, 5.0, 0.0, 0.0, 1.0];
        let k1: Vec<Keypoint> = (0..20)
            .map(|i| kp(50.0 + 20.0 * i as f32, 60.0, 31.0, 0))
            .collect();
        let k2: Vec<Keypoint> = k1
            .iter()
            .map(|k| kp(k.x + 10.0, k.y + 5.0, 31.0, 0))
            .collect();
        let d: Vec<[u64; 4]> = (0..20u64).map(|i| [i * 7919, i, !i, i << 3]).collect();
        let r = evaluate_keypoints("t", &h, (&k1, &d, (640, 480)), (&k2, &d, (640, 480))).unwrap();
        assert_eq!((r.n1_common, r.n2_common), (20, 20));
        assert_eq!(r.correspondences, 20);
        assert_eq!(r.correct_matches, 20);
        assert_eq!(r.repeatability, 1.0);
        // Scrambled descriptors: matches mostly wrong.
        let d2: Vec<[u64; 4]> = d.iter().rev().cloned().collect();
        let r = evaluate_keypoints("t", &h, (&k1, &d, (640, 480)), (&k2, &d2, (640, 480))).unwrap();
        assert!(r.correct_matches < 5, "{r:?}");
        assert_eq!(r.correspondences, 20);
    }

    #[test]
    fn homography_files_parse() {
        let xml = "<?xml version=\"1.0\"?>\n<opencv_storage>\n<H13 type_id=\"opencv-matrix\">\
                   <rows>3</rows><cols>3</cols><dt>d</dt>\n<data>\n 1 0 2\n 0 1 3 0 0 1</data></H13>";
        assert_eq!(
            parse_homography(xml).unwrap(),
            [1.0, 0.0, 2.0, 0.0, 1.0, 3.0, 0.0, 0.0, 1.0]
        );
        assert_eq!(parse_homography("1 2 3\n4 5 6\n7 8 9\n").unwrap()[8], 9.0);
        assert!(parse_homography("1 2 3").is_none());
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/H1to3p.xml"),
        )
        .unwrap();
        let h = parse_homography(&text).unwrap();
        assert!((h[8] - 1.0).abs() < 1e-6, "{h:?}");
        let p: HomographyPair = "a/graf1.png,a/graf3.png,a/H.xml".parse().unwrap();
        assert_eq!(p.name, "graf1-graf3");
        assert!("x,y".parse::<HomographyPair>().is_err());
    }

    #[test]
    fn tracking_counts_a_static_scene() {
        let mut img = GrayImage::new(120, 120);
        for y in 0..120 {
            for x in 0..120 {
                img.data[y * 120 + x] = ((x * 7 + y * 13) % 251) as u8 ^ ((x * y) % 17) as u8;
            }
        }
        let kps = vec![kp(60.0, 60.0, 31.0, 0), kp(40.0, 70.0, 31.0, 1)];
        let st = track(&img, &kps, &img, &kps);
        assert_eq!(
            st,
            TrackStats {
                tried: 2,
                refound: 2,
                refound_position: 2
            }
        );
        let moved: Vec<Keypoint> = kps.iter().map(|k| kp(k.x + 30.0, k.y, 31.0, 0)).collect();
        assert_eq!(track(&img, &kps, &img, &moved).refound_position, 0);
        // Same positions, different content: position yes, appearance no.
        let mut other = img.clone();
        other
            .data
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i * 31 % 256) as u8);
        let st = track(&img, &kps, &other, &kps);
        assert_eq!((st.refound_position, st.refound), (2, 0));
    }
}
