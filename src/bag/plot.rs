//! PNG charts of the replay report and the bench, drawn with `plotters` into an RGB buffer
//! and encoded with `image`. Text uses DejaVu Sans embedded from `assets/fonts` (its license
//! is beside it), so no system font is needed. Every chart has a title and axis labels with
//! units; charts of several series have a legend.

use std::path::Path;
use std::sync::Once;

use ::image::{Rgb, RgbImage};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{Error, Result};

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
static FONT_DATA: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

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

/// Lines against a numeric x axis; a legend when there are several series. `y_range`
/// defaults to 0 .. a round number above the largest value.
pub fn lines(
    path: &Path,
    labels: Labels,
    series: &[Series],
    y_range: Option<(f64, f64)>,
) -> Result<()> {
    let pts = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (y0, y1) =
        y_range.unwrap_or_else(|| (0.0, nice_max(pts().map(|p| p.1).fold(0.0, f64::max))));
    // Integer x (frame indices): at most one tick per integer.
    let x_ticks = if pts().all(|p| p.0.fract() == 0.0) {
        ((x1 - x0).round() as usize + 1).clamp(2, 10)
    } else {
        10
    };
    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(labels.title, title_font())
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(x_ticks)
            .x_desc(labels.x)
            .y_desc(labels.y)
            .axis_desc_style(axis_font())
            .label_style(tick_font())
            .light_line_style(RGBColor(245, 245, 245))
            .bold_line_style(RGBColor(215, 215, 215))
            .x_label_formatter(&|v| fmt_num(*v))
            .y_label_formatter(&|v| fmt_num(*v))
            .draw()
            .map_err(err)?;
        for (i, s) in series.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            let style = c.stroke_width(2);
            let drawn = if s.points.len() == 1 {
                // One point draws no line: a dot instead.
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(err)?
            } else {
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), style))
                    .map_err(err)?
            };
            drawn.label(s.name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3))
            });
        }
        if series.len() > 1 {
            legend(&mut chart, legend_corner(series, (x0, x1), (y0, y1)))?;
        }
        Ok(())
    })
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

/// Grouped bars: one slot per category, one bar per group (legend when several groups).
pub fn bars(
    path: &Path,
    labels: Labels,
    categories: &[String],
    groups: &[BarGroup],
    scale: Scale,
) -> Result<()> {
    let n = categories.len().max(1);
    let vals = || {
        groups
            .iter()
            .flat_map(|g| g.values.iter().flatten().copied())
            .filter(|v| v.is_finite())
    };
    // Log scale: plot log10(v) on a linear axis whose ticks print 10^t.
    let (y0, y1, tf): (f64, f64, fn(f64) -> f64) = match scale {
        // Headroom above the tallest bar for the legend (upper left).
        Scale::Linear => (0.0, nice_max(vals().fold(0.0, f64::max) * 1.3), |v| v),
        Scale::Log => {
            let pos: Vec<f64> = vals().filter(|v| *v > 0.0).collect();
            let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = pos.iter().copied().fold(0.0, f64::max);
            let (lo, hi) = if pos.is_empty() {
                (0.0, 1.0)
            } else {
                (
                    lo.log10().floor(),
                    (hi.log10() + 0.4).ceil().max(lo.log10().floor() + 1.0),
                )
            };
            (lo, hi, |v: f64| v.max(1e-12).log10())
        }
    };
    let slot = 0.8 / groups.len().max(1) as f64;
    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(labels.title, title_font())
            .margin(14)
            .x_label_area_size(62)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n as f64, y0..y1)
            .map_err(err)?;
        let log = scale == Scale::Log;
        let decades = (y1 - y0).round() as usize + 1;
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .x_desc(labels.x)
            .y_desc(labels.y)
            .axis_desc_style(axis_font())
            .label_style(tick_font())
            .light_line_style(RGBColor(245, 245, 245))
            .bold_line_style(RGBColor(215, 215, 215))
            .x_labels(0)
            .x_label_formatter(&|_| String::new());
        let log_fmt = |v: &f64| fmt_num(10f64.powf(*v));
        let lin_fmt = |v: &f64| fmt_num(*v);
        if log {
            mesh.y_labels(decades).y_label_formatter(&log_fmt);
        } else {
            mesh.y_label_formatter(&lin_fmt);
        }
        mesh.draw().map_err(err)?;
        for (gi, g) in groups.iter().enumerate() {
            let c = PALETTE[gi % PALETTE.len()];
            let rects = g.values.iter().enumerate().filter_map(|(i, v)| {
                let v = v.filter(|v| v.is_finite() && (!log || *v > 0.0))?;
                let xa = i as f64 + 0.1 + slot * gi as f64;
                Some(Rectangle::new(
                    [(xa, y0), (xa + slot * 0.92, tf(v).max(y0))],
                    c.filled(),
                ))
            });
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(g.name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        }
        if groups.len() > 1 {
            legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        }
        category_labels(root, |x| chart.backend_coord(&(x, y0)), categories)
    })
}

/// Box plot: per category a box from q1 to q3, a median line and whiskers.
pub fn boxes(
    path: &Path,
    labels: Labels,
    categories: &[String],
    stats: &[BoxStats],
    legend_names: [&str; 3],
) -> Result<()> {
    let n = categories.len().max(1);
    let y1 = nice_max(stats.iter().map(|b| b.whisker_hi).fold(0.0, f64::max) * 1.3);
    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(labels.title, title_font())
            .margin(14)
            .x_label_area_size(62)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n as f64, 0.0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(labels.x)
            .y_desc(labels.y)
            .axis_desc_style(axis_font())
            .label_style(tick_font())
            .light_line_style(RGBColor(245, 245, 245))
            .bold_line_style(RGBColor(215, 215, 215))
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .y_label_formatter(&|v| fmt_num(*v))
            .draw()
            .map_err(err)?;
        let fill = PALETTE[0].mix(0.35);
        let edge = PALETTE[0].stroke_width(2);
        let med = PALETTE[3].stroke_width(3);
        let whisk = RGBColor(60, 60, 60).stroke_width(1);
        chart
            .draw_series(stats.iter().enumerate().flat_map(|(i, b)| {
                let (l, r) = (i as f64 + 0.25, i as f64 + 0.75);
                [
                    Rectangle::new([(l, b.q1), (r, b.q3)], fill.filled()),
                    Rectangle::new([(l, b.q1), (r, b.q3)], edge),
                ]
            }))
            .map_err(err)?
            .label(legend_names[0])
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], fill.filled()));
        chart
            .draw_series(stats.iter().enumerate().map(|(i, b)| {
                PathElement::new(
                    vec![(i as f64 + 0.25, b.median), (i as f64 + 0.75, b.median)],
                    med,
                )
            }))
            .map_err(err)?
            .label(legend_names[1])
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], med));
        chart
            .draw_series(stats.iter().enumerate().flat_map(|(i, b)| {
                let c = i as f64 + 0.5;
                let (l, r) = (i as f64 + 0.4, i as f64 + 0.6);
                [
                    PathElement::new(vec![(c, b.whisker_lo), (c, b.q1)], whisk),
                    PathElement::new(vec![(c, b.q3), (c, b.whisker_hi)], whisk),
                    PathElement::new(vec![(l, b.whisker_lo), (r, b.whisker_lo)], whisk),
                    PathElement::new(vec![(l, b.whisker_hi), (r, b.whisker_hi)], whisk),
                ]
            }))
            .map_err(err)?
            .label(legend_names[2])
            .legend(move |(x, y)| PathElement::new(vec![(x + 7, y - 6), (x + 7, y + 6)], whisk));
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        category_labels(root, |x| chart.backend_coord(&(x, 0.0)), categories)
    })
}

/// A colour from dark blue (t = 0) through teal and green to yellow (t = 1).
pub fn heat_color(t: f64) -> RGBColor {
    const STOPS: [(f64, [f64; 3]); 5] = [
        (0.0, [40.0, 20.0, 90.0]),
        (0.25, [50.0, 90.0, 150.0]),
        (0.5, [30.0, 150.0, 140.0]),
        (0.75, [110.0, 200.0, 80.0]),
        (1.0, [250.0, 230.0, 40.0]),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let k = STOPS.iter().position(|s| s.0 >= t).unwrap_or(4).max(1);
    let ((ta, a), (tb, b)) = (STOPS[k - 1], STOPS[k]);
    let f = (t - ta) / (tb - ta);
    let m = |i: usize| (a[i] + (b[i] - a[i]) * f).round() as u8;
    RGBColor(m(0), m(1), m(2))
}

/// A heat map of `grid` over the image (x right, y down, pixels) with a colour bar whose
/// axis is labelled `value_label`.
pub fn heatmap(path: &Path, labels: Labels, grid: &Grid, value_label: &str) -> Result<()> {
    let (iw, ih) = (
        (grid.cols * grid.cell) as f64,
        (grid.rows * grid.cell) as f64,
    );
    let (iw, ih) = (iw.max(1.0), ih.max(1.0));
    let vmax = grid.values.iter().copied().fold(0.0, f64::max);
    let vmax = if vmax > 0.0 { vmax } else { 1.0 };
    render(path, |root| {
        let root = root.margin(6, 0, 0, 0);
        let root = root.titled(labels.title, title_font()).map_err(err)?;
        let (left, right) = root.split_horizontally(W as i32 - 130);
        let mut chart = ChartBuilder::on(&left)
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..iw, -ih..0.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(labels.x)
            .y_desc(labels.y)
            .axis_desc_style(axis_font())
            .label_style(tick_font())
            .x_label_formatter(&|v| fmt_num(*v))
            // Image rows run downwards: y is drawn negated, the labels count from the top.
            .y_label_formatter(&|v| fmt_num(-*v + 0.0))
            .draw()
            .map_err(err)?;
        let cell = grid.cell as f64;
        chart
            .draw_series((0..grid.rows).flat_map(|r| {
                (0..grid.cols).map(move |c| {
                    let v = grid.values.get(r * grid.cols + c).copied().unwrap_or(0.0);
                    let (x, y) = (c as f64 * cell, -(r as f64) * cell);
                    Rectangle::new(
                        [(x, y), (x + cell, y - cell)],
                        heat_color(v / vmax).filled(),
                    )
                })
            }))
            .map_err(err)?;
        let mut bar = ChartBuilder::on(&right)
            .margin_top(14)
            .margin_bottom(64)
            .margin_right(8)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..1.0, 0.0..vmax)
            .map_err(err)?;
        bar.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .y_desc(value_label)
            .axis_desc_style((FONT, 14).into_font())
            .label_style(tick_font())
            .y_label_formatter(&|v| fmt_num(*v))
            .draw()
            .map_err(err)?;
        let steps = 64;
        bar.draw_series((0..steps).map(|i| {
            let (a, b) = (i as f64 / steps as f64, (i + 1) as f64 / steps as f64);
            Rectangle::new(
                [(0.0, a * vmax), (1.0, b * vmax)],
                heat_color((a + b) / 2.0).filled(),
            )
        }))
        .map_err(err)?;
        Ok(())
    })
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

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gpu_features_plot_{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    /// Loads a written chart and checks its size, that its plot area is drawn and that the
    /// title band holds text.
    fn check(path: &Path) -> RgbImage {
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

    const L: Labels = Labels {
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
    fn line_chart_has_lines_and_a_legend() {
        let p = tmp("lines.png");
        let a = Series {
            name: "first".into(),
            points: (0..50).map(|i| (i as f64, (i % 7) as f64)).collect(),
        };
        let b = Series {
            name: "second".into(),
            points: (0..50).map(|i| (i as f64, 3.0)).collect(),
        };
        lines(&p, L, &[a.clone(), b], None).unwrap();
        let img = check(&p);
        // Series colours are present.
        let has = |c: RGBColor| img.pixels().any(|px| px.0 == [c.0, c.1, c.2]);
        assert!(has(PALETTE[0]) && has(PALETTE[1]));
        // One series: no legend box, so fewer drawn pixels in the upper right.
        lines(&p, L, &[a], None).unwrap();
        let single = check(&p);
        let corner = |i: &RgbImage| ink_pixels(i, W - 250..W - 20, 40..110);
        assert!(corner(&img) > corner(&single) + 300);
        // Degenerate inputs still make a chart.
        lines(&p, L, &[], Some((0.0, 1.0))).unwrap();
        check(&p);
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

    #[test]
    fn bars_and_boxes_label_their_categories() {
        let p = tmp("bars.png");
        let cats: Vec<String> = ["decode", "pyramid", "fast"].map(String::from).to_vec();
        let groups = [
            BarGroup {
                name: "GPU".into(),
                values: vec![Some(0.1), Some(0.5), None],
            },
            BarGroup {
                name: "CPU".into(),
                values: vec![Some(3.0), Some(20.0), Some(40.0)],
            },
        ];
        for scale in [Scale::Linear, Scale::Log] {
            bars(&p, L, &cats, &groups, scale).unwrap();
            let img = check(&p);
            assert!(img
                .pixels()
                .any(|px| px.0 == [PALETTE[1].0, PALETTE[1].1, PALETTE[1].2]));
        }
        // The category names are drawn under the axis: more ink there than with blank names.
        let label_band = |i: &RgbImage| ink_pixels(i, 100..W, H - 74..H - 50);
        let with = ::image::open(&p).unwrap().to_rgb8();
        let blank = vec![String::new(); 3];
        bars(&p, L, &blank, &groups, Scale::Log).unwrap();
        let without = check(&p);
        assert!(label_band(&with) > label_band(&without) + 100);

        let b = BoxStats {
            whisker_lo: 1.0,
            q1: 2.0,
            median: 3.0,
            q3: 4.0,
            whisker_hi: 6.0,
        };
        boxes(&p, L, &cats, &[b, b, b], ["a", "b", "c"]).unwrap();
        let img = check(&p);
        assert!(img
            .pixels()
            .any(|px| px.0 == [PALETTE[3].0, PALETTE[3].1, PALETTE[3].2]));
    }

    #[test]
    fn heatmap_colours_follow_the_values() {
        let p = tmp("heat.png");
        // 4x2 cells of 32 px; only the top-left cell is hot.
        let mut v = vec![0.0; 8];
        v[0] = 5.0;
        heatmap(
            &p,
            L,
            &Grid {
                cols: 4,
                rows: 2,
                cell: 32,
                values: &v,
            },
            "keypoints / frame",
        )
        .unwrap();
        let img = check(&p);
        let hot = heat_color(1.0);
        let cold = heat_color(0.0);
        let count = |c: RGBColor| img.pixels().filter(|px| px.0 == [c.0, c.1, c.2]).count();
        // Seven cold cells for one hot one (plus the colour bar ends).
        assert!(
            count(cold) > 4 * count(hot),
            "{} {}",
            count(cold),
            count(hot)
        );
        assert!(count(hot) > 100);
        assert_eq!(heat_color(0.0), RGBColor(40, 20, 90));
        assert_eq!(heat_color(1.0), RGBColor(250, 230, 40));
        assert_eq!(heat_color(f64::NAN), heat_color(0.0));
    }
}
