//! The pyramid on the GPU (host side of `kernels/pyramid.cu`): one device buffer holds
//! every level; the resize taps are the CPU's own `ResizeTables`, uploaded once.

use super::buffers::DevBuf;
use super::context::Gpu;
use crate::config::Interpolation;
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
    xofs: DevBuf,
    xw: DevBuf,
    yofs: DevBuf,
    yw: DevBuf,
}

pub struct Pyramid {
    pub buf: DevBuf,
    pub levels: Vec<Level>,
    taps: Vec<Taps>,
    exact: i32,
}

impl Pyramid {
    pub fn new(
        gpu: &Gpu,
        w0: usize,
        h0: usize,
        n: usize,
        scale_factor: f32,
        interpolation: Interpolation,
    ) -> Result<Self> {
        let mut levels = Vec::with_capacity(n);
        let mut off = 0usize;
        for l in 0..n.max(1) {
            let (w, h) = if l == 0 {
                (w0, h0)
            } else {
                level_size(w0, h0, scale_factor, l)
            };
            levels.push(Level { w, h, off });
            off += (w * h).div_ceil(256) * 256;
        }
        let mut taps = Vec::new();
        for l in 1..levels.len() {
            let (s, d) = (levels[l - 1], levels[l]);
            let t = ResizeTables::new(s.w, s.h, d.w, d.h, interpolation);
            let flat = |w: &[[u16; 2]]| w.iter().flat_map(|p| *p).collect::<Vec<u16>>();
            taps.push(Taps {
                xofs: DevBuf::from_slice(&gpu.ctx, &t.x.offsets)?,
                xw: DevBuf::from_slice(&gpu.ctx, &flat(&t.x.weights))?,
                yofs: DevBuf::from_slice(&gpu.ctx, &t.y.offsets)?,
                yw: DevBuf::from_slice(&gpu.ctx, &flat(&t.y.weights))?,
            });
        }
        Ok(Pyramid {
            buf: DevBuf::new(&gpu.ctx, off.max(1))?,
            levels,
            taps,
            exact: (interpolation == Interpolation::LinearExact) as i32,
        })
    }

    pub fn level_ptr(&self, l: usize) -> u64 {
        self.buf.ptr() + self.levels[l].off as u64
    }

    /// Levels 1.. from level 0, each from the previous one.
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        for l in 1..self.levels.len() {
            let (s, d) = (self.levels[l - 1], self.levels[l]);
            if d.w == 0 || d.h == 0 || s.w == 0 || s.h == 0 {
                continue;
            }
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
            gpu.launch(
                "resize_linear",
                &gpu.k.resize_linear,
                // 4 pixels per thread (kernels/pyramid.cu).
                (d.w.div_ceil(128) as u32, d.h.div_ceil(8) as u32, 1),
                (32, 8, 1),
                0,
                &mut kargs![src, sw, sh, dst, dw, dh, xo, xw, yo, yw, ex],
            )?;
        }
        Ok(())
    }
}
