//! The launches of one frame after its decode, on the pipeline's two streams: the pyramid,
//! the detection, the selection, the descriptors and the final download on the main stream
//! ([`queue_main`]), Canny and its edge map's download on the side stream ([`queue_canny`]).
//! Launched directly or recorded into CUDA graphs (`super::graph`).

use cudarc::driver::CudaEvent;

use super::driver::graph;
use super::driver::{device as context, DevPtr};
use super::state::{cells, State};
use super::Gpu;
use super::{canny, describe};
use crate::config::Config;
use crate::error::Result;

/// How [`queue_main`] records the stage events.
#[derive(Clone, Copy)]
pub(super) enum Marks {
    /// Launched now: plain records.
    Plain,
    /// Recorded into a [`graph::Graph`]: event nodes (true) or none (false).
    InGraph(bool),
}

/// Queues the frame's work after the decode on the pipeline's stream: the pyramid, the
/// detection, the selection and the descriptors (marks 3 to 6), and with the GPU selection
/// the final download (mark 7).
pub(super) fn queue_main(
    gpu: &Gpu,
    ev: &[CudaEvent],
    st: &mut State,
    cfg: &Config,
    gpu_select: bool,
    pyramid_priority: Option<i32>,
    marks: Marks,
) -> Result<()> {
    let mark = |e: &CudaEvent| match marks {
        Marks::Plain => graph::mark(e, &gpu.stream, false),
        Marks::InGraph(true) => graph::mark(e, &gpu.stream, true),
        Marks::InGraph(false) => Ok(()),
    };
    st.pyr.run(gpu, pyramid_priority)?;
    mark(&ev[3])?;
    if let Some(det) = st.det.as_mut() {
        // With the GPU selection only the kept corners are oriented (in select.cu).
        let orient = cfg.orient.enabled && !gpu_select;
        match st.dense.as_mut() {
            Some(dense) => dense.run(gpu, &st.pyr, det, cfg, orient)?,
            None if cells(cfg) => det.run_cells(gpu, &st.pyr, cfg, orient)?,
            None => det.run(gpu, &st.pyr, cfg, orient)?,
        }
    }
    mark(&ev[4])?;
    // With descriptors, the kept corners' orientation is computed in the descriptor kernel,
    // from the patch it loads anyway (one launch less).
    let fused_orient = cfg.orient.enabled
        && st.describe.is_some()
        && st
            .det
            .as_ref()
            .is_some_and(|d| d.half() <= describe::MAX_FUSED_HALF);
    if let (true, Some(det), Some(sel)) = (gpu_select, &st.det, st.sel.as_mut()) {
        sel.per_level(cfg, det.nlev());
        sel.run(gpu, &st.pyr, det, cfg, cfg.orient.enabled && !fused_orient)?;
    }
    mark(&ev[5])?;
    // With the GPU selection the results go to the host by one kernel (copy_results)
    // where the pinned buffers are mapped, else by copies.
    let by_kernel = gpu_select
        && st
            .det
            .as_ref()
            .is_some_and(|d| d.results_on_host().is_some())
        && st
            .describe
            .as_ref()
            .map_or(true, |d| d.results().1.is_some());
    if let (Some(d), true, Some(det), Some(sel)) =
        (st.describe.as_mut(), gpu_select, &st.det, &st.sel)
    {
        let n = sel.max_kept().min(det.out_cap());
        let (h, r) = (sel.header_ptr(), sel.kp_ptr());
        let angles = match (cfg.orient.enabled, fused_orient) {
            (false, _) => describe::Angles::None,
            (true, true) => describe::Angles::ComputeHere {
                half: det.half(),
                umax: det.umax_ptr(),
            },
            (true, false) => describe::Angles::FromRecords,
        };
        d.describe_records(gpu, &st.pyr, h, r, n, angles, !by_kernel)?;
    }
    mark(&ev[6])?;
    // The final download: the keypoint records with their header (and the descriptors,
    // queued above unless by_kernel).
    if let (true, Some(det), Some(sel)) = (gpu_select, st.det.as_mut(), &st.sel) {
        let records = sel.max_kept().min(det.out_cap());
        let desc = st.describe.as_ref().map(|d| d.results());
        if !(by_kernel && sel.copy_results(gpu, det, records, desc)?) {
            det.queue_download(gpu, sel.header_ptr(), sel.kp_ptr(), records)?;
        }
        mark(&ev[7])?;
    }
    Ok(())
}

/// Queues Canny and its edge-map download on the side stream.
pub(super) fn queue_canny(
    gpu: &Gpu,
    c: &mut canny::Canny,
    gray: DevPtr<u8>,
    cfg: &Config,
) -> Result<()> {
    c.run(gpu, &gpu.side, gray, &cfg.canny)?;
    c.download(&gpu.side)
}

pub(super) fn mark(e: &CudaEvent, gpu: &Gpu) -> Result<()> {
    e.record(&gpu.stream)
        .map_err(|e| context::cuda_err("recording an event", e))
}
