//! The structs kernels take by value or read from device memory, mirrored field for field
//! (`#[repr(C)]`) from kernels/*.cu, each with the C name the signature test checks.

use crate::cuda::driver::launch::c_struct_arg;
use crate::cuda::driver::DevPtr;
use crate::levels::MAX_LEVELS;

/// Mirrors `struct LevelDesc` in kernels/common.cuh: one pyramid level's place in the packed
/// pyramid and in the tile grid (also goodFeaturesToTrack's one level, `cuda::gftt`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LevelDesc {
    pub w: i32,
    pub h: i32,
    pub img_off: i32,
    pub tiles_x: i32,
    pub tiles_y: i32,
    pub tile_start: i32,
    pub tr_start: i32,
    pub rc_start: i32,
}

/// Mirrors `struct CellParams` in kernels/fast_harris.cu: the cells of
/// `cpu::cells::cell_windows` on every level, as the kernels index them (built by
/// `CellParams::new` in `cuda::cells`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellParams {
    /// `max(border, 3)`: the detectable area is `[b, w - b) x [b, h - b)`.
    pub b: i32,
    /// `detector.fast_threshold`.
    pub ini: i32,
    /// The scoring threshold: `min(min_fast_threshold, fast_threshold)`.
    pub lo: i32,
    pub cw: [i32; MAX_LEVELS],
    pub ch: [i32; MAX_LEVELS],
    /// 0 when the level has no window.
    pub cols: [i32; MAX_LEVELS],
    pub rows: [i32; MAX_LEVELS],
    /// First global cell index of each level.
    pub start: [i32; MAX_LEVELS],
}

/// Mirrors `struct DenseParams` in kernels/harris.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct DenseParams {
    pub sm: [f32; 7],
    pub de: [f32; 7],
    pub ksize: i32,
    pub block: i32,
    pub k: f32,
    pub kd: f64,
    pub quality: f32,
    pub border: i32,
    /// 0: Harris response; 1: the smaller eigenvalue (`cuda::gftt`).
    pub mode: i32,
}

/// Mirrors `DESC_MAX_LEVELS` in kernels/describe.cu.
pub const DESC_MAX_LEVELS: usize = 32;

/// Mirrors `struct DescLevels` in kernels/describe.cu.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescLevels {
    pub w: [i32; DESC_MAX_LEVELS],
    pub h: [i32; DESC_MAX_LEVELS],
    pub off: [i32; DESC_MAX_LEVELS],
    pub scale: [f32; DESC_MAX_LEVELS],
}

/// Mirrors `SEL_MAX_LEVELS` in kernels/select.cu (`pyramid.levels` is at most 32).
pub const SEL_MAX_LEVELS: usize = 32;

/// Mirrors `struct SelParams` in kernels/select.cu.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SelParams {
    pub n: [u32; SEL_MAX_LEVELS],
}

/// Mirrors `LK_MAX_LEVELS` in kernels/lk.cu.
pub const LK_MAX_LEVELS: usize = 8;

/// Mirrors `struct LkLevel` in kernels/lk.cu: one level of a flow pyramid, its image and its
/// Scharr derivatives (interleaved x, y).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LkLevel {
    pub img: DevPtr<u8>,
    pub der: DevPtr<i16>,
    pub w: i32,
    pub h: i32,
    pub stride: i32,
    pub dstride: i32,
}

impl Default for LkLevel {
    fn default() -> Self {
        LkLevel {
            img: DevPtr::NULL,
            der: DevPtr::NULL,
            w: 0,
            h: 0,
            stride: 0,
            dstride: 0,
        }
    }
}

/// Mirrors `struct LkPyr` in kernels/lk.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct LkPyr {
    pub lv: [LkLevel; LK_MAX_LEVELS],
}

/// Mirrors `struct LkArgs` in kernels/lk.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct LkArgs {
    pub win: i32,
    pub pad: i32,
    pub max_level: i32,
    pub max_iter: i32,
    pub use_initial: i32,
    pub n: i32,
    pub min_eig: f32,
    pub eps: f64,
    pub back_level: i32,
    pub back_initial: i32,
    pub chain: i32,
}

c_struct_arg! {
    LevelDesc => "LevelDesc", CellParams => "CellParams", DenseParams => "DenseParams",
    DescLevels => "DescLevels", SelParams => "SelParams", LkPyr => "LkPyr", LkArgs => "LkArgs",
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes nvcc gives the C structs (8-byte alignment where a double or a pointer
    /// sits inside): a field added on one side only changes them.
    #[test]
    fn mirrors_have_the_c_sizes() {
        assert_eq!(std::mem::size_of::<LevelDesc>(), 32);
        assert_eq!(std::mem::size_of::<CellParams>(), 12 + 5 * 4 * MAX_LEVELS);
        assert_eq!(std::mem::size_of::<DenseParams>(), 96);
        assert_eq!(std::mem::size_of::<DescLevels>(), 4 * 4 * DESC_MAX_LEVELS);
        assert_eq!(std::mem::size_of::<LkPyr>(), 32 * LK_MAX_LEVELS);
        assert_eq!(std::mem::size_of::<LkArgs>(), 56);
    }
}
