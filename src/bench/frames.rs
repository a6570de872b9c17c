//! The bench frames: crops of real photos (or mosaics of the test fixtures).

#[allow(unused_imports)]
use super::*;

pub(super) fn is_image(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .map(|e| {
            matches!(
                e.to_ascii_lowercase().as_str(),
                "jpg" | "jpeg" | "png" | "pgm"
            )
        })
        .unwrap_or(false)
}

/// Image files named by `--images` (directories expand to their image files, sorted).
pub(super) fn image_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::io(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && is_image(f))
                .collect();
            v.sort();
            out.extend(v);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(Error::Config(format!(
                "--images: {} is neither a file nor a directory",
                p.display()
            )));
        }
    }
    Ok(out)
}

/// The first of `rel` (as given, then beside Cargo.toml) that exists.
pub(super) fn find_dir(rel: &str) -> Option<PathBuf> {
    [
        PathBuf::from(rel),
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel),
    ]
    .into_iter()
    .find(|p| p.is_dir())
}

pub(super) fn load_photos(files: &[PathBuf]) -> Result<Vec<Photo>> {
    let mut photos = Vec::new();
    for f in files {
        let img = load_gray(f)?;
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        photos.push(Photo { name, img });
    }
    Ok(photos)
}

/// Crop positions (fractions of the free range), used in turn for the frames of one photo.
pub(super) const POS: [(f64, f64); 9] = [
    (0.5, 0.5),
    (0.0, 0.0),
    (1.0, 1.0),
    (1.0, 0.0),
    (0.0, 1.0),
    (0.25, 0.25),
    (0.75, 0.75),
    (0.75, 0.25),
    (0.25, 0.75),
];

pub(super) fn crop(src: &GrayImage, x0: usize, y0: usize, w: usize, h: usize) -> GrayImage {
    let mut out = GrayImage::new(w, h);
    for y in 0..h {
        out.row_mut(y).copy_from_slice(&src.row(y0 + y)[x0..x0 + w]);
    }
    out
}

/// `n` frames of `size`: crops of the photos at least that large (photo k % candidates, at
/// position POS[k / candidates]); when none is that large, mosaics of crops of all photos.
pub(super) fn make_frames(photos: &[Photo], size: Size, n: usize) -> FrameSet {
    let (w, h) = (size.width, size.height);
    let cands: Vec<&Photo> = photos
        .iter()
        .filter(|p| p.img.width >= w && p.img.height >= h)
        .collect();
    let mut set = FrameSet {
        frames: Vec::new(),
        sources: Vec::new(),
        tiled: cands.is_empty(),
    };
    if !cands.is_empty() {
        for k in 0..n {
            let p = cands[k % cands.len()];
            let (fx, fy) = POS[(k / cands.len()) % POS.len()];
            let x0 = ((p.img.width - w) as f64 * fx).round() as usize;
            let y0 = ((p.img.height - h) as f64 * fy).round() as usize;
            set.frames.push(crop(&p.img, x0, y0, w, h));
            set.sources.push(format!("{}@{x0},{y0}", p.name));
        }
        return set;
    }
    // Mosaic: cells of the smallest photo's size, each cell a crop of another photo.
    let cw = photos.iter().map(|p| p.img.width).min().unwrap_or(w).max(1);
    let ch = photos
        .iter()
        .map(|p| p.img.height)
        .min()
        .unwrap_or(h)
        .max(1);
    for k in 0..n {
        let mut img = GrayImage::new(w, h);
        let (fx, fy) = POS[k % POS.len()];
        let mut t = 0;
        for ty in (0..h).step_by(ch) {
            for tx in (0..w).step_by(cw) {
                let p = &photos[(k + t) % photos.len()];
                t += 1;
                let x0 = ((p.img.width - cw) as f64 * fx).round() as usize;
                let y0 = ((p.img.height - ch) as f64 * fy).round() as usize;
                let (tw, th) = (cw.min(w - tx), ch.min(h - ty));
                for y in 0..th {
                    img.row_mut(ty + y)[tx..tx + tw]
                        .copy_from_slice(&p.img.row(y0 + y)[x0..x0 + tw]);
                }
            }
        }
        set.frames.push(img);
        set.sources
            .push(format!("mosaic of {cw}x{ch} crops, starting at photo {k}"));
    }
    set
}
