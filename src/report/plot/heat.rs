//! The heat map of a grid of values over an image, and its colour scale.

use std::path::Path;

use plotters::prelude::*;

use super::*;
use crate::error::Result;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plot::tests::{check, tmp, L};

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
