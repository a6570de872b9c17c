//! Line charts, grouped bar charts and box plots.

use std::path::Path;

use plotters::prelude::*;

use super::*;
use crate::error::Result;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plot::tests::{check, tmp, L};

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
}
