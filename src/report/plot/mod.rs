//! PNG charts of the replay report and the bench, drawn with `plotters` into an RGB buffer
//! and encoded with `image`. Text uses DejaVu Sans embedded from `assets/fonts` (its license
//! is beside it), so no system font is needed. Every chart has a title and axis labels with
//! units; charts of several series have a legend.
//!
//! * `charts`: line charts, grouped bars and box plots.
//! * `heat`: the heat map and its colour scale.
//! * this module: the shared types, fonts, rendering, axes and legend helpers.

use std::path::Path;
use std::sync::Once;

use ::image::{Rgb, RgbImage};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{Error, Result};

mod charts;
mod heat;

pub use self::charts::{bars, boxes, lines};
pub use self::heat::{heat_color, heatmap};

/// Width and height of every chart, pixels.
pub const W: u32 = 960;
pub const H: u32 = 480;
/// The chart background.
pub const BACKGROUND: [u8; 3] = [255, 255, 255];

/// Series colours, in order.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

const FONT: &str = "sans-serif";
static FONT_DATA: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FONT, FontStyle::Normal, FONT_DATA).is_err() {
            // The file is part of the build; a broken copy is a packaging bug.
            panic!("assets/fonts/DejaVuSans.ttf is not a usable TrueType font");
        }
    });
}

/// Title and axis labels (with units) of a chart.
#[derive(Clone, Copy, Debug)]
pub struct Labels<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
}

/// One named line of a line chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One named set of bars of a grouped bar chart: a value per category (None: no bar).
#[derive(Clone, Debug)]
pub struct BarGroup {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// Value axis of a bar chart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic (for values spanning decades, e.g. GPU vs CPU times).
    Log,
}

/// Five numbers of one box of a box plot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxStats {
    pub whisker_lo: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub whisker_hi: f64,
}

/// A grid of values over an image: `values[row * cols + col]`, `cell` pixels per cell.
#[derive(Clone, Debug)]
pub struct Grid<'a> {
    pub cols: usize,
    pub rows: usize,
    pub cell: usize,
    pub values: &'a [f64],
}

type PlotResult<T> = std::result::Result<T, String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Renders into a white W x H buffer and writes the PNG.
fn render(
    path: &Path,
    draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> PlotResult<()>,
) -> Result<()> {
    register_font();
    let mut buf = vec![0u8; (W * H * 3) as usize];
    let fail = |msg: String| Error::ImageFile {
        path: path.to_path_buf(),
        msg: format!("plot: {msg}"),
    };
    {
        let root = BitMapBackend::with_buffer(&mut buf, (W, H)).into_drawing_area();
        let [r, g, b] = BACKGROUND;
        root.fill(&RGBColor(r, g, b))
            .map_err(|e| fail(e.to_string()))?;
        draw(&root).map_err(fail)?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    let img = RgbImage::from_raw(W, H, buf).expect("buffer of W x H RGB pixels");
    img.save_with_format(path, ::image::ImageFormat::Png)
        .map_err(|e| fail(e.to_string()))
}

fn title_font() -> TextStyle<'static> {
    (FONT, 22).into_font().color(&BLACK)
}

fn axis_font() -> TextStyle<'static> {
    (FONT, 16).into_font().color(&BLACK)
}

fn tick_font() -> TextStyle<'static> {
    (FONT, 13).into_font().color(&RGBColor(40, 40, 40))
}

/// A short number for tick labels.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A round number at or above `v` (1, 2, 2.5 or 5 times a power of ten), for an axis end.
pub fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> PlotResult<()> {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(150, 150, 150))
        .label_font((FONT, 14).into_font())
        .draw()
        .map_err(err)
}

/// The corner of the plot area whose legend-sized region (45% of the width, 30% of the
/// height) holds the fewest points, the upper right on ties.
fn legend_corner(
    series: &[Series],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let inside = |right: bool, upper: bool, (x, y): (f64, f64)| {
        let fx = (x - x0) / (x1 - x0).max(f64::MIN_POSITIVE);
        let fy = (y - y0) / (y1 - y0).max(f64::MIN_POSITIVE);
        (if right { fx >= 0.55 } else { fx <= 0.45 }) && (if upper { fy >= 0.7 } else { fy <= 0.3 })
    };
    let count = |right, upper| {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|&&p| inside(right, upper, p))
            .count()
    };
    corners
        .into_iter()
        .min_by_key(|&(_, r, u)| count(r, u))
        .map_or(SeriesLabelPosition::UpperRight, |c| c.0)
}

/// Draws `categories` centred under their slots of a chart whose x axis runs 0..n (one unit
/// per category). Labels may hold `\n` for a second line.
fn category_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    at: impl Fn(f64) -> (i32, i32),
    categories: &[String],
) -> PlotResult<()> {
    let style = tick_font().pos(Pos::new(HPos::Center, VPos::Top));
    for (i, name) in categories.iter().enumerate() {
        let (px, py) = at(i as f64 + 0.5);
        for (l, line) in name.lines().enumerate() {
            root.draw(&Text::new(
                line.to_string(),
                (px, py + 6 + 15 * l as i32),
                style.clone(),
            ))
            .map_err(err)?;
        }
    }
    Ok(())
}

/// Pixels of a decoded chart that differ from the background (for tests).
pub fn ink_pixels(img: &RgbImage, x: std::ops::Range<u32>, y: std::ops::Range<u32>) -> usize {
    let bg = Rgb(BACKGROUND);
    y.flat_map(|y| x.clone().map(move |x| (x, y)))
        .filter(|&(x, y)| x < img.width() && y < img.height() && *img.get_pixel(x, y) != bg)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gpu_features_plot_{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    /// Loads a written chart and checks its size, that its plot area is drawn and that the
    /// title band holds text.
    pub(super) fn check(path: &Path) -> RgbImage {
        let img = ::image::open(path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (W, H), "{}", path.display());
        let all = ink_pixels(&img, 0..W, 0..H);
        assert!(all > 5_000, "{}: only {all} drawn pixels", path.display());
        assert!(
            all < (W * H) as usize * 9 / 10,
            "{}: filled",
            path.display()
        );
        // Title: the top 36 rows, centred.
        let title = ink_pixels(&img, W / 4..W * 3 / 4, 0..36);
        assert!(
            title > 150,
            "{}: title band has {title} pixels",
            path.display()
        );
        img
    }

    pub(super) const L: Labels = Labels {
        title: "Test chart title",
        x: "frame index",
        y: "time (ms)",
    };

    #[test]
    fn nice_max_is_above() {
        for v in [0.3, 1.0, 7.2, 13.0, 240.0, 99_999.0] {
            let m = nice_max(v);
            assert!(m >= v && m <= v * 2.5, "{v} -> {m}");
        }
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
        assert_eq!(nice_max(2.5), 2.5);
    }

    #[test]
    fn legend_avoids_the_data() {
        let s = |pts: &[(f64, f64)]| Series {
            name: "s".into(),
            points: pts.to_vec(),
        };
        let r = ((0.0, 10.0), (0.0, 1.0));
        // Shares near 1 fill the top: the legend goes to the bottom.
        let high = s(&[(0.0, 0.95), (5.0, 0.97), (10.0, 0.99)]);
        assert_eq!(
            legend_corner(&[high], r.0, r.1),
            SeriesLabelPosition::LowerRight
        );
        let rising = s(&[(0.0, 0.0), (5.0, 0.5), (10.0, 1.0)]);
        assert_eq!(
            legend_corner(&[rising], r.0, r.1),
            SeriesLabelPosition::UpperLeft
        );
        assert_eq!(
            legend_corner(&[], r.0, r.1),
            SeriesLabelPosition::UpperRight
        );
    }
}
