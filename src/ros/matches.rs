//! `match.previous`: the descriptor matches of each frame to the previous frame the input
//! processed, published as the `matches` cloud (layout: `output::matches`).

use r2r::sensor_msgs::msg::PointCloud2;
use r2r::std_msgs::msg::Header;

use super::convert;
use crate::features::Descriptor;
use crate::matching::{Match, MatchParams, Matcher};
use crate::pipeline::{BackendChoice, Pipeline};

/// The previous frame's descriptors and the matcher, owned by one input's worker.
#[derive(Default)]
pub struct PreviousFrame {
    matcher: Option<Matcher>,
    previous: Option<Vec<Descriptor>>,
    matches: Vec<Match>,
    buf: Vec<u8>,
}

impl PreviousFrame {
    /// Forgets the previous frame (`match.previous` turned off, or no descriptors).
    pub fn reset(&mut self) {
        self.previous = None;
    }

    /// The matches of `descriptors` to the previous frame's (none on the first frame), as the
    /// cloud to publish with `header`; then remembers `descriptors`. The matcher is made on
    /// the first match, in `pipeline`'s GPU session when it runs on CUDA
    /// (`Matcher::for_pipeline`). The second value is a matcher problem to log (the matcher
    /// has then moved to the CPU; the cloud is still good).
    pub fn step(
        &mut self,
        header: &Header,
        descriptors: &[Descriptor],
        pipeline: &Pipeline,
    ) -> (PointCloud2, Option<String>) {
        let mut problem = None;
        self.matches.clear();
        if let Some(prev) = &self.previous {
            let params = MatchParams::default();
            let matcher = self
                .matcher
                .get_or_insert_with(|| Matcher::for_pipeline(pipeline));
            if let Err(e) = matcher.match_into(descriptors, prev, &params, &mut self.matches) {
                // A GPU failure (or a size over the matcher's limit): the CPU twin gives the
                // same matches, or the same error.
                problem = Some(e.to_string());
                let cpu = self.matcher.insert(Self::cpu());
                if let Err(e) = cpu.match_into(descriptors, prev, &params, &mut self.matches) {
                    problem = Some(e.to_string());
                    self.matches.clear();
                }
            }
        }
        let prev = self.previous.get_or_insert_with(Vec::new);
        prev.clear();
        prev.extend_from_slice(descriptors);
        let cloud = convert::matches_cloud(header, &self.matches, std::mem::take(&mut self.buf));
        (cloud, problem)
    }

    /// Gives the cloud's buffer back for the next frame (no allocation per frame).
    pub fn recycle(&mut self, cloud: PointCloud2) {
        self.buf = cloud.data;
    }

    fn cpu() -> Matcher {
        Matcher::new(BackendChoice::Cpu).expect("the CPU matcher always starts")
    }
}
