//! The frames the load generator publishes: crops of real photos in the encodings the node
//! accepts, and the malformed kinds of the soak (short buffer, wrong step, unknown encoding).

use std::path::{Path, PathBuf};

use image::RgbImage;
use r2r::sensor_msgs::msg::Image;

/// Encodings the generator can produce (the node's decode handles each).
pub const ENCODINGS: [&str; 5] = ["mono8", "bgr8", "rgb8", "bgra8", "mono16"];

/// Photo files under `path` (a file, or a directory's .jpg/.jpeg/.png/.pgm), sorted.
pub fn photo_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let rd = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            ["jpg", "jpeg", "png", "pgm"].contains(&ext.to_ascii_lowercase().as_str())
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!(
            "{}: no .jpg/.jpeg/.png/.pgm photos",
            path.display()
        ));
    }
    Ok(files)
}

pub fn load_photos(files: &[PathBuf]) -> Result<Vec<RgbImage>, String> {
    files
        .iter()
        .map(|f| {
            image::open(f)
                .map(|i| i.to_rgb8())
                .map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// A `width` x `height` crop of `photo` starting at a `variant`-dependent offset (tiled
/// when the photo is smaller), so that consecutive frames differ.
pub fn crop(photo: &RgbImage, width: usize, height: usize, variant: usize) -> RgbImage {
    crop_at(photo, width, height, (variant * 97, variant * 61))
}

/// Frame `d` of a pan of `n` frames across `photo` moving `step` px per frame: the crop of
/// `size` from the pan's origin + d * step, the pan centred on the photo where it fits.
pub fn pan_frame(
    photo: &RgbImage,
    (w, h): (usize, usize),
    (dx, dy): (usize, usize),
    (d, n): (usize, usize),
) -> RgbImage {
    let (pw, ph) = (photo.width() as usize, photo.height() as usize);
    let ox = pw.saturating_sub(w + dx * n) / 2;
    let oy = ph.saturating_sub(h + dy * n) / 2;
    crop_at(photo, w, h, (ox + d * dx, oy + d * dy))
}

/// A `width` x `height` crop of `photo` from pixel (`ox`, `oy`) (modulo the photo's size;
/// tiled when the photo is smaller): a pan's frames are crops at steadily moving offsets.
pub fn crop_at(
    photo: &RgbImage,
    width: usize,
    height: usize,
    (ox, oy): (usize, usize),
) -> RgbImage {
    let (pw, ph) = (photo.width() as usize, photo.height() as usize);
    let (ox, oy) = (ox % pw, oy % ph);
    RgbImage::from_fn(width as u32, height as u32, |x, y| {
        *photo.get_pixel(
            ((x as usize + ox) % pw) as u32,
            ((y as usize + oy) % ph) as u32,
        )
    })
}

/// `rgb` as a `sensor_msgs/Image` in `encoding` (one of [`ENCODINGS`]), rows packed.
pub fn encode(rgb: &RgbImage, encoding: &str) -> Image {
    let (w, h) = (rgb.width(), rgb.height());
    let px = rgb.pixels();
    // ITU-R 601 luma as image's own conversion computes it.
    let luma = || {
        image::DynamicImage::ImageRgb8(rgb.clone())
            .to_luma8()
            .into_raw()
    };
    let (data, bpp) = match encoding {
        "mono8" => (luma(), 1),
        "mono16" => (
            luma()
                .iter()
                .flat_map(|&v| ((v as u16) << 8).to_le_bytes())
                .collect(),
            2,
        ),
        "rgb8" => (rgb.as_raw().clone(), 3),
        "bgr8" => (px.flat_map(|p| [p[2], p[1], p[0]]).collect(), 3),
        "bgra8" => (px.flat_map(|p| [p[2], p[1], p[0], 255]).collect(), 4),
        other => panic!("encode: {other} is not one of ENCODINGS"),
    };
    Image {
        height: h,
        width: w,
        encoding: encoding.to_string(),
        is_bigendian: 0,
        step: w * bpp,
        data,
        ..Default::default()
    }
}

/// The ways the soak breaks a frame; the node must reject each with a decode error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    ShortBuffer,
    WrongStep,
    UnknownEncoding,
}

impl Malformed {
    pub const ALL: [Malformed; 3] = [
        Malformed::ShortBuffer,
        Malformed::WrongStep,
        Malformed::UnknownEncoding,
    ];

    /// A broken copy of the valid `msg`.
    pub fn apply(self, msg: &Image) -> Image {
        let mut m = msg.clone();
        match self {
            Malformed::ShortBuffer => m.data.truncate(m.data.len() / 2),
            Malformed::WrongStep => m.step = m.width / 2,
            Malformed::UnknownEncoding => m.encoding = "bayer_xyz42".into(),
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ros::convert::image_view;

    #[test]
    fn encoded_frames_decode_to_the_same_gray_and_broken_ones_are_refused() {
        let photo = RgbImage::from_fn(50, 40, |x, y| image::Rgb([x as u8 * 5, y as u8 * 6, 77]));
        let rgb = crop(&photo, 64, 48, 3);
        assert_eq!((rgb.width(), rgb.height()), (64, 48));
        let gray = |m: &Image| {
            let mut g = crate::image::GrayImage::default();
            crate::cpu::decode::decode(&image_view(m).unwrap(), &mut g);
            g.data
        };
        let mono = gray(&encode(&rgb, "mono8"));
        for e in ENCODINGS {
            let msg = encode(&rgb, e);
            assert!(image_view(&msg).is_ok(), "{e}");
            if e.ends_with('8') && e != "mono8" {
                // colour encodings carry the same pixels in another order
                assert_eq!(gray(&msg), gray(&encode(&rgb, "rgb8")), "{e}");
            }
            for bad in Malformed::ALL {
                assert!(image_view(&bad.apply(&msg)).is_err(), "{e} {bad:?}");
            }
        }
        assert_eq!(gray(&encode(&rgb, "mono16")), mono);
    }

    #[test]
    fn a_pans_frames_move_by_the_step() {
        let photo = RgbImage::from_fn(300, 200, |x, y| {
            image::Rgb([x as u8, y as u8, (x ^ y) as u8])
        });
        let (a, b) = (
            crop_at(&photo, 64, 48, (30, 20)),
            crop_at(&photo, 64, 48, (33, 22)),
        );
        for y in 0..46 {
            for x in 0..61 {
                assert_eq!(b.get_pixel(x, y), a.get_pixel(x + 3, y + 2));
            }
        }
        assert_eq!(a.get_pixel(0, 0), photo.get_pixel(30, 20));
        // A pan of 10 frames of 64x48 moving (3, 2) is centred: (300 - 94) / 2, (200 - 68) / 2.
        assert_eq!(
            pan_frame(&photo, (64, 48), (3, 2), (0, 10)),
            crop_at(&photo, 64, 48, (103, 66))
        );
        assert_eq!(
            pan_frame(&photo, (64, 48), (3, 2), (4, 10)),
            crop_at(&photo, 64, 48, (115, 74))
        );
        // Past the photo's edge the crop wraps around.
        assert_eq!(
            crop_at(&photo, 8, 8, (299, 0)).get_pixel(1, 0),
            photo.get_pixel(0, 0)
        );
    }
}
