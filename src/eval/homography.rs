//! The homography protocol (repeatability and matching score, see the [module docs](super)):
//! image pairs, their ORB descriptors, and the scores of one pair.

use std::path::{Path, PathBuf};

use nalgebra::{Matrix3, Point2};
use serde::{Deserialize, Serialize};

use super::geometry::{apply, invert, map_region, overlap_error, OVERLAP_MAX_ERROR};
use super::Grid;
use crate::config::Config;
use crate::cpu::CpuPipeline;
use crate::error::{Error, Result};
use crate::features::{Descriptor, Keypoint};
use crate::image::{load_view_owned, ImageView};
use crate::matching::{match_descriptors, MatchParams};

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
pub fn parse_homography(text: &str) -> Option<Matrix3<f64>> {
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
    (v.len() >= 9).then(|| Matrix3::from_row_slice(&v[..9]))
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
    h: &Matrix3<f64>,
    (k1, d1, (w1, h1)): Side,
    (k2, d2, (w2, h2)): Side,
) -> Result<Option<HomographyResult>> {
    assert_eq!(k1.len(), d1.len(), "one descriptor per keypoint (image 1)");
    assert_eq!(k2.len(), d2.len(), "one descriptor per keypoint (image 2)");
    let Some(hinv) = invert(h) else {
        return Ok(None);
    };
    let inside = |p: Point2<f64>, w: usize, hh: usize| {
        p.x >= 0.0 && p.y >= 0.0 && p.x <= (w - 1) as f64 && p.y <= (hh - 1) as f64
    };
    let c1: Vec<usize> = (0..k1.len())
        .filter(|&i| {
            inside(
                apply(h, Point2::new(k1[i].x as f64, k1[i].y as f64)),
                w2,
                h2,
            )
        })
        .collect();
    let c2: Vec<usize> = (0..k2.len())
        .filter(|&i| {
            inside(
                apply(&hinv, Point2::new(k2[i].x as f64, k2[i].y as f64)),
                w1,
                h1,
            )
        })
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
            g.near(m.c.x as f32, m.c.y as f32, r as f32, &mut near);
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
    use crate::eval::testutil::{crop, described, kp};
    use crate::image::GrayImage;

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
        let h = Matrix3::new(1.0, 0.0, 10.0, 0.0, 1.0, 5.0, 0.0, 0.0, 1.0);
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
        let zero = Matrix3::<f64>::zeros();
        assert!(
            evaluate_keypoints("t", &zero, (&k1, &d, (640, 480)), (&k2, &d, (640, 480)))
                .unwrap()
                .is_none()
        );
    }

    /// `img` warped by `h` (image -> output), bilinear, black outside.
    fn warp(img: &GrayImage, h: &Matrix3<f64>) -> GrayImage {
        let hinv = invert(h).unwrap();
        let mut out = GrayImage::new(img.width, img.height);
        for y in 0..img.height {
            for x in 0..img.width {
                let s = apply(&hinv, Point2::new(x as f64, y as f64));
                let (sx, sy) = (s.x, s.y);
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
        let h = Matrix3::from_row_slice(&h0.map(|v| v / h0[8]));
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
            Matrix3::new(1.0, 0.0, 2.0, 0.0, 1.0, 3.0, 0.0, 0.0, 1.0)
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
}
