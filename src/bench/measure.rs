//! Timing one config on one size: warm-up, then every stage's time and the whole call's wall
//! time per frame ([`RunStats`]), from the caller's frame or from the pipeline's own pinned
//! input buffer.

#[allow(unused_imports)]
use super::*;

/// Timings of one config on one backend at one size.
pub(super) struct RunStats {
    pub(super) frames: usize,
    /// Stage name -> timings, in the pipeline's order.
    pub(super) stages: Vec<(&'static str, Stat)>,
    /// Sum of the stages timed by CUDA events on the critical path (every stage not marked
    /// "(host)" and not overlapped with the others).
    /// Over the frames that timed their stages (`cuda.stage_timings`); none: no such frame.
    pub(super) events_total: Option<Stat>,
    pub(super) wall: Stat,
    /// Keypoints per frame, mean over the distinct frames.
    pub(super) keypoints: f64,
    /// Edge pixels per frame, mean over the distinct frames (Canny on).
    pub(super) edges: Option<f64>,
}

impl RunStats {
    pub(super) fn json(&self) -> Value {
        let stages: serde_json::Map<String, Value> = self
            .stages
            .iter()
            .map(|(k, s)| (k.to_string(), s.json()))
            .collect();
        json!({
            "frames": self.frames,
            "stages": stages,
            "events_total": self.events_total.map(|s| s.json()),
            "wall": self.wall.json(),
            "keypoints_mean": self.keypoints,
            "edge_pixels_mean": self.edges,
        })
    }
}

/// mono8 views of the bench frames.
pub(super) fn views_of(frames: &[GrayImage]) -> Result<Vec<ImageView<'_>>> {
    Ok(frames
        .iter()
        .map(|f| ImageView::mono8(&f.data, f.width, f.height))
        .collect::<std::result::Result<_, _>>()?)
}

/// The bench frames as messages of `encoding` would carry them ([`BenchArgs::encoding`]):
/// mono8 views of `frames`, or bgr8 views of `owned`, filled here with each gray value in
/// all three channels (cvtColor's weights sum to 1 << 14: the decode gives back `frames`).
pub(super) fn encoded_views<'a>(
    frames: &'a [GrayImage],
    encoding: Encoding,
    owned: &'a mut Vec<Vec<u8>>,
) -> Result<Vec<ImageView<'a>>> {
    if encoding == Encoding::Mono8 {
        return views_of(frames);
    }
    *owned = frames
        .iter()
        .map(|f| f.data.iter().flat_map(|&g| [g; 3]).collect())
        .collect();
    Ok(owned
        .iter()
        .zip(frames)
        .map(|(d, f)| ImageView::with_encoding(d, f.width, f.height, f.width * 3, encoding, false))
        .collect::<std::result::Result<_, _>>()?)
}

/// `--pace`: each frame starts one period after the previous one (at once when late).
/// Public for the examples that pace frames as the bench does.
pub struct Pacer {
    period: Option<std::time::Duration>,
    next: Option<Instant>,
}

impl Pacer {
    /// Frames `1 / hz` s apart; `None` (or not a positive rate): no waiting.
    pub fn new(hz: Option<f64>) -> Pacer {
        Pacer {
            period: hz
                .filter(|h| h.is_finite() && *h > 0.0)
                .map(|h| std::time::Duration::from_secs_f64(1.0 / h)),
            next: None,
        }
    }

    /// Whether frames are paced (else they run back to back).
    pub fn paced(&self) -> bool {
        self.period.is_some()
    }

    /// Sleeps until the next frame's start.
    pub fn wait(&mut self) {
        let Some(period) = self.period else { return };
        let now = Instant::now();
        if let Some(next) = self.next.filter(|&n| n > now) {
            std::thread::sleep(next - now);
        }
        self.next = Some(Instant::now() + period);
    }
}

/// Waits for the frame's start and returns it; a paced frame then wakes the pipeline's copy
/// crew ahead ([`Pipeline::prewake`], `cuda.prewake_us`), as the node does when it takes a
/// frame, so that `--pace` times what the node's pipeline takes (the wake-up included).
fn start_frame(p: &Pipeline, pace: &mut Pacer) -> Instant {
    pace.wait();
    let start = Instant::now();
    if pace.paced() {
        p.prewake();
    }
    start
}

/// Runs `warmup` untimed then `n` timed frames, rotating through `frames`, each started by
/// `pace`.
pub(super) fn measure(
    p: &mut Pipeline,
    frames: &[GrayImage],
    encoding: Encoding,
    (warmup, n): (usize, usize),
    pace: &mut Pacer,
) -> Result<RunStats> {
    let mut owned = Vec::new();
    let views = encoded_views(frames, encoding, &mut owned)?;
    let mut out = Features::default();
    for i in 0..warmup {
        start_frame(p, pace);
        p.process_into(&views[i % views.len()], &mut out)?;
    }
    let mut names: Vec<&'static str> = Vec::new();
    let mut per_stage: Vec<Vec<f64>> = Vec::new();
    let (mut walls, mut totals) = (Vec::new(), Vec::new());
    // Per distinct frame, once (untimed): (keypoints, edge pixels).
    let mut counts: Vec<Option<(usize, Option<usize>)>> = vec![None; views.len()];
    for i in 0..n {
        let j = (warmup + i) % views.len();
        let t = start_frame(p, pace);
        p.process_into(&views[j], &mut out)?;
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        if counts[j].is_none() {
            let edges = out
                .edges
                .as_ref()
                .map(|e| e.data.iter().filter(|&&v| v != 0).count());
            counts[j] = Some((out.keypoints.len(), edges));
        }
        // Only every `cuda.stage_timings`-th frame times its stages.
        let (mut total, mut timed) = (0.0, false);
        for st in &out.timings {
            let j = match names.iter().position(|&s| s == st.stage) {
                Some(j) => j,
                None => {
                    names.push(st.stage);
                    per_stage.push(Vec::new());
                    names.len() - 1
                }
            };
            per_stage[j].push(st.ms);
            if !st.stage.contains("(host)") && !st.overlapped {
                total += st.ms;
                timed = true;
            }
        }
        if timed {
            totals.push(total);
        }
    }
    // Frames the timed loop did not reach (fewer frames than distinct ones): count them too,
    // untimed, so that every backend's counts cover the same frames.
    for (j, c) in counts.iter_mut().enumerate() {
        if c.is_none() {
            p.process_into(&views[j], &mut out)?;
            let edges = out
                .edges
                .as_ref()
                .map(|e| e.data.iter().filter(|&&v| v != 0).count());
            *c = Some((out.keypoints.len(), edges));
        }
    }
    let seen: Vec<(usize, Option<usize>)> = counts.into_iter().flatten().collect();
    let mean = |v: &mut dyn Iterator<Item = usize>| {
        v.map(|x| x as f64).sum::<f64>() / seen.len().max(1) as f64
    };
    let keypoints = mean(&mut seen.iter().map(|c| c.0));
    let edges = seen
        .iter()
        .all(|c| c.1.is_some())
        .then(|| mean(&mut seen.iter().filter_map(|c| c.1)));
    let none = || Error::Config("bench: --frames must be at least 1".into());
    // The pipeline's order, the host's stages last: a frame that did not time its GPU stages
    // (`cuda.stage_timings`) may have been the first to name a host stage.
    let mut stages: Vec<_> = names.into_iter().zip(&per_stage).collect();
    stages.sort_by_key(|(name, _)| name.contains("(host)"));
    Ok(RunStats {
        frames: n,
        stages: stages
            .into_iter()
            .map(|(name, v)| (name, Stat::of(v)))
            .filter_map(|(k, s)| s.map(|s| (k, s)))
            .collect(),
        events_total: Stat::of(&totals),
        wall: Stat::of(&walls).ok_or_else(none)?,
        keypoints,
        edges,
    })
}

/// As [`measure`], the wall time only, each frame first written into the pipeline's input
/// buffer (untimed, as a camera driver or an image decoder would write it) and processed
/// from there: the whole call without the copy into pinned memory.
pub(super) fn measure_input_buffer(
    p: &mut Pipeline,
    frames: &[GrayImage],
    encoding: Encoding,
    (warmup, n): (usize, usize),
    pace: &mut Pacer,
) -> Result<Stat> {
    let mut out = Features::default();
    let mut walls = Vec::with_capacity(n);
    let mut owned = Vec::new();
    let views = encoded_views(frames, encoding, &mut owned)?;
    for i in 0..warmup + n {
        let v = &views[i % views.len()];
        start_frame(p, pace);
        p.input_buffer(v.layout())?.copy_from_slice(v.data());
        let t = Instant::now();
        p.process_input_into(&mut out)?;
        if i >= warmup {
            walls.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    Stat::of(&walls).ok_or_else(|| Error::Config("bench: --frames must be at least 1".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacer_spaces_frames_by_its_period_and_none_does_not_wait() {
        let mut p = Pacer::new(Some(200.0));
        let t = Instant::now();
        for _ in 0..4 {
            p.wait();
        }
        // The first frame starts at once, each later one at least 5 ms after the last.
        assert!(t.elapsed() >= std::time::Duration::from_millis(15));
        assert!(p.paced());
        for hz in [None, Some(0.0), Some(f64::NAN), Some(-5.0)] {
            assert!(Pacer::new(hz).period.is_none(), "{hz:?}");
            assert!(!Pacer::new(hz).paced(), "{hz:?}");
        }
    }
}
