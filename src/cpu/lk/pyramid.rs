//! The LK pyramid of one frame (`cv::buildOpticalFlowPyramid`): the levels with their
//! reflected borders (`cv::pyrDown`, `BORDER_REFLECT_101`) and, on demand, their Scharr
//! derivatives (`calcScharrDeriv`) with a zero border. See the parent module for the rules.

use crate::cpu::blur::reflect101;
use crate::image::GrayImage;

/// An 8-bit image with a border of `pad` pixels on every side.
#[derive(Clone, Debug, Default)]
pub struct Padded<T> {
    pub width: usize,
    pub height: usize,
    pub pad: usize,
    /// Row stride (`width + 2 * pad`).
    pub stride: usize,
    pub data: Vec<T>,
}

impl<T: Copy + Default> Padded<T> {
    fn resize(&mut self, width: usize, height: usize, pad: usize, elems: usize) {
        self.width = width;
        self.height = height;
        self.pad = pad;
        self.stride = (width + 2 * pad) * elems;
        self.data.clear();
        self.data
            .resize(self.stride * (height + 2 * pad), T::default());
    }

    /// The interior (the image without its border), row by row.
    pub fn interior(&self) -> Vec<T> {
        let mut v = Vec::with_capacity(self.width * self.height);
        let elems = self.stride / (self.width + 2 * self.pad).max(1);
        for y in 0..self.height as isize {
            let o = self.at(0, y, elems);
            v.extend_from_slice(&self.data[o..o + self.width * elems]);
        }
        v
    }

    /// Index of image pixel (x, y), which may lie in the border.
    #[inline(always)]
    pub(super) fn at(&self, x: isize, y: isize, elems: usize) -> usize {
        let px = (x + self.pad as isize) as usize;
        let py = (y + self.pad as isize) as usize;
        py * self.stride + px * elems
    }
}

/// One frame's LK pyramid: the levels with their reflected borders and, computed on
/// demand, their Scharr derivatives (only the frame that tracks from needs them).
#[derive(Clone, Debug, Default)]
pub struct FlowPyramid {
    pub levels: Vec<Padded<u8>>,
    /// `derivs[l]`: interleaved (I_x, I_y) of level l with a zero border.
    pub(super) derivs: Vec<Padded<i16>>,
    pub(super) derivs_ready: bool,
    pub(super) window: usize,
    /// Row sums of `pyr_down` and `scharr`, kept so that a rebuild allocates nothing.
    rows: Vec<i32>,
}

impl FlowPyramid {
    /// `cv::buildOpticalFlowPyramid(img, window, max_level, withDerivatives = false)`:
    /// rebuilt in place (buffers reused when the size repeats).
    pub fn build(&mut self, img: &GrayImage, window: usize, max_level: usize) {
        let pad = window;
        self.window = window;
        self.derivs_ready = false;
        let (mut w, mut h) = (img.width, img.height);
        let mut n = 0;
        for level in 0..=max_level {
            if self.levels.len() <= level {
                self.levels.push(Padded::default());
            }
            if level == 0 {
                let l0 = &mut self.levels[0];
                l0.resize(w, h, pad, 1);
                for y in 0..h {
                    let o = l0.at(0, y as isize, 1);
                    l0.data[o..o + w].copy_from_slice(img.row(y));
                }
            } else {
                let (prev, rest) = self.levels.split_at_mut(level);
                pyr_down(&prev[level - 1], &mut rest[0], w, h, pad, &mut self.rows);
            }
            fill_reflect_border(&mut self.levels[level]);
            n = level + 1;
            let (nw, nh) = (w.div_ceil(2), h.div_ceil(2));
            if nw <= window || nh <= window {
                break;
            }
            (w, h) = (nw, nh);
        }
        self.levels.truncate(n);
    }

    /// The highest level built (OpenCV's returned `maxLevel`).
    pub fn max_level(&self) -> usize {
        self.levels.len().saturating_sub(1)
    }

    /// The Scharr derivatives of every level (computed once per frame, on first use).
    pub fn ensure_derivatives(&mut self) {
        if self.derivs_ready {
            return;
        }
        self.derivs.resize_with(self.levels.len(), Padded::default);
        for (lvl, d) in self.levels.iter().zip(self.derivs.iter_mut()) {
            scharr(lvl, d, self.window, &mut self.rows);
        }
        self.derivs_ready = true;
    }
}

crate::cpu::simd::versions! {
    /// [`pyr_down_impl`] at the process's SIMD level.
    fn pyr_down(src: &Padded<u8>, dst: &mut Padded<u8>, w: usize, h: usize, pad: usize, scratch: &mut Vec<i32>) = pyr_down_impl;
}

crate::cpu::simd::versions! {
    /// [`scharr_impl`] at the process's SIMD level.
    fn scharr(lvl: &Padded<u8>, d: &mut Padded<i16>, pad: usize, scratch: &mut Vec<i32>) = scharr_impl;
}

/// `cv::pyrDown` of `src`'s interior into `dst` (`w x h`, the halved size), border `pad`;
/// `scratch` holds five horizontal row sums, a ring keyed by source row (output row `y`
/// reads source rows `2y - 2 ..= 2y + 2`, reflected into that window, so five consecutive
/// rows never share a slot and each source row is summed once). The horizontal sums read
/// `src`'s reflected border (filled before this is called; `pad >= 2`), so the loop has no
/// per-pixel reflection and vectorizes. Integer sums: any order gives the same values.
#[inline(always)]
fn pyr_down_impl(
    src: &Padded<u8>,
    dst: &mut Padded<u8>,
    w: usize,
    h: usize,
    pad: usize,
    scratch: &mut Vec<i32>,
) {
    dst.resize(w, h, pad, 1);
    let (sw, sh) = (src.width, src.height);
    assert!(src.pad >= 2 && 2 * w <= sw + 1, "pyr_down: border or size");
    scratch.resize(5 * w, 0);
    let mut have = [usize::MAX; 5];
    for y in 0..h {
        let mut slots = [0usize; 5];
        for (k, slot) in slots.iter_mut().enumerate() {
            let sy = reflect101(2 * y as isize + k as isize - 2, sh);
            *slot = sy % 5;
            if have[sy % 5] != sy {
                have[sy % 5] = sy;
                // Source columns -2 ..= 2w from the padded row (2w <= sw + 1, within pad).
                let o = src.at(-2, sy as isize, 1);
                let r = &src.data[o..o + 2 * w + 3];
                let out = &mut scratch[(sy % 5) * w..(sy % 5 + 1) * w];
                for (x, o) in out.iter_mut().enumerate() {
                    let p = &r[2 * x..2 * x + 5];
                    *o = p[2] as i32 * 6
                        + (p[1] as i32 + p[3] as i32) * 4
                        + p[0] as i32
                        + p[4] as i32;
                }
            }
        }
        let row = |k: usize| &scratch[slots[k] * w..(slots[k] + 1) * w];
        let (r0, r1, r2, r3, r4) = (row(0), row(1), row(2), row(3), row(4));
        let o = dst.at(0, y as isize, 1);
        for (x, d) in dst.data[o..o + w].iter_mut().enumerate() {
            let v = r2[x] * 6 + (r1[x] + r3[x]) * 4 + r0[x] + r4[x];
            *d = ((v + 128) >> 8) as u8;
        }
    }
}

/// Writes `img`'s border as `BORDER_REFLECT_101` of its interior (`cv::copyMakeBorder`).
fn fill_reflect_border(img: &mut Padded<u8>) {
    let (w, h, pad) = (img.width, img.height, img.pad as isize);
    for y in 0..h as isize {
        for x in (-pad..0).chain(w as isize..w as isize + pad) {
            let s = img.at(reflect101(x, w) as isize, y, 1);
            let d = img.at(x, y, 1);
            img.data[d] = img.data[s];
        }
    }
    let stride = img.stride;
    for y in (-pad..0).chain(h as isize..h as isize + pad) {
        let sy = reflect101(y, h) as isize;
        let s = img.at(-pad, sy, 1);
        let d = img.at(-pad, y, 1);
        img.data.copy_within(s..s + stride, d);
    }
}

/// `calcScharrDeriv` of `lvl`'s interior into `d` (interleaved x, y), border of zeros;
/// `scratch` holds the two vertical sums.
#[inline(always)]
fn scharr_impl(lvl: &Padded<u8>, d: &mut Padded<i16>, pad: usize, scratch: &mut Vec<i32>) {
    let (w, h) = (lvl.width, lvl.height);
    d.resize(w, h, pad, 2);
    scratch.clear();
    scratch.resize(2 * (w + 2), 0);
    let (t0, t1) = scratch.split_at_mut(w + 2);
    let row = |y: usize| &lvl.data[lvl.at(0, y as isize, 1)..][..w];
    for y in 0..h {
        let y0 = if y > 0 {
            y - 1
        } else if h > 1 {
            1
        } else {
            0
        };
        let y2 = if y + 1 < h {
            y + 1
        } else if h > 1 {
            h - 2
        } else {
            0
        };
        // Row slices (not a pixel lookup each): the loop vectorizes.
        let (ra, rb, rc) = (row(y0), row(y), row(y2));
        let (s0, s1) = (&mut t0[1..w + 1], &mut t1[1..w + 1]);
        for x in 0..w {
            let (a, b, c) = (ra[x] as i32, rb[x] as i32, rc[x] as i32);
            s0[x] = (a + c) * 3 + b * 10;
            s1[x] = c - a;
        }
        let (x0, x1) = if w > 1 { (1, w - 2) } else { (0, 0) };
        t0[0] = t0[x0 + 1];
        t0[w + 1] = t0[x1 + 1];
        t1[0] = t1[x0 + 1];
        t1[w + 1] = t1[x1 + 1];
        let o = d.at(0, y as isize, 2);
        let out = &mut d.data[o..o + 2 * w];
        for (x, g) in out.chunks_exact_mut(2).enumerate() {
            g[0] = (t0[x + 2] - t0[x]) as i16;
            g[1] = ((t1[x + 2] + t1[x]) * 3 + t1[x + 1] * 10) as i16;
        }
    }
}
