//! The driver's floor under a frame that comes alone, as a camera's frames come to the node:
//! the least a GPU front-end must do per frame (copy the message into pinned memory, upload
//! it, launch its work, bring results back, wait for them), with no work of ours around it.
//! Built on cudarc's raw driver calls only, so that nothing of the pipeline or the tracker is
//! in it: one CUDA graph of one kernel that busy-waits `--gpu-us` on the GPU's own clock
//! (0: an empty kernel), then a download of the results (150 points, 1,200 bytes).
//!
//! Per frame, with `trips` round trips (1: the least any front-end needs; 3: one per wait the
//! node's tracking path makes today, the pipeline's, the flows' and the new corners'), the
//! host time of the copy and of the whole frame, back to back and paced at `--pace` Hz,
//! each in its own pass of `--frames` frames after a warm-up, in one process. A paced row's
//! excess over the back-to-back row is what the idle spell costs the driver and the host,
//! whatever the front-end does. More paced rows say where that excess sits: the host
//! spinning for the first `--lead-us` before each frame (a core kept awake); an empty round
//! trip that long before it, then spinning (the driver and the GPU woken too); the round
//! trip each `--lead-us` before it, then sleeping, as a node's thread waits for a message.
//!
//! ```sh
//! cargo run --release --example paced_floor -- --pace 30 --frames 300 --gpu-us 0,180 --lead-us 300,1000,3000
//! ```
//! Prints the p50 / p90 ms of each; docs/tracking.md, "The paced floor".
use std::ffi::c_void;
use std::time::Instant;

use cudarc::driver::{result, sys, CudaContext, CudaModule, CudaStream};

const WIDTH: usize = 752;
const HEIGHT: usize = 480;
/// 150 points' two floats, what the tracking path brings back per frame at least.
const RESULT_BYTES: usize = 150 * 8;

const KERNEL: &str = r#"
extern "C" __global__ void spin_ns(unsigned long long ns, unsigned char *out) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
    if (threadIdx.x == 0) out[0] = (unsigned char)(t - t0);
}
"#;

struct Args {
    hz: f64,
    frames: usize,
    gpu_us: Vec<u64>,
    lead_us: Vec<u64>,
}

fn args() -> Args {
    let a: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        a.iter()
            .position(|x| x == name)
            .and_then(|i| a.get(i + 1))
            .cloned()
    };
    Args {
        hz: value("--pace").map_or(30.0, |v| v.parse().expect("--pace HZ")),
        frames: value("--frames").map_or(300, |v| v.parse().expect("--frames N")),
        gpu_us: value("--gpu-us")
            .unwrap_or_else(|| "0,180".into())
            .split(',')
            .map(|v| v.trim().parse().expect("--gpu-us US[,US...]"))
            .collect(),
        lead_us: value("--lead-us")
            .unwrap_or_else(|| "300,1000,3000".into())
            .split(',')
            .map(|v| v.trim().parse().expect("--lead-us US[,US...]"))
            .collect(),
    }
}

/// What one frame needs on the host and the device: the message (pageable, as the
/// middleware hands it over), its pinned staging, the frame and the results on the device,
/// the results' pinned landing place, and one recorded graph per GPU time.
struct Rig {
    /// The GPU's name.
    name: String,
    /// Held for the graphs' kernel, which must not be unloaded while they live.
    _module: std::sync::Arc<CudaModule>,
    stream: std::sync::Arc<CudaStream>,
    message: Vec<u8>,
    source: Vec<u8>,
    staging: *mut u8,
    frame_dev: sys::CUdeviceptr,
    out_dev: sys::CUdeviceptr,
    out_host: *mut u8,
    graphs: Vec<(u64, sys::CUgraphExec)>,
}

impl Rig {
    fn new(gpu_us: &[u64]) -> Rig {
        let ctx = CudaContext::new(0).expect("a CUDA device");
        let stream = ctx.new_stream().unwrap();
        let ptx = cudarc::nvrtc::compile_ptx(KERNEL).expect("NVRTC");
        let module = ctx.load_module(ptx).unwrap();
        let spin = module.load_function("spin_ns").unwrap();
        let bytes = WIDTH * HEIGHT;
        // SAFETY: plain allocations of the sizes used below, in the stream's context (bound by
        // `new_stream`); they live as long as the process (the example never frees them).
        let (staging, out_host, frame_dev, out_dev) = unsafe {
            (
                result::malloc_host(bytes, 0).unwrap() as *mut u8,
                result::malloc_host(RESULT_BYTES, 0).unwrap() as *mut u8,
                result::malloc_sync(bytes).unwrap(),
                result::malloc_sync(RESULT_BYTES).unwrap(),
            )
        };
        let mut graphs = Vec::new();
        for &us in gpu_us {
            let s = stream.cu_stream();
            let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
            let mut ns = us * 1000;
            let mut out = out_dev;
            let mut params = [
                &mut ns as *mut u64 as *mut c_void,
                &mut out as *mut sys::CUdeviceptr as *mut c_void,
            ];
            // SAFETY: the capture records one launch of `spin_ns(u64, u8*)` with its two
            // arguments, which live until the launch returns; `out` is a device buffer of
            // RESULT_BYTES; capture and launch are on this thread and stream.
            let exec = unsafe {
                result::stream::begin_capture(s, mode).unwrap();
                result::launch_kernel(spin.cu_function(), (1, 1, 1), (32, 1, 1), 0, s, &mut params)
                    .unwrap();
                let g = result::stream::end_capture(s).unwrap();
                result::graph::instantiate(g, sys::CUgraphInstantiate_flags(0)).unwrap()
            };
            graphs.push((us, exec));
        }
        Rig {
            name: ctx.name().unwrap_or_default(),
            _module: module,
            stream,
            message: vec![0; bytes],
            source: (0..bytes).map(|i| (i * 7 % 251) as u8).collect(),
            staging,
            frame_dev,
            out_dev,
            out_host,
            graphs,
        }
    }

    /// One round trip of the first `--gpu-us` graph (0 by default: an empty one), with the
    /// download and the wait: what a front-end could do just before a frame it expects, to
    /// wake the driver and the GPU.
    fn warm(&mut self) {
        let s = self.stream.cu_stream();
        // SAFETY: as in `frame`: the download lands in the pinned result buffer, and the
        // stream is waited for before this returns.
        unsafe {
            let out = std::slice::from_raw_parts_mut(self.out_host, RESULT_BYTES);
            result::graph::launch(self.graphs[0].1, s).unwrap();
            result::memcpy_dtoh_async(out, self.out_dev, s).unwrap();
            result::stream::synchronize(s).unwrap();
        }
    }

    /// One frame with `trips` launch-download-wait rounds of graph `g`: the host time of the
    /// copy into pinned memory and of the whole, in ms.
    fn frame(&mut self, g: usize, trips: usize) -> (f64, f64) {
        // The middleware writes the message before the node takes it.
        self.message.copy_from_slice(&self.source);
        let s = self.stream.cu_stream();
        let bytes = self.message.len();
        let t0 = Instant::now();
        // SAFETY: `staging` holds `bytes` pinned bytes, written only here and read by the
        // upload below, which is waited for before this function returns.
        let staging = unsafe { std::slice::from_raw_parts_mut(self.staging, bytes) };
        staging.copy_from_slice(&self.message);
        let copy = t0.elapsed().as_secs_f64() * 1e3;
        // SAFETY: the device and pinned buffers have the sizes copied; every queued copy
        // and launch is waited for (stream sync) before the host reads or writes them again.
        unsafe {
            result::memcpy_htod_async(self.frame_dev, &staging[..], s).unwrap();
            let out = std::slice::from_raw_parts_mut(self.out_host, RESULT_BYTES);
            for _ in 0..trips {
                result::graph::launch(self.graphs[g].1, s).unwrap();
                result::memcpy_dtoh_async(out, self.out_dev, s).unwrap();
                result::stream::synchronize(s).unwrap();
            }
        }
        (copy, t0.elapsed().as_secs_f64() * 1e3)
    }
}

/// p50 / p90 of `v`, as text.
fn p50_p90(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.3} / {:.3}", v[v.len() / 2], v[v.len() * 9 / 10])
}

/// How a paced frame's start is met (`lead`: µs before it).
#[derive(Clone, Copy)]
enum Pace {
    /// Back to back.
    None,
    /// Sleeping until the frame's start.
    Sleep,
    /// Sleeping until `lead` before it, then spinning on the host.
    Spin(u64),
    /// Sleeping until `lead` before it, one empty round trip (launch, download, wait),
    /// then spinning.
    WarmSpin(u64),
    /// The same round trip `lead` before it, then sleeping (as a node's thread waits for
    /// its next message).
    WarmSleep(u64),
}

impl Pace {
    fn name(self, hz: f64) -> String {
        match self {
            Pace::None => "back to back".into(),
            Pace::Sleep => format!("{hz} Hz"),
            Pace::Spin(us) => format!("{hz} Hz, spin {us} us ahead"),
            Pace::WarmSpin(us) => format!("{hz} Hz, round trip {us} us ahead, spin"),
            Pace::WarmSleep(us) => format!("{hz} Hz, round trip {us} us ahead, sleep"),
        }
    }

    /// Until when the thread sleeps first, and whether it then makes the round trip and
    /// spins, for a frame due at `next`.
    fn plan(self, next: Instant) -> (Instant, bool, bool) {
        let ahead = |us| next - std::time::Duration::from_micros(us);
        match self {
            Pace::None | Pace::Sleep => (next, false, false),
            Pace::Spin(us) => (ahead(us), false, true),
            Pace::WarmSpin(us) => (ahead(us), true, true),
            Pace::WarmSleep(us) => (ahead(us), true, false),
        }
    }
}

fn sleep_until(t: Instant) {
    if let Some(d) = t.checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
}

/// `frames` timed frames (after 30 untimed) of graph `g` with `trips` round trips each, their
/// starts met as `pace` asks: the copies' and the whole frames' times.
fn pass(rig: &mut Rig, g: usize, trips: usize, pace: Pace, a: &Args) -> (Vec<f64>, Vec<f64>) {
    let period = std::time::Duration::from_secs_f64(1.0 / a.hz);
    let mut next = Instant::now() + period;
    let (mut copies, mut wholes) = (Vec::new(), Vec::new());
    for k in 0..a.frames + 30 {
        if !matches!(pace, Pace::None) {
            let (wake, warm, spin) = pace.plan(next);
            sleep_until(wake);
            if warm {
                rig.warm();
            }
            if spin {
                while Instant::now() < next {
                    std::hint::spin_loop();
                }
            } else {
                sleep_until(next);
            }
            next += period;
        }
        let (c, w) = rig.frame(g, trips);
        if k >= 30 {
            copies.push(c);
            wholes.push(w);
        }
    }
    (copies, wholes)
}

fn main() {
    let a = args();
    let mut rig = Rig::new(&a.gpu_us);
    println!(
        "paced_floor: {WIDTH}x{HEIGHT} mono8 frames, {} per pass, {}; ms p50 / p90",
        a.frames, rig.name
    );
    println!("| GPU work | trips | frames | copy into pinned | whole frame |");
    println!("|---:|---:|---|---:|---:|");
    let first = a.lead_us[0];
    for g in 0..rig.graphs.len() {
        for trips in [1, 3] {
            let mut paces = vec![Pace::None, Pace::Sleep];
            if trips == 1 {
                paces.extend([Pace::Spin(first), Pace::WarmSpin(first)]);
            }
            paces.extend(a.lead_us.iter().map(|&us| Pace::WarmSleep(us)));
            for pace in paces {
                let (mut copies, mut wholes) = pass(&mut rig, g, trips, pace, &a);
                println!(
                    "| {} us | {trips} | {} | {} | {} |",
                    rig.graphs[g].0,
                    pace.name(a.hz),
                    p50_p90(&mut copies),
                    p50_p90(&mut wholes)
                );
            }
        }
    }
}
