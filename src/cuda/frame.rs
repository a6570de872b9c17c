//! One frame through the CUDA stages ([`CudaPipeline::run_frame`]): the decode, Canny on
//! the side stream, the pyramid, the detection and the selection (replayed from CUDA graphs
//! where they apply), the edge map and the keypoints brought to the host, the stage times.
//!
//! May import: as `cuda`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use cudarc::driver::{result, CudaEvent};

use super::driver::{device as context, graph, DevPtr};
use super::in_flight::{InFlight, FRAMES_IN_FLIGHT};
use super::kept::AfterDecode;
use super::queue::{mark, queue_canny, queue_main, Marks};
use super::state::{Graphs, State};
use super::{decode, select, CudaPipeline, Gpu, MARKS, SPAN_END, STAGE_SPANS};
use crate::config::{Config, Spread};
use crate::error::Result;
use crate::features::{Features, StageTiming};

impl CudaPipeline {
    /// Every stage on the frame from `source`; the decoder exists for its layout. The edge
    /// map goes into `edges` when given (Ok(true) when one was written), else `out.edges`.
    pub(super) fn run_frame(
        &mut self,
        cfg: &Config,
        source: decode::Source,
        out: &mut Features,
        edges: Option<&mut [u8]>,
        after_decode: Option<AfterDecode>,
    ) -> Result<bool> {
        let in_flight = InFlight::enter();
        let layout = match &self.decoder {
            Some(d) => d.layout(),
            None => {
                return Err(crate::Error::Config(
                    "no frame in the input buffer: call input_buffer first".into(),
                ))
            }
        };
        if let Some(dst) = &edges {
            crate::features::check_edges_len(dst.len(), layout.width, layout.height)?;
        }
        self.ensure_state(cfg, layout)?;
        let gpu = &self.gpu;
        let ev = &self.events;
        let st = self.state.as_mut().expect("state");
        let budget = cfg.select.max_keypoints as usize;
        // The budget selection runs on the GPU for spread none; the spread modes on the host.
        let gpu_select = st.key.detect && budget > 0 && cfg.select.spread == Spread::None;

        // Canny runs first, right after the decode, and its packed edge map reaches the host
        // at once (uf_final writes it into mapped pinned memory, else a download follows):
        // the host unpacks it while the GPU runs the pyramid, the detection and the selection.
        ev[0]
            .record(&gpu.stream)
            .map_err(|e| context::cuda_err("recording an event", e))?;
        // A frame that failed after queueing Canny left the side stream running: the decode
        // must not overwrite level 0 under it.
        if self.side_pending {
            gpu.stream
                .wait(&ev[2])
                .map_err(|e| context::cuda_err("waiting for the side stream", e))?;
            self.side_pending = false;
        }
        gpu.set_programmatic_launch(cfg.cuda.programmatic_launch);
        let gray = st.pyr.level_ptr(0);
        let decoder = self.decoder.as_mut().expect("decoder");
        decoder.run(gpu, source, gray, cfg.cuda.host_gray)?;
        mark(&ev[1], gpu)?;
        // The graphs hold no host sync: only the GPU selection's path (the others size their
        // download from a first one).
        let use_graphs = cfg.cuda.graphs && gpu_select;
        // Only every N-th frame reads its stage events (seven reads took ~20 us of a frame,
        // run 57) and, with the graphs, replays the graph that holds the event nodes.
        let every = cfg.cuda.stage_timings as u64;
        let timed = every != 0 && self.frames % every == 0;
        // Halfway between two such frames, one of the graphs without event nodes times the
        // GPU's work after the decode as a whole, by events around the graphs: the stage
        // events' nodes cost GPU time themselves (docs/performance.md, changes 22 and 44).
        let span_timed = use_graphs && every >= 2 && self.frames % every == every / 2;
        self.frames += 1;
        // Derived once: on a device without the levels for it, both choices are the same
        // launches, so one graph serves both.
        let pyramid_priority = gpu.pyramid_priority.filter(|_| in_flight.pyramid_first);
        let plan = Plan {
            gpu_select,
            pyramid_priority,
            timed,
            use_graphs,
            span_timed,
        };
        let side_pending = &mut self.side_pending;
        let work = (out, edges);
        after_decode_work(
            gpu,
            ev,
            st,
            side_pending,
            cfg,
            plan,
            gray,
            work,
            after_decode,
        )
    }
}

/// What a frame runs after its decode ([`CudaPipeline::run_frame`]'s choices).
#[derive(Clone, Copy)]
struct Plan {
    /// The budget selection on the GPU (spread none).
    gpu_select: bool,
    /// The pyramid's launch priority, when it goes first.
    pyramid_priority: Option<i32>,
    /// This frame reads its stage events.
    timed: bool,
    /// The work is replayed from CUDA graphs.
    use_graphs: bool,
    /// This frame times the span after the decode as a whole.
    span_timed: bool,
}

/// The frame after its decode: Canny on the side stream, the pyramid, the detection and
/// the selection (from graphs where they apply), `after_decode` once they are queued, the
/// edge map into `edges` (Ok(true) when written) or `out.edges`, the keypoints brought to
/// the host, the stage times.
#[allow(clippy::too_many_arguments)]
fn after_decode_work(
    gpu: &Gpu,
    ev: &[CudaEvent],
    st: &mut State,
    side_pending: &mut bool,
    cfg: &Config,
    plan: Plan,
    gray: DevPtr<u8>,
    (out, edges): (&mut Features, Option<&mut [u8]>),
    after_decode: Option<AfterDecode>,
) -> Result<bool> {
    let Plan {
        gpu_select,
        pyramid_priority,
        timed,
        use_graphs,
        span_timed,
    } = plan;
    let budget = cfg.select.max_keypoints as usize;
    if use_graphs {
        ensure_graphs(
            gpu,
            ev,
            st,
            cfg,
            (gpu_select, pyramid_priority, timed),
            gray,
        )?;
    }
    let how = (gpu_select, pyramid_priority, timed);
    let span_recorded = queue_after_decode(
        (gpu, ev, st, cfg),
        how,
        (use_graphs, span_timed),
        gray,
        side_pending,
    )?;
    // The same frame's tracking (`after_decode`) on the tracker's stream, from the decode:
    // queued once the detection is, so that the host's work for it runs while the GPU
    // detects (on a crew thread beside this one it took longer: docs/tracking.md).
    if let (Some(f), Some(image)) = (after_decode, st.gray()) {
        gpu.track
            .wait(&ev[1])
            .map_err(|e| context::cuda_err("ordering the tracker's stream", e))?;
        f(image);
    }

    // Without the GPU selection one kernel brings the candidate header and the
    // candidates it counts where the pinned buffers are mapped; else the count is only
    // known after a first sync on the header, then the candidates' download. Either way
    // the header is on the host after the frame's sync.
    if let (false, Some(det)) = (gpu_select, st.det.as_mut()) {
        if !det.copy_candidates(gpu)? {
            det.queue_candidate_header(gpu)?;
            gpu.sync()?;
            det.queue_candidates(gpu)?;
        }
    }
    if !gpu_select {
        mark(&ev[7], gpu)?;
    }

    // The edge map, as soon as its download is done (the rest of the frame still runs).
    let edges_written = st.canny.is_some();
    if let Some(c) = &st.canny {
        // The crew's threads wait for the edge map themselves only when no other
        // pipeline of the process is inside a frame (four pipelines lost 8 % of their
        // frames/s that way, run 37).
        let early = FRAMES_IN_FLIGHT.load(Ordering::Relaxed) == 1;
        c.edges_out_when(&ev[2], early, edges, &mut out.edges)?;
        *side_pending = false;
    } else {
        out.edges = None;
    }
    gpu.sync()?;
    let records = match (&st.det, &st.sel) {
        (Some(det), Some(sel)) if gpu_select => sel.max_kept().min(det.out_cap()),
        (Some(det), _) => (det.header_word(0) as usize).min(det.out_cap()),
        (None, _) => 0,
    };

    let t_host = Instant::now();
    host_outputs(gpu, st, cfg, (gpu_select, records), out)?;
    let host_ms = t_host.elapsed().as_secs_f64() * 1e3;

    let host_stage = if gpu_select || budget == 0 {
        "keypoints (host)"
    } else {
        "select (host)"
    };
    let spans = Spans {
        timed,
        span: span_recorded,
        canny: st.canny.is_some(),
    };
    stage_timings(ev, spans, (host_stage, host_ms), &mut out.timings)?;
    Ok(edges_written)
}

/// The graphs of this config recorded where they are missing (GPU selection only): Canny's
/// on the side stream, and the main one for this frame's pyramid priority and timing.
/// `how`: (the GPU selection, the pyramid's priority, this frame timed).
fn ensure_graphs(
    gpu: &Gpu,
    ev: &[CudaEvent],
    st: &mut State,
    cfg: &Config,
    how: (bool, Option<i32>, bool),
    gray: DevPtr<u8>,
) -> Result<()> {
    let (gpu_select, pyramid_priority, timed) = how;
    let (fi, ti) = (pyramid_priority.is_some() as usize, timed as usize);
    if !st.graphs.as_ref().is_some_and(|g| g.cfg == *cfg) {
        st.graphs = None;
        let canny = match st.canny.as_mut() {
            Some(c) => Some(graph::Graph::record(gpu, &gpu.side, || {
                queue_canny(gpu, c, gray, cfg)
            })?),
            None => None,
        };
        st.graphs = Some(Graphs {
            cfg: cfg.clone(),
            main: Default::default(),
            canny,
        });
    }
    if st.graphs.as_ref().is_some_and(|g| g.main[fi][ti].is_none()) {
        let recorded = graph::Graph::record(gpu, &gpu.stream, || {
            queue_main(
                gpu,
                ev,
                st,
                cfg,
                gpu_select,
                pyramid_priority,
                Marks::InGraph(timed),
            )
        })?;
        if let Some(g) = st.graphs.as_mut() {
            g.main[fi][ti] = Some(recorded);
        }
    }
    Ok(())
}

/// Canny on the side stream (after the decode's mark) and the main work on the pipeline's
/// stream, from their graphs where they apply (`graphs`: (use them, this frame times the
/// span after the decode)); returns whether that span's end was marked. `side_pending`: set
/// while Canny's work is queued and not yet waited for.
fn queue_after_decode(
    (gpu, ev, st, cfg): (&Gpu, &[CudaEvent], &mut State, &Config),
    how: (bool, Option<i32>, bool),
    (use_graphs, span_timed): (bool, bool),
    gray: DevPtr<u8>,
    side_pending: &mut bool,
) -> Result<bool> {
    let (gpu_select, pyramid_priority, timed) = how;
    let (fi, ti) = (pyramid_priority.is_some() as usize, timed as usize);
    let mut graphs = st.graphs.as_mut().filter(|_| use_graphs);
    if let Some(c) = st.canny.as_mut() {
        // Canny and its edge-map download on the side stream, beside the pyramid and the
        // detection: both only read level 0.
        gpu.side
            .wait(&ev[1])
            .map_err(|e| context::cuda_err("ordering the side stream", e))?;
        *side_pending = true;
        match graphs.as_mut().and_then(|g| g.canny.as_mut()) {
            Some(graph) => graph.launch(gpu, "the Canny graph")?,
            None => queue_canny(gpu, c, gray, cfg)?,
        }
        ev[2]
            .record(&gpu.side)
            .map_err(|e| context::cuda_err("recording an event", e))?;
    } else {
        mark(&ev[2], gpu)?; // an empty "canny" stage
    }
    let mut span_recorded = false;
    match graphs.and_then(|g| g.main[fi][ti].as_mut()) {
        Some(main) => {
            main.launch(gpu, "the main graph")?;
            if span_timed {
                mark(&ev[SPAN_END], gpu)?;
                span_recorded = true;
            }
        }
        None => queue_main(gpu, ev, st, cfg, gpu_select, pyramid_priority, Marks::Plain)?,
    }
    Ok(span_recorded)
}

/// The frame's keypoints (and descriptors) from the downloaded records into `out`, after
/// the frame's sync. `sel`: (the GPU selection, the records downloaded).
fn host_outputs(
    gpu: &Gpu,
    st: &mut State,
    cfg: &Config,
    sel: (bool, usize),
    out: &mut Features,
) -> Result<()> {
    let (gpu_select, records) = sel;
    let budget = cfg.select.max_keypoints as usize;
    out.level_sizes.clear();
    out.level_sizes
        .extend(st.pyr.levels.iter().map(|l| (l.w, l.h)));
    out.keypoints.clear();
    out.descriptors.clear();
    // The selector exists with the detector (`State::new`).
    if let (Some(det), Some(sel)) = (&st.det, st.sel.as_mut()) {
        if gpu_select || budget == 0 {
            select::push_keypoints(cfg, det, &st.scales, records, &mut out.keypoints);
        } else {
            sel.assemble(cfg, det, &out.level_sizes, records, &mut out.keypoints);
        }
    }
    if let Some(d) = st.describe.as_mut() {
        if gpu_select {
            // Keypoints were pushed in record order (levels by base, then index).
            out.descriptors
                .extend((0..out.keypoints.len()).map(|i| d.descriptor(i)));
        } else {
            let use_angle = true; // host keypoints carry their final angle (-1 if off)
            d.describe_keypoints(gpu, &st.pyr, &out.keypoints, use_angle)?;
            out.descriptors
                .extend((0..out.keypoints.len()).map(|i| d.descriptor(i)));
        }
    }
    Ok(())
}

/// Which stage times a frame reads: the stage events (`timed`), the span after the decode
/// as a whole (`span`), whether Canny ran beside the detection.
#[derive(Clone, Copy)]
struct Spans {
    timed: bool,
    span: bool,
    canny: bool,
}

/// The frame's stage times into `out` from its events, then the host's own stage (`host`:
/// its name and ms).
fn stage_timings(
    ev: &[CudaEvent],
    spans: Spans,
    host: (&'static str, f64),
    out: &mut Vec<StageTiming>,
) -> Result<()> {
    out.clear();
    let canny = spans.canny;
    // Raw: cudarc's `elapsed_ms` binds the context and waits on both events first, which
    // cost ~50 us per frame over the seven stages (run 36); both streams are synchronized
    // above.
    let elapsed = |from: usize, to: usize| {
        // SAFETY: both events are alive; the callers read only events recorded in this
        // frame.
        unsafe { result::event::elapsed(ev[from].cu_event(), ev[to].cu_event()) }
            .map_err(|e| context::cuda_err("reading an event", e))
    };
    for (stage, (from, to)) in MARKS[1..].iter().zip(STAGE_SPANS).filter(|_| spans.timed) {
        let overlapped = *stage == "canny" && canny;
        let ms = elapsed(from, to)?;
        out.push(StageTiming {
            stage,
            ms: ms as f64,
            overlapped,
        });
    }
    if spans.span {
        let main = elapsed(1, SPAN_END)?;
        let side = if canny { elapsed(1, 2)? } else { 0.0 };
        out.push(StageTiming {
            stage: crate::features::AFTER_DECODE_STAGE,
            ms: main.max(side) as f64,
            overlapped: true,
        });
    }
    out.push(StageTiming {
        stage: host.0,
        ms: host.1,
        overlapped: false,
    });
    Ok(())
}
