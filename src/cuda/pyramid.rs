//! The pyramid on the GPU (host side of `kernels/pyramid.cu`): one device buffer holds
//! every level; the resize taps are the CPU's own `ResizeTables`, uploaded once.

use std::ops::Range;

use super::driver::buffers::DevBuf;
use super::driver::{DevPtr, Launch};
use super::Gpu;
use crate::config::{Interpolation, Scales};
use crate::cpu::pyramid::{level_size, ResizeTables};
use crate::error::Result;

#[derive(Clone, Copy, Debug)]
pub struct Level {
    pub w: usize,
    pub h: usize,
    /// Byte offset in the pyramid buffer.
    pub off: usize,
}

struct Taps {
    xofs: DevBuf<u32>,
    xw: DevBuf<u16>,
    yofs: DevBuf<u32>,
    yw: DevBuf<u16>,
}

pub struct Pyramid {
    pub buf: DevBuf,
    pub levels: Vec<Level>,
    taps: Vec<Taps>,
    /// `fused[l - 1]`: levels `l` and `l + 1` can come from one resize_linear2 launch.
    fused: Vec<bool>,
    exact: i32,
}

impl Pyramid {
    pub fn new(
        gpu: &Gpu,
        w0: usize,
        h0: usize,
        n: usize,
        scales: Scales,
        scale_factor: f32,
        interpolation: Interpolation,
    ) -> Result<Self> {
        let mut levels = Vec::with_capacity(n);
        let mut off = 0usize;
        for l in 0..n.max(1) {
            let (w, h) = if l == 0 {
                (w0, h0)
            } else {
                level_size(scales, w0, h0, scale_factor, l)
            };
            levels.push(Level { w, h, off });
            off += (w * h).div_ceil(256) * 256;
        }
        let mut taps = Vec::new();
        let mut fused = Vec::new();
        for l in 1..levels.len() {
            let (s, d) = (levels[l - 1], levels[l]);
            let t = ResizeTables::new(s.w, s.h, d.w, d.h, interpolation);
            if l >= 2 {
                fused.push(two_level_fits(&t, s.w, s.h));
            }
            let flat = |w: &[[u16; 2]]| w.iter().flat_map(|p| *p).collect::<Vec<u16>>();
            taps.push(Taps {
                xofs: DevBuf::from_slice(&gpu.ctx, &whole_quads(&t.x.offsets))?,
                xw: DevBuf::from_slice(&gpu.ctx, &flat(&whole_quads(&t.x.weights)))?,
                yofs: DevBuf::from_slice(&gpu.ctx, &t.y.offsets)?,
                yw: DevBuf::from_slice(&gpu.ctx, &flat(&t.y.weights))?,
            });
        }
        Ok(Pyramid {
            buf: DevBuf::new(&gpu.ctx, off.max(1))?,
            levels,
            taps,
            fused,
            exact: (interpolation == Interpolation::LinearExact) as i32,
        })
    }

    pub fn level_ptr(&self, l: usize) -> DevPtr<u8> {
        self.buf.ptr().offset(self.levels[l].off)
    }

    /// Levels 1.. from level 0, each from the previous one: two levels per launch where
    /// the middle level fits resize_linear2's shared memory (kernels/pyramid.cu), else one;
    /// with an odd count of resizes level 1 alone first.
    /// `priority`: the launches' own ([`super::driver::Device::pyramid_priority`]), else the stream's.
    pub fn run(&self, gpu: &Gpu, priority: Option<i32>) -> Result<()> {
        let n = self.levels.len();
        let empty = |l: usize| self.levels[l].w == 0 || self.levels[l].h == 0;
        let mut l = 1;
        while l < n {
            if empty(l - 1) || empty(l) {
                l += 1;
                continue;
            }
            // With an odd count of resizes one level goes alone: level 1, the largest, whose
            // pair was the slowest launch (docs/performance.md, change 48).
            let single_first = l == 1 && (n - 1) % 2 == 1;
            if !single_first && l + 1 < n && !empty(l + 1) && self.fused[l - 1] {
                self.launch_two(gpu, l, priority)?;
                l += 2;
            } else {
                self.launch_one(gpu, l, priority)?;
                l += 1;
            }
        }
        Ok(())
    }

    /// Level `l` from level `l - 1`.
    fn launch_one(&self, gpu: &Gpu, l: usize, priority: Option<i32>) -> Result<()> {
        let (s, d) = (self.levels[l - 1], self.levels[l]);
        let t = &self.taps[l - 1];
        let (src, dst) = (self.level_ptr(l - 1), self.level_ptr(l));
        let (sw, sh, dw, dh) = (s.w as i32, s.h as i32, d.w as i32, d.h as i32);
        let (xo, xw, yo, yw, ex) = (
            t.xofs.ptr(),
            t.xw.ptr(),
            t.yofs.ptr(),
            t.yw.ptr(),
            self.exact,
        );
        // SAFETY: `resize_linear`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            // 4 pixels per thread (kernels/pyramid.cu).
            gpu.k.pyramid.resize_linear(
                gpu,
                Launch::new(
                    // 4 pixels per thread (kernels/pyramid.cu).
                    (d.w.div_ceil(128) as u32, d.h.div_ceil(8) as u32, 1),
                    (32, 8, 1),
                )
                .priority(priority),
                src,
                sw,
                sh,
                dst,
                dw,
                dh,
                xo,
                xw,
                yo,
                yw,
                ex,
            )
        }
    }

    /// Levels `l` and `l + 1` from level `l - 1` in one launch.
    fn launch_two(&self, gpu: &Gpu, l: usize, priority: Option<i32>) -> Result<()> {
        let (s, m, d) = (self.levels[l - 1], self.levels[l], self.levels[l + 1]);
        let (t1, t2) = (&self.taps[l - 1], &self.taps[l]);
        let (src, mid, dst) = (
            self.level_ptr(l - 1),
            self.level_ptr(l),
            self.level_ptr(l + 1),
        );
        let (sw, sh, mw, mh, dw, dh) = (
            s.w as i32, s.h as i32, m.w as i32, m.h as i32, d.w as i32, d.h as i32,
        );
        let (xo1, xw1, yo1, yw1) = (t1.xofs.ptr(), t1.xw.ptr(), t1.yofs.ptr(), t1.yw.ptr());
        let (xo2, xw2, yo2, yw2) = (t2.xofs.ptr(), t2.xw.ptr(), t2.yofs.ptr(), t2.yw.ptr());
        let ex = self.exact;
        // SAFETY: `resize_linear2`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.pyramid.resize_linear2(
                gpu,
                Launch::new(
                    (
                        d.w.div_ceil(TWO_LEVEL_TILE.0) as u32,
                        d.h.div_ceil(TWO_LEVEL_TILE.1) as u32,
                        1,
                    ),
                    (32, 8, 1),
                )
                .priority(priority),
                src,
                sw,
                sh,
                mid,
                mw,
                mh,
                dst,
                dw,
                dh,
                xo1,
                xw1,
                yo1,
                yw1,
                xo2,
                xw2,
                yo2,
                yw2,
                ex,
            )
        }
    }
}

/// `taps` padded to a multiple of 4 entries by repeating the last one: the kernels read the
/// column taps of 4 output pixels at once (note "four pixels from two rows of words" in
/// kernels/pyramid.cu); the padding's pixels are never stored.
fn whole_quads<T: Copy>(taps: &[T]) -> Vec<T> {
    let mut v = taps.to_vec();
    if let Some(&last) = taps.last() {
        v.resize(taps.len().next_multiple_of(4), last);
    }
    v
}

/// resize_linear2's dst tile and its largest region of the middle level (RESIZE2_TW,
/// RESIZE2_TH, RESIZE2_MW, RESIZE2_MH in kernels/pyramid.cu).
const TWO_LEVEL_TILE: (usize, usize) = (128, 8);
const TWO_LEVEL_REGION: (usize, usize) = (196, 16);

/// Block `b`'s part of the middle level along one axis whose middle level has `mid_n`
/// samples and whose second resize reads `offsets` (one per dst sample), `tile` dst samples
/// per block: the span it owns (and writes) and the end of what it computes, its owned span
/// up to the last sample its tile reads (the ownership note in kernels/pyramid.cu, whose
/// `mid_span` is the device side of this).
fn block_span(offsets: &[u32], mid_n: usize, tile: usize, b: usize) -> (Range<usize>, usize) {
    let dn = offsets.len();
    let (d0, d1) = (b * tile, (b * tile + tile).min(dn));
    let own0 = if b == 0 { 0 } else { offsets[d0] as usize };
    let own1 = if d1 >= dn {
        mid_n
    } else {
        offsets[d1] as usize
    };
    let need1 = (offsets[d1 - 1] as usize + 2).min(mid_n);
    (own0..own1, own1.max(need1))
}

/// Whether every block of resize_linear2 finds the part of the middle level it computes
/// ([`block_span`]) within `region` samples along that axis.
fn axis_fits(offsets: &[u32], mid_n: usize, tile: usize, region: usize) -> bool {
    (0..offsets.len().div_ceil(tile)).all(|b| {
        let (own, end) = block_span(offsets, mid_n, tile, b);
        end - own.start <= region
    })
}

/// Whether resize_linear2 can make the level after `mid` (of `mid_w` x `mid_h`) through the
/// resize `second`.
fn two_level_fits(second: &ResizeTables, mid_w: usize, mid_h: usize) -> bool {
    axis_fits(
        &second.x.offsets,
        mid_w,
        TWO_LEVEL_TILE.0,
        TWO_LEVEL_REGION.0,
    ) && axis_fits(
        &second.y.offsets,
        mid_h,
        TWO_LEVEL_TILE.1,
        TWO_LEVEL_REGION.1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_pad_to_whole_quads_with_the_last_entry() {
        assert_eq!(
            whole_quads(&[7u32, 8, 9, 10, 11]),
            [7, 8, 9, 10, 11, 11, 11, 11]
        );
        assert_eq!(
            whole_quads(&[[1u16, 2], [3, 4]]),
            [[1, 2], [3, 4], [3, 4], [3, 4]]
        );
        assert_eq!(whole_quads(&[1u32, 2, 3, 4]), [1, 2, 3, 4]);
        assert!(whole_quads::<u32>(&[]).is_empty());
    }

    #[test]
    fn two_levels_fit_for_orb_scales_not_for_large_ones() {
        for (w, h) in [
            (1920, 1080),
            (1280, 720),
            (3840, 2160),
            (641, 479),
            (37, 23),
        ] {
            for l in 1..8 {
                let mid = level_size(Scales::Orb, w, h, 1.2, l);
                let next = level_size(Scales::Orb, w, h, 1.2, l + 1);
                let t = ResizeTables::new(mid.0, mid.1, next.0, next.1, Interpolation::Linear);
                assert!(two_level_fits(&t, mid.0, mid.1), "{w}x{h} level {l}");
            }
        }
        // At a scale factor of 2 a 128-sample tile reads ~256 middle samples: one by one.
        let t = ResizeTables::new(960, 540, 480, 270, Interpolation::Linear);
        assert!(!two_level_fits(&t, 960, 540));
    }

    #[test]
    fn owned_spans_cover_the_middle_level_once() {
        // The spans of neighbouring blocks meet: block b ends where b + 1 starts.
        let t = ResizeTables::new(1600, 900, 1333, 750, Interpolation::Linear);
        let tile = TWO_LEVEL_TILE.0;
        let mut next = 0usize;
        for b in 0..t.x.offsets.len().div_ceil(tile) {
            let (own, end) = block_span(&t.x.offsets, 1600, tile, b);
            assert_eq!(own.start, next, "block {b}");
            assert!(end >= own.end, "block {b}");
            next = own.end;
        }
        assert_eq!(next, 1600);
    }
}
