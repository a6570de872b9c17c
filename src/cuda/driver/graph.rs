//! CUDA graphs: a frame's launches after the decode, recorded once per resolution and config
//! and then replayed with one call per stream (`cuda.graphs`; docs/performance.md, change 20).
//!
//! A thin owner of a `CUgraph` and its executable, rather than cudarc's `CudaGraph`: a
//! failed recording must end the capture without instantiating what was half recorded, and
//! the pipeline that owns the graph moves between threads.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaEvent, CudaStream};

use super::device::{cuda_err, Device};
use crate::error::Result;

pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    stream: Arc<CudaStream>,
}

// SAFETY: CUDA graph objects need their calls serialized, not one thread: the graph is owned
// by one pipeline, which uses it through `&mut self` methods only, one call at a time.
unsafe impl Send for Graph {}

impl Graph {
    /// Records what `queue` puts on `stream` (kernels, copies, [`mark`]ed events) into a
    /// graph, without running it. The capture ends whatever `queue` returns.
    pub fn record(
        gpu: &Device,
        stream: &Arc<CudaStream>,
        queue: impl FnOnce() -> Result<()>,
    ) -> Result<Graph> {
        let s = stream.cu_stream();
        // Thread-local: other threads' pipelines (`bench --streams`, the node's inputs) may
        // allocate or synchronize while this one records.
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        gpu.bind()?;
        // SAFETY: `s` is a live stream of the bound context (the pipeline's own).
        unsafe { result::stream::begin_capture(s, mode) }
            .map_err(|e| cuda_err("starting a graph capture", e))?;
        let queued = queue();
        // SAFETY: the capture begun above, on the same stream and thread.
        let ended = unsafe { result::stream::end_capture(s) };
        let graph = match (queued, ended) {
            (Ok(()), Ok(g)) if !g.is_null() => g,
            (queued, ended) => {
                if let Ok(g) = &ended {
                    if !g.is_null() {
                        // SAFETY: `g` was returned by the capture and is not used again.
                        let _ = unsafe { result::graph::destroy(*g) };
                    }
                }
                // The queueing's own error says more than the capture's.
                queued?;
                return Err(match ended {
                    Err(e) => cuda_err("ending a graph capture", e),
                    Ok(_) => crate::Error::Cuda("a graph capture recorded nothing".into()),
                });
            }
        };
        // Each node keeps the priority it was captured with (its stream's, or its launch's:
        // Launch::priority).
        let flags = sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
        // SAFETY: `graph` is the valid graph the capture returned.
        match unsafe { result::graph::instantiate(graph, flags) } {
            Ok(exec) => Ok(Graph {
                graph,
                exec,
                stream: stream.clone(),
            }),
            Err(e) => {
                // SAFETY: as above; it is not used again.
                let _ = unsafe { result::graph::destroy(graph) };
                Err(cuda_err("instantiating a graph", e))
            }
        }
    }

    /// Queues the recorded work on the stream it was recorded on (no sync). Counts as one
    /// launch for the fault injection ([`Device::inject_fault`]). `name`: for errors ("the
    /// Canny graph").
    pub fn launch(&mut self, gpu: &Device, name: &str) -> Result<()> {
        gpu.check_fault(name)?;
        // SAFETY: `exec` is alive while `self` is; the stream is held by `self.stream`.
        unsafe { result::graph::launch(self.exec, self.stream.cu_stream()) }
            .map_err(|e| cuda_err(&format!("launching {name}"), e))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both were created by `record` and are destroyed once, here.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}

/// Recorded graphs by what they were recorded for (`K`: a source buffer, the parameters
/// baked into their nodes), at most `cap`, the oldest dropped for a new one; and how many
/// were recorded since the last [`GraphCache::clear`] (a caller may stop recording when its
/// keys keep changing).
pub struct GraphCache<K> {
    graphs: Vec<(K, Graph)>,
    cap: usize,
    recorded: usize,
}

impl<K: PartialEq> GraphCache<K> {
    pub fn new(cap: usize) -> Self {
        GraphCache {
            graphs: Vec::new(),
            cap: cap.max(1),
            recorded: 0,
        }
    }

    /// The graph recorded for `key`, if any.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut Graph> {
        self.graphs
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, g)| g)
    }

    /// `graph` kept for `key` (the oldest dropped when `cap` are kept); returned.
    pub fn insert(&mut self, key: K, graph: Graph) -> &mut Graph {
        if self.graphs.len() >= self.cap {
            self.graphs.remove(0);
        }
        self.recorded += 1;
        self.graphs.push((key, graph));
        &mut self.graphs.last_mut().expect("pushed above").1
    }

    /// Graphs recorded since the last clear.
    pub fn recorded(&self) -> usize {
        self.recorded
    }

    /// Every graph dropped (the buffers they were recorded with are going).
    pub fn clear(&mut self) {
        self.graphs.clear();
        self.recorded = 0;
    }
}

/// Records `event` on `stream`. Inside a capture (`in_graph`) it becomes an event-record node
/// of the graph, so that the replays of a graph recorded with them time its stages
/// (`cuda.stage_timings`: such nodes cost GPU time, so not every frame replays that graph).
pub fn mark(event: &CudaEvent, stream: &CudaStream, in_graph: bool) -> Result<()> {
    let flags = if in_graph {
        sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL
    } else {
        sys::CUevent_record_flags::CU_EVENT_RECORD_DEFAULT
    };
    // SAFETY: the event and the stream are alive and belong to the same context.
    unsafe { sys::cuEventRecordWithFlags(event.cu_event(), stream.cu_stream(), flags as u32) }
        .result()
        .map_err(|e| cuda_err("recording an event", e))
}
