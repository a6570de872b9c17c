//! Frame-to-frame tracking: re-found keypoints ([`track`]) and descriptor matches in the
//! tracking window ([`track_descriptors`]); the measures are defined in the [module docs](super).

use serde::{Deserialize, Serialize};

use super::{Grid, TRACK_MIN_ZNCC, TRACK_RADIUS};
use crate::error::Result;
use crate::features::{Descriptor, Keypoint};
use crate::image::GrayImage;
use crate::matching::{Match, MatchParams, Matcher};

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

/// Frame-to-frame tracking quality (see the [module docs](super)).
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

/// Descriptor tracking result of one frame pair (see the [module docs](super)).
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

/// Frame-to-frame descriptor tracking (see the [module docs](super)): matches the descriptors of the
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::testutil::{crop, described, kp};

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
