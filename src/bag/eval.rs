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
//! # Descriptor tracking ([`track_descriptors`])
//!
//! The ORB descriptors of frame t (queries) are matched against those of frame t+1 (train)
//! by the library matcher ([`crate::matching`]) with the replay's [`MatchParams`] (the
//! defaults: two nearest neighbours, Lowe ratio 0.8 and cross-check). Per frame pair:
//! * *matches* = the matches the matcher keeps;
//! * a match (p in frame t, q in frame t+1) is an *inlier* when q lies in p's tracking
//!   window: `|q - p| <= TRACK_RADIUS` level-0 pixels in x and in y, and
//!   `|octave(q) - octave(p)| <= 1` (the position conditions above, no appearance test);
//! * *inlier share* = inliers / matches (undefined, and left out of the bag's statistics,
//!   for a pair without matches).
//!
//! On a video whose motion between frames stays within the window this is the share of
//! descriptor matches that are geometrically plausible; on unrelated frames it falls to
//! the chance that a wrong match lands in the window (about `17^2 / area`).
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
//!   keypoint of image 1 in the common part is matched to the image-2 keypoint of the common
//!   part at the smallest Hamming distance (ties to the lower index), and the match is
//!   correct when that pair's overlap error is below 0.4.
//!
//! The descriptors are the library's own ORB descriptors (`Features::descriptors`, computed
//! with `describe.enabled` switched on, see [`describing`]), and the nearest neighbours come
//! from the library matcher ([`crate::matching::match_descriptors`] with
//! [`MatchParams::all`]: no ratio test, no cross-check, not one-to-one, so the matching score
//! can exceed the repeatability on easy pairs). The report prints it beside OpenCV ORB's,
//! from `scripts/eval_homography.py`, which implements the same protocol in numpy.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::cpu::CpuPipeline;
use crate::error::{Error, Result};
use crate::image::{load_view_owned, GrayImage, ImageView};
use crate::matching::{match_descriptors, Match, MatchParams, Matcher};
use crate::pipeline::{Descriptor, Keypoint};

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
            if !in_window(p, q) {
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

/// Descriptor tracking result of one frame pair (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchTrackStats {
    /// Descriptors (keypoints) of the earlier frame: the queries.
    pub query: usize,
    /// Descriptors (keypoints) of the later frame: the train set.
    pub train: usize,
    /// Matches the matcher kept.
    pub matches: usize,
    /// Matches whose two keypoints lie within the tracking window (position and octave).
    pub inliers: usize,
}

impl MatchTrackStats {
    /// inliers / matches; `None` without matches.
    pub fn inlier_share(&self) -> Option<f64> {
        (self.matches > 0).then(|| self.inliers as f64 / self.matches as f64)
    }
}

/// Whether `q` (later frame) lies in the tracking window of `p` (earlier frame):
/// `|q - p| <= TRACK_RADIUS` in x and y, octaves at most one apart.
fn in_window(p: &Keypoint, q: &Keypoint) -> bool {
    (q.x - p.x).abs() <= TRACK_RADIUS
        && (q.y - p.y).abs() <= TRACK_RADIUS
        && (q.octave - p.octave).abs() <= 1
}

/// Frame-to-frame descriptor tracking (see the module docs): matches the descriptors of the
/// earlier frame (`prev`, queries) against the later one's (`cur`, train) with `matcher`
/// under `params`, and counts the matches that land in the tracking window. `matches` is
/// the matcher's output buffer, reused between calls.
pub fn track_descriptors(
    matcher: &mut Matcher,
    params: &MatchParams,
    (prev_kp, prev_desc): (&[Keypoint], &[Descriptor]),
    (cur_kp, cur_desc): (&[Keypoint], &[Descriptor]),
    matches: &mut Vec<Match>,
) -> Result<MatchTrackStats> {
    assert_eq!(
        prev_kp.len(),
        prev_desc.len(),
        "one descriptor per keypoint"
    );
    assert_eq!(cur_kp.len(), cur_desc.len(), "one descriptor per keypoint");
    matcher.match_into(prev_desc, cur_desc, params, matches)?;
    let inliers = matches
        .iter()
        .filter(|m| in_window(&prev_kp[m.query as usize], &cur_kp[m.train as usize]))
        .count();
    Ok(MatchTrackStats {
        query: prev_desc.len(),
        train: cur_desc.len(),
        matches: matches.len(),
        inliers,
    })
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

/// Keypoints, their ORB descriptors (one per keypoint, same order) and the image size.
pub type Described = (Vec<Keypoint>, Vec<Descriptor>, (usize, usize));

/// `config` with ORB descriptors switched on (`describe.enabled`), validated: the config the
/// homography protocol detects and describes with.
pub fn describing(config: &Config) -> Result<Config> {
    let mut c = config.clone();
    c.describe.enabled = true;
    c.validate().map_err(|e| {
        Error::Config(format!(
            "the matching score needs ORB descriptors (describe.enabled: true), which this \
             config does not allow: {e}"
        ))
    })?;
    Ok(c)
}

/// Keypoints + ORB descriptors of one frame, on the CPU reference, with
/// [`describing`]`(config)`.
pub fn describe_view(view: &ImageView, config: &Config) -> Result<Described> {
    let config = describing(config)?;
    let features = CpuPipeline::new().process(&config, view);
    assert_eq!(
        features.descriptors.len(),
        features.keypoints.len(),
        "the pipeline gives one descriptor per keypoint"
    );
    Ok((
        features.keypoints,
        features.descriptors,
        (view.width(), view.height()),
    ))
}

/// Keypoints + ORB descriptors of one image file (see [`describe_view`]).
pub fn detect_with_descriptors(path: &Path, config: &Config) -> Result<Described> {
    let frame = load_view_owned(path)?;
    describe_view(&frame.view()?, config)
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
    evaluate_keypoints(&pair.name, &h, (&k1, &d1, size1), (&k2, &d2, size2))?.ok_or_else(|| {
        Error::ImageFile {
            path: pair.homography.clone(),
            msg: "homography is singular".into(),
        }
    })
}

/// One image of a pair: keypoints, their descriptors (same order) and (width, height).
pub type Side<'a> = (&'a [Keypoint], &'a [Descriptor], (usize, usize));

/// The protocol on given keypoints and descriptors; `Ok(None)` for a singular homography.
/// Errors only when a side has more than [`crate::matching::MAX_DESCRIPTORS`] keypoints.
pub fn evaluate_keypoints(
    name: &str,
    h: &[f64; 9],
    (k1, d1, (w1, h1)): Side,
    (k2, d2, (w2, h2)): Side,
) -> Result<Option<HomographyResult>> {
    assert_eq!(k1.len(), d1.len(), "one descriptor per keypoint (image 1)");
    assert_eq!(k2.len(), d2.len(), "one descriptor per keypoint (image 2)");
    let Some(hinv) = invert(h) else {
        return Ok(None);
    };
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
    // Nearest-neighbour descriptor matching, image 1 -> image 2, over the common parts, by
    // the library matcher with no test (every query keeps its nearest train descriptor;
    // ties go to the lower index, and `c2` keeps the image's keypoint order).
    let q: Vec<Descriptor> = c1.iter().map(|&i| d1[i]).collect();
    let t: Vec<Descriptor> = c2.iter().map(|&j| d2[j]).collect();
    let mut correct = 0;
    for m in match_descriptors(&q, &t, &MatchParams::all())? {
        if let Some(region) = &mapped_all[m.query as usize] {
            if overlap_error(region, &kp2[m.train as usize]) < OVERLAP_MAX_ERROR {
                correct += 1;
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
    Ok(Some(HomographyResult {
        name: name.to_string(),
        n1: k1.len(),
        n2: k2.len(),
        n1_common: c1.len(),
        n2_common: c2.len(),
        correspondences: corr,
        repeatability: ratio(corr),
        correct_matches: correct,
        matching_score: ratio(correct),
    }))
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

    /// `n` distinct pseudo-random descriptors (splitmix64), seeded.
    fn random_descriptors(n: usize, seed: u64) -> Vec<Descriptor> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                let mut d = [0u8; 32];
                for chunk in d.chunks_mut(8) {
                    state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
                }
                d
            })
            .collect()
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
        let d = random_descriptors(20, 7);
        let eval = |d2: &[Descriptor]| {
            evaluate_keypoints("t", &h, (&k1, &d, (640, 480)), (&k2, d2, (640, 480)))
                .unwrap()
                .unwrap()
        };
        let r = eval(&d);
        assert_eq!((r.n1_common, r.n2_common), (20, 20));
        assert_eq!(r.correspondences, 20);
        assert_eq!(r.correct_matches, 20);
        assert_eq!((r.repeatability, r.matching_score), (1.0, 1.0));
        // Reversed descriptors: every nearest neighbour is a keypoint >= 20 px away, whose
        // normalised disc overlaps too little.
        let d2: Vec<Descriptor> = d.iter().rev().cloned().collect();
        let r = eval(&d2);
        assert_eq!(r.correspondences, 20);
        assert_eq!(r.correct_matches, 0, "{r:?}");
        // Ties go to the lower image-2 index, as in the matcher. Image 2 holds keypoint 4's
        // descriptor twice; image-1 keypoint `lost` gets the complement of it (distance 256
        // to both copies, so its nearest neighbour is some other, wrong, keypoint).
        let tie = |copy: usize, lost: usize| {
            let (mut q, mut t) = (d.clone(), d.clone());
            t[copy] = d[4];
            q[lost] = d[4].map(|b| !b);
            evaluate_keypoints("t", &h, (&k1, &q, (640, 480)), (&k2, &t, (640, 480)))
                .unwrap()
                .unwrap()
        };
        // Copies at 4 and 5: keypoint 4 takes index 4 (right), keypoint 5 is lost.
        assert_eq!(tie(5, 5).correct_matches, 19);
        // Copies at 3 and 4: keypoint 4 takes index 3 (20 px off, wrong), 3 is lost.
        assert_eq!(tie(3, 3).correct_matches, 18);
        // A singular homography is not an error but no result.
        let zero = [0.0; 9];
        assert!(
            evaluate_keypoints("t", &zero, (&k1, &d, (640, 480)), (&k2, &d, (640, 480)))
                .unwrap()
                .is_none()
        );
    }

    /// A `w` x `h` gray crop at (x0, y0) of a test photo.
    fn crop(name: &str, x0: usize, y0: usize, w: usize, h: usize) -> GrayImage {
        let g = crate::image::load_gray(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data")
                .join(name),
        )
        .unwrap();
        let mut out = GrayImage::new(w, h);
        for y in 0..h {
            out.row_mut(y).copy_from_slice(&g.row(y0 + y)[x0..x0 + w]);
        }
        out
    }

    /// `img` warped by `h` (image -> output), bilinear, black outside.
    fn warp(img: &GrayImage, h: &[f64; 9]) -> GrayImage {
        let hinv = invert(h).unwrap();
        let mut out = GrayImage::new(img.width, img.height);
        for y in 0..img.height {
            for x in 0..img.width {
                let (sx, sy) = apply(&hinv, x as f64, y as f64);
                let (x0, y0) = (sx.floor(), sy.floor());
                if x0 < 0.0
                    || y0 < 0.0
                    || x0 + 1.0 >= img.width as f64
                    || y0 + 1.0 >= img.height as f64
                {
                    continue;
                }
                let (fx, fy) = (sx - x0, sy - y0);
                let (xi, yi) = (x0 as usize, y0 as usize);
                let p = |dx: usize, dy: usize| img.get(xi + dx, yi + dy) as f64;
                let v = (1.0 - fy) * ((1.0 - fx) * p(0, 0) + fx * p(1, 0))
                    + fy * ((1.0 - fx) * p(0, 1) + fx * p(1, 1));
                out.data[y * img.width + x] = v.round() as u8;
            }
        }
        out
    }

    fn described(img: &GrayImage) -> Described {
        let view = ImageView::mono8(&img.data, img.width, img.height).unwrap();
        describe_view(&view, &Config::default()).unwrap()
    }

    #[test]
    fn matching_score_with_our_descriptors_on_a_synthetic_homography() {
        // A real photo and its warp: rotation 12 degrees and scale 0.9 about the centre,
        // mild perspective.
        let img = crop("graf1.png", 200, 150, 400, 320);
        let (cx, cy) = (200.0, 160.0);
        let (c, s) = (
            12f64.to_radians().cos() * 0.9,
            12f64.to_radians().sin() * 0.9,
        );
        let (p, q) = (5e-5, -3e-5);
        // back(c) * persp * rot * to(-c), written out.
        let m = [c, -s, cx - c * cx + s * cy, s, c, cy - s * cx - c * cy];
        let h0 = [
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            p,
            q,
            1.0 - p * cx - q * cy,
        ];
        let h = h0.map(|v| v / h0[8]);
        let warped = warp(&img, &h);
        let (k1, d1, s1) = described(&img);
        let (k2, d2, s2) = described(&warped);
        assert!(
            k1.len() > 300 && k2.len() > 300,
            "{} {}",
            k1.len(),
            k2.len()
        );
        let r = evaluate_keypoints("warp", &h, (&k1, &d1, s1), (&k2, &d2, s2))
            .unwrap()
            .unwrap();
        eprintln!("synthetic warp, our ORB descriptors: {r:?}");
        assert!(r.repeatability > 0.5, "{r:?}");
        assert!(r.matching_score > 0.5, "{r:?}");
        // The same keypoints with image 2's descriptors scrambled (each keypoint gets the
        // descriptor of one half the list away): the descriptor no longer fits its
        // keypoint, matches land at random and almost none is correct.
        let n = d2.len();
        let scrambled: Vec<Descriptor> = (0..n).map(|i| d2[(i + n / 2) % n]).collect();
        let bad = evaluate_keypoints("warp", &h, (&k1, &d1, s1), (&k2, &scrambled, s2))
            .unwrap()
            .unwrap();
        assert_eq!(bad.correspondences, r.correspondences);
        assert!(bad.matching_score < 0.05, "{bad:?}");
    }

    #[test]
    fn descriptor_tracking_translation_vs_unrelated_frames() {
        let a = crop("graf1.png", 100, 100, 320, 240);
        // The camera moved 5 px right and 3 px down: content moves 5 px left, 3 px up.
        let b = crop("graf1.png", 105, 103, 320, 240);
        let other = crop("building.png", 100, 100, 320, 240);
        let (ka, da, _) = described(&a);
        let (kb, db, _) = described(&b);
        let (ko, dob, _) = described(&other);
        let mut matcher = Matcher::new(crate::pipeline::BackendChoice::Cpu).unwrap();
        let params = MatchParams::default();
        let mut buf = Vec::new();
        let mut run = |k2: &[Keypoint], d2: &[Descriptor]| {
            track_descriptors(&mut matcher, &params, (&ka, &da), (k2, d2), &mut buf).unwrap()
        };
        let same = run(&kb, &db);
        eprintln!("translation: {same:?}");
        assert_eq!((same.query, same.train), (ka.len(), kb.len()));
        assert!(same.matches * 2 > ka.len(), "{same:?}");
        assert!(same.inlier_share().unwrap() > 0.9, "{same:?}");
        let unrelated = run(&ko, &dob);
        eprintln!("unrelated: {unrelated:?}");
        assert!(
            unrelated.inlier_share().unwrap_or(0.0) < 0.1,
            "{unrelated:?}"
        );
        // The translated frame with its descriptors rotated by half the list.
        let n = db.len();
        let scrambled: Vec<Descriptor> = (0..n).map(|i| db[(i + n / 2) % n]).collect();
        let bad = run(&kb, &scrambled);
        eprintln!("scrambled: {bad:?}");
        assert_eq!(
            bad.matches, same.matches,
            "the same descriptor sets, permuted"
        );
        assert!(bad.inlier_share().unwrap() < 0.1, "{bad:?}");
        // No descriptors on one side: no matches, no share.
        let none = run(&[], &[]);
        assert_eq!((none.matches, none.inlier_share()), (0, None));
    }

    #[test]
    fn matching_score_needs_a_describable_config() {
        let mut c = Config::default();
        c.describe.enabled = false;
        assert!(describing(&c).unwrap().describe.enabled);
        c.orient.patch_size = 21;
        let e = describing(&c).unwrap_err().to_string();
        assert!(e.contains("describe.enabled"), "{e}");
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
