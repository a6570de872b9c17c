//! Tiny PNG charts drawn with the `image` crate (no fonts from the system: axis numbers use a
//! built-in 3x5 pixel font, titles and legends live in the report's Markdown).

use std::path::Path;

use ::image::{Rgb, RgbImage};

use crate::error::Result;

pub const W: u32 = 720;
pub const H: u32 = 320;
const LEFT: i32 = 56;
const RIGHT: i32 = 12;
const TOP: i32 = 12;
const BOTTOM: i32 = 28;

pub const PALETTE: [[u8; 3]; 6] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
];

/// 3x5 glyphs, one row per u8 (bits 2..0 = left..right).
fn glyph(c: char) -> Option<[u8; 5]> {
    Some(match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        '-' => [0, 0, 7, 0, 0],
        'e' => [0, 7, 7, 4, 7],
        'k' => [4, 5, 6, 5, 5],
        _ => return None,
    })
}

/// A chart canvas with a y range and an x range mapped to the plot area.
pub struct Canvas {
    img: RgbImage,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl Canvas {
    /// A bar chart of `n` categories: x labels 1..=n under the bars' centres.
    pub fn categorical(n: usize, ymax: f64) -> Canvas {
        let mut c = Canvas::blank(0.0, n.max(1) as f64, 0.0, ymax);
        c.y_axis();
        let ink = [60, 60, 60];
        for i in 0..n {
            let x = c.px(i as f64 + 0.5);
            let s = (i + 1).to_string();
            c.text(x - 4 * s.len() as i32, H as i32 - BOTTOM + 8, &s, ink);
        }
        c.frame();
        c
    }

    /// A chart with numeric x and y axes (x ticks rounded to integers when the range allows).
    pub fn new(x0: f64, x1: f64, y0: f64, y1: f64) -> Canvas {
        let mut c = Canvas::blank(x0, x1, y0, y1);
        c.y_axis();
        c.x_axis();
        c.frame();
        c
    }

    fn blank(x0: f64, x1: f64, y0: f64, y1: f64) -> Canvas {
        let (x1, y1) = (
            if x1 > x0 { x1 } else { x0 + 1.0 },
            if y1 > y0 { y1 } else { y0 + 1.0 },
        );
        Canvas {
            img: RgbImage::from_pixel(W, H, Rgb([255, 255, 255])),
            x0,
            x1,
            y0,
            y1,
        }
    }

    fn px(&self, x: f64) -> i32 {
        let w = (W as i32 - LEFT - RIGHT) as f64;
        LEFT + ((x - self.x0) / (self.x1 - self.x0) * w).round() as i32
    }

    fn py(&self, y: f64) -> i32 {
        let h = (H as i32 - TOP - BOTTOM) as f64;
        H as i32 - BOTTOM - ((y - self.y0) / (self.y1 - self.y0) * h).round() as i32
    }

    fn put(&mut self, x: i32, y: i32, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as u32) < W && (y as u32) < H {
            self.img.put_pixel(x as u32, y as u32, Rgb(c));
        }
    }

    pub fn text(&mut self, x: i32, y: i32, s: &str, c: [u8; 3]) {
        let mut cx = x;
        for ch in s.chars() {
            if let Some(g) = glyph(ch) {
                for (row, bits) in g.iter().enumerate() {
                    for col in 0..3 {
                        if bits & (4 >> col) != 0 {
                            // 2x scale.
                            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                                self.put(cx + col * 2 + dx, y + row as i32 * 2 + dy, c);
                            }
                        }
                    }
                }
            }
            cx += 8;
        }
    }

    fn line_px(&mut self, (x0, y0): (i32, i32), (x1, y1): (i32, i32), c: [u8; 3]) {
        let n = (x1 - x0).abs().max((y1 - y0).abs()).max(1);
        for i in 0..=n {
            let x = x0 + (x1 - x0) * i / n;
            let y = y0 + (y1 - y0) * i / n;
            self.put(x, y, c);
        }
    }

    fn y_axis(&mut self) {
        let grid = [225, 225, 225];
        let ink = [60, 60, 60];
        for i in 0..=4 {
            let v = self.y0 + (self.y1 - self.y0) * i as f64 / 4.0;
            let y = self.py(v);
            self.line_px((LEFT, y), (W as i32 - RIGHT, y), grid);
            let s = fmt_num(v);
            self.text(LEFT - 6 - 8 * s.len() as i32, y - 5, &s, ink);
        }
    }

    fn x_axis(&mut self) {
        let grid = [225, 225, 225];
        let ink = [60, 60, 60];
        let integral = self.x1 - self.x0 >= 4.0;
        for i in 0..=4 {
            let mut v = self.x0 + (self.x1 - self.x0) * i as f64 / 4.0;
            if integral {
                v = v.round();
            }
            let x = self.px(v);
            self.line_px((x, TOP), (x, H as i32 - BOTTOM), grid);
            let s = fmt_num(v);
            self.text(x - 4 * s.len() as i32, H as i32 - BOTTOM + 8, &s, ink);
        }
    }

    fn frame(&mut self) {
        let ink = [60, 60, 60];
        let (b, l) = (H as i32 - BOTTOM, LEFT);
        self.line_px((l, TOP), (l, b), ink);
        self.line_px((l, b), (W as i32 - RIGHT, b), ink);
    }

    /// A polyline through (x, y) points.
    pub fn series(&mut self, pts: &[(f64, f64)], c: [u8; 3]) {
        for w in pts.windows(2) {
            let a = (self.px(w[0].0), self.py(w[0].1));
            let b = (self.px(w[1].0), self.py(w[1].1));
            self.line_px(a, b, c);
        }
        if pts.len() == 1 {
            let (x, y) = (self.px(pts[0].0), self.py(pts[0].1));
            for d in -2..=2 {
                self.put(x + d, y, c);
                self.put(x, y + d, c);
            }
        }
    }

    /// A filled bar over [xa, xb] from the x axis (y0) to y.
    pub fn bar(&mut self, xa: f64, xb: f64, y: f64, c: [u8; 3]) {
        let (a, b) = (self.px(xa), self.px(xb));
        let (top, base) = (self.py(y), self.py(self.y0));
        for x in a.min(b)..=a.max(b) {
            for yy in top.min(base)..=top.max(base) {
                self.put(x, yy, c);
            }
        }
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let (w, h) = self.img.dimensions();
        crate::image::save_rgb_png(self.img.as_raw(), w as usize, h as usize, path)
    }
}

/// Upper end of a y axis for values up to `v` (a little headroom, a round-ish number).
pub fn nice_max(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let v = v * 1.05;
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 4.0, 5.0, 8.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_max_is_above() {
        for v in [0.3, 1.0, 7.0, 12.0, 99.0, 1234.0] {
            let m = nice_max(v);
            assert!(m >= v && m <= v * 2.5, "{v} -> {m}");
        }
        assert_eq!(nice_max(0.0), 1.0);
    }

    #[test]
    fn draws_inside_the_canvas() {
        let mut c = Canvas::new(0.0, 10.0, 0.0, 5.0);
        c.series(&[(0.0, 0.0), (10.0, 5.0)], PALETTE[0]);
        c.bar(2.0, 3.0, 4.0, PALETTE[1]);
        // The series' end point is the top-right corner of the plot area.
        let p = c.img.get_pixel((W as i32 - RIGHT) as u32, TOP as u32);
        assert_eq!(p.0, PALETTE[0]);
        let q = c.img.get_pixel(c.px(2.5) as u32, c.py(2.0) as u32);
        assert_eq!(q.0, PALETTE[1]);
    }
}
