//! Typed kernel handles: one wrapper per kernel of kernels/*.cu, grouped by the file (the
//! stage) it belongs to, and the `#[repr(C)]` mirrors of the structs the kernels take
//! ([`params`]). A wrapper's parameters are the kernel's, in order, with Rust types whose
//! layout is the C type's ([`KernelArg`]); device buffers go in as typed addresses
//! ([`DevPtr<T>`]). The test below reads every `__global__` signature in the sources and
//! checks that each wrapper says the same, so an argument list cannot drift from its kernel.
//!
//! What the types cannot say stays the caller's: that each buffer is large enough for the
//! launch's shape and outlives it on the stream. So the wrappers are `unsafe fn`s, and each
//! call says where its buffers were sized.
//!
//! May import: `cuda::driver`, `levels` (the level limit of the mirrored structs).

pub mod params;

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};

use self::params::{CellParams, DenseParams, DescLevels, LevelDesc, LkArgs, LkPyr, SelParams};
use super::driver::{cuda_err, DevPtr, Device, Launch};
use crate::error::Result;

/// Declares one kernel set: a struct of the kernels' handles, loaded from the module by
/// name, with one typed `unsafe fn` launch per kernel.
macro_rules! kernel_set {
    ($(#[$doc:meta])* $set:ident from $file:literal {
        $( $k:ident ( $($a:ident : $t:ty),* $(,)? ); )*
    }) => {
        $(#[$doc])*
        pub struct $set {
            $( $k: CudaFunction, )*
        }

        impl $set {
            fn load(m: &Arc<CudaModule>) -> Result<Self> {
                Ok($set {
                    $( $k: m.load_function(stringify!($k)).map_err(|e| {
                        cuda_err(concat!("kernel ", stringify!($k), " missing from the module"), e)
                    })?, )*
                })
            }

            $(
                #[doc = concat!("Launches `", stringify!($k), "` (kernels/", $file, ") at `at`.")]
                ///
                /// # Safety
                /// Each buffer behind an address is memory of `gpu`'s context, large enough for
                /// every access the kernel makes at this shape, and stays allocated until the
                /// stream has run it; the host neither writes what the kernel reads nor reads
                /// what it writes before waiting for the stream.
                #[allow(clippy::too_many_arguments)]
                pub unsafe fn $k(&self, gpu: &Device, at: Launch<'_>, $($a: $t),*) -> Result<()> {
                    let mut args = [$( &$a as *const $t as *mut c_void ),*];
                    // SAFETY: `args` points at this function's parameters, which are the
                    // kernel's in order and type (checked against the source by the test
                    // `wrappers_match_the_kernel_sources`); the buffers are the caller's
                    // contract, passed on.
                    unsafe { gpu.launch(at, stringify!($k), &self.$k, &mut args) }
                }
            )*

            /// (kernel, source file, the C type of each parameter), for the signature test.
            #[cfg(test)]
            fn signatures() -> Vec<(&'static str, &'static str, Vec<String>)> {
                vec![$( (stringify!($k), $file, vec![$( <$t as super::driver::KernelArg>::c_type() ),*]) ),*]
            }
        }
    };
}

kernel_set! {
    /// The input's conversion to gray (`cuda::decode`).
    Decode from "decode.cu" {
        decode_gray(raw: DevPtr<u8>, step: i32, w: i32, h: i32, enc: i32, big_endian: i32,
            wt: [u32; 4], out: DevPtr<u8>);
        copy_frame16(src: DevPtr<u8>, dst: DevPtr<u8>, n: u64);
    }
}

kernel_set! {
    /// The image pyramid (`cuda::pyramid`).
    Pyramid from "pyramid.cu" {
        resize_linear(src: DevPtr<u8>, sw: i32, sh: i32, dst: DevPtr<u8>, dw: i32, dh: i32,
            xofs: DevPtr<u32>, xw: DevPtr<u16>, yofs: DevPtr<u32>, yw: DevPtr<u16>, exact: i32);
        resize_linear2(src: DevPtr<u8>, sw: i32, sh: i32, mid: DevPtr<u8>, mw: i32, mh: i32,
            dst: DevPtr<u8>, dw: i32, dh: i32, xofs1: DevPtr<u32>, xw1: DevPtr<u16>,
            yofs1: DevPtr<u32>, yw1: DevPtr<u16>, xofs2: DevPtr<u32>, xw2: DevPtr<u16>,
            yofs2: DevPtr<u32>, yw2: DevPtr<u16>, exact: i32);
    }
}

kernel_set! {
    /// FAST with NMS and the Harris score, and ORB-SLAM3's per-cell variant
    /// (`cuda::fast_harris`).
    FastHarris from "fast_harris.cu" {
        fast_harris(pyr: DevPtr<u8>, levels: DevPtr<LevelDesc>, block_groups: DevPtr<u32>,
            threshold: i32, nms: i32, border: i32, harris: i32, block_size: i32, harris_k: f32,
            scale_sq_sq: f32, halo: i32, cap: i32, row_counts: DevPtr<u32>,
            slots: DevPtr<[u32; 2]>);
        fast_cells(pyr: DevPtr<u8>, levels: DevPtr<LevelDesc>, nlev: i32, cp: CellParams,
            nms: i32, harris: i32, block_size: i32, harris_k: f32, scale_sq_sq: f32, halo: i32,
            cap: i32, flags: DevPtr<u8>, row_counts: DevPtr<u32>, slots: DevPtr<[u32; 2]>);
        cell_filter(levels: DevPtr<LevelDesc>, nlev: i32, cp: CellParams, flags: DevPtr<u8>,
            cap: i32, row_counts: DevPtr<u32>, slots: DevPtr<[u32; 2]>);
    }
}

kernel_set! {
    /// The candidates' ordered compaction (`cuda::fast_harris`).
    Compact from "compact.cu" {
        scan_tile_rows(levels: DevPtr<LevelDesc>, nlev: i32, rc: DevPtr<u32>,
            rc_off: DevPtr<u32>, tr_total: DevPtr<u32>);
        scan_levels(levels: DevPtr<LevelDesc>, nlev: i32, tr_total: DevPtr<u32>,
            tr_base: DevPtr<u32>, header: DevPtr<u32>);
    }
}

kernel_set! {
    /// The gather of the compacted candidates with their orientation (`cuda::fast_harris`).
    Orient from "orient.cu" {
        gather_orient(pyr: DevPtr<u8>, levels: DevPtr<LevelDesc>, nlev: i32, ntiles: i32,
            cap: i32, rc: DevPtr<u32>, rc_off: DevPtr<u32>, tr_base: DevPtr<u32>,
            slots: DevPtr<[u32; 2]>, orient: i32, half: i32, umax: DevPtr<i32>,
            atan_p: [f32; 4], eps: f32, out: DevPtr<[u32; 4]>, out_cap: u32);
    }
}

kernel_set! {
    /// The per-level budget, the kept corners' orientation and the results' copy
    /// (`cuda::select`).
    Select from "select.cu" {
        select_level(header: DevPtr<u32>, nlev: i32, p: SelParams, precut: i32,
            cand: DevPtr<[u32; 4]>, sel_idx: DevPtr<u32>, kept: DevPtr<u32>);
        orient_kept(pyr: DevPtr<u8>, levels: DevPtr<LevelDesc>, nlev: i32, header: DevPtr<u32>,
            kept: DevPtr<u32>, sel_idx: DevPtr<u32>, cand: DevPtr<[u32; 4]>, orient: i32,
            half: i32, umax: DevPtr<i32>, atan_p: [f32; 4], eps: f32, kp: DevPtr<[u32; 4]>,
            kp_header: DevPtr<u32>);
        copy_results(header: DevPtr<u32>, nlev: i32, cap: u32, kp: DevPtr<[u32; 4]>,
            desc: DevPtr<[u32; 4]>, host_header: DevPtr<u32>, host_kp: DevPtr<[u32; 4]>,
            host_desc: DevPtr<[u32; 4]>);
    }
}

kernel_set! {
    /// Canny: the blur, the classification and the connected hysteresis (`cuda::canny`).
    Canny from "canny.cu" {
        blur_h(src: DevPtr<u8>, w: i32, h: i32, k: DevPtr<u32>, ksize: i32, tmp: DevPtr<u16>);
        blur_v(tmp: DevPtr<u16>, w: i32, h: i32, k: DevPtr<u32>, ksize: i32, dst: DevPtr<u8>);
        canny_classify(img: DevPtr<u8>, w: i32, h: i32, l2: i32, low: i32, high: i32,
            cls: DevPtr<u8>, label: DevPtr<i32>);
        uf_merge(label: DevPtr<i32>, cls: DevPtr<u8>, w: i32, h: i32);
        uf_resolve(label: DevPtr<i32>, cls: DevPtr<u8>, w: i32, h: i32);
        uf_final(label: DevPtr<i32>, cls: DevPtr<u8>, w: i32, h: i32, words_per_row: i32,
            bits: DevPtr<u32>);
    }
}

kernel_set! {
    /// The dense Harris response (and the min-eigenvalue map of goodFeaturesToTrack)
    /// (`cuda::harris`, `cuda::gftt`).
    Harris from "harris.cu" {
        harris_sobel(pyr: DevPtr<u8>, levels: DevPtr<LevelDesc>, nlev: i32, p: DenseParams,
            gx: DevPtr<f32>, gy: DevPtr<f32>);
        harris_rowsum(levels: DevPtr<LevelDesc>, nlev: i32, p: DenseParams, gx: DevPtr<f32>,
            gy: DevPtr<f32>, sxx: DevPtr<f64>, sxy: DevPtr<f64>, syy: DevPtr<f64>,
            maxkey: DevPtr<u32>);
        harris_colsum(levels: DevPtr<LevelDesc>, nlev: i32, p: DenseParams, sxx: DevPtr<f64>,
            sxy: DevPtr<f64>, syy: DevPtr<f64>, resp: DevPtr<f32>, maxkey: DevPtr<u32>);
        harris_nms(levels: DevPtr<LevelDesc>, nlev: i32, p: DenseParams, resp: DevPtr<f32>,
            maxkey: DevPtr<u32>, cap: i32, row_counts: DevPtr<u32>, slots: DevPtr<[u32; 2]>);
    }
}

kernel_set! {
    /// ORB descriptors (`cuda::describe`).
    Describe from "describe.cu" {
        orb_describe(pyr: DevPtr<u8>, l: DescLevels, nlev: i32, header: DevPtr<u32>,
            recs: DevPtr<[u32; 4]>, angle_mode: i32, k: [f32; 4], flags: i32, half: i32, umax: DevPtr<i32>,
            atan_p: [f32; 4], eps: f32, out: DevPtr<u32>);
    }
}

kernel_set! {
    /// Brute-force Hamming matching (`cuda::matcher`).
    Match from "match.cu" {
        match_knn(query: DevPtr<[u32; 4]>, train: DevPtr<[u32; 4]>, n: i32, m: i32,
            split_len: i32, cross_check: i32, partial: DevPtr<[u32; 2]>, reverse: DevPtr<u32>);
        match_merge(partial: DevPtr<[u32; 2]>, n: i32, splits: i32, knn: DevPtr<[u32; 2]>);
    }
}

kernel_set! {
    /// The tracker's flow pyramid and pyramidal LK (`cuda::lk`).
    Lk from "lk.cu" {
        lk_border(img: DevPtr<u8>, w: i32, h: i32, pad: i32, stride: i32);
        lk_pyrdown(src: DevPtr<u8>, spad: i32, sstride: i32, dst: DevPtr<u8>, dw: i32, dh: i32,
            dpad: i32, dstride: i32);
        lk_scharr(img: DevPtr<u8>, w: i32, h: i32, pad: i32, stride: i32, der: DevPtr<i16>,
            dstride: i32);
        lk_track(prev: LkPyr, next: LkPyr, prev_pts: DevPtr<[f32; 2]>, init: DevPtr<[f32; 2]>,
            out: DevPtr<[f32; 4]>, p: LkArgs);
    }
}

kernel_set! {
    /// goodFeaturesToTrack after the min-eigenvalue map (`cuda::gftt`).
    Gftt from "gftt.cu" {
        gftt_boxsum(w: i32, h: i32, block: i32, sxx: DevPtr<f64>, sxy: DevPtr<f64>,
            syy: DevPtr<f64>, oa: DevPtr<f32>, ob: DevPtr<f32>, oc: DevPtr<f32>);
        gftt_eig(sa: DevPtr<f32>, sb: DevPtr<f32>, sc: DevPtr<f32>, eig: DevPtr<f32>, n: i32);
        gftt_max(eig: DevPtr<f32>, mask: DevPtr<u8>, n: i32, maxkey: DevPtr<u32>);
        gftt_candidates(eig: DevPtr<f32>, mask: DevPtr<u8>, w: i32, h: i32, maxkey: DevPtr<u32>,
            quality: f64, out: DevPtr<[u32; 2]>, count: DevPtr<u32>, cap: i32);
        gftt_discs(discs: DevPtr<i32>, mask: DevPtr<u8>, w: i32, h: i32);
    }
}

/// Every kernel of the module, by stage.
pub struct Kernels {
    pub decode: Decode,
    pub pyramid: Pyramid,
    pub fast_harris: FastHarris,
    pub compact: Compact,
    pub orient: Orient,
    pub select: Select,
    pub canny: Canny,
    pub harris: Harris,
    pub describe: Describe,
    pub matcher: Match,
    pub lk: Lk,
    pub gftt: Gftt,
}

impl Kernels {
    /// The handles of every kernel in `gpu`'s module (an error names a missing one).
    pub fn load(gpu: &Device) -> Result<Kernels> {
        let m = &gpu.cu_module;
        Ok(Kernels {
            decode: Decode::load(m)?,
            pyramid: Pyramid::load(m)?,
            fast_harris: FastHarris::load(m)?,
            compact: Compact::load(m)?,
            orient: Orient::load(m)?,
            select: Select::load(m)?,
            canny: Canny::load(m)?,
            harris: Harris::load(m)?,
            describe: Describe::load(m)?,
            matcher: Match::load(m)?,
            lk: Lk::load(m)?,
            gftt: Gftt::load(m)?,
        })
    }
}

#[cfg(test)]
mod tests;
