//! The tracker's per-frame work buffers ([`Work`]): nothing in them carries meaning from one
//! frame to the next; they are kept so that a frame allocates nothing once they have grown
//! (tests/robustness.rs counts a frame's allocations).
//!
//! May import: as `track`.

use super::fundamental::Ransac;
use super::mask::Discs;
use super::Track;
use crate::cpu::clahe::ClaheScratch;
use crate::cpu::gftt::GfttScratch;
use crate::cpu::lk::Flow;
use crate::image::GrayImage;

#[derive(Default)]
pub(super) struct Work {
    /// goodFeaturesToTrack on the host (the CPU engine, or a mask image).
    pub(super) gftt: GfttScratch,
    /// LK's flows forward and back of the frame's carried tracks.
    pub(super) fwd: Vec<Flow>,
    pub(super) back: Vec<Flow>,
    /// The flow's and the flow back's verdict per carried track.
    pub(super) ok: Vec<bool>,
    /// The tracks that survived the flow, one frame older, with their previous positions.
    pub(super) kept: Vec<(Track, (f32, f32))>,
    /// The frame's tracks being rebuilt (swapped with the tracker's).
    pub(super) spare_tracks: Vec<Track>,
    /// VINS's mask as the discs the kept tracks claimed; painted into `mask` only for a
    /// detector on the host.
    pub(super) discs: Discs,
    pub(super) mask: GrayImage,
    /// The frame's new corners, and the spacing grid of the host's selection.
    pub(super) corners: Vec<(f32, f32)>,
    pub(super) grid: crate::cpu::gftt::SpacingGrid,
    /// The frame's gray pixels when the input had to be converted on the host.
    pub(super) gray: GrayImage,
    /// The F test's RANSAC and its two point lists.
    pub(super) ransac: Ransac,
    pub(super) ransac_a: Vec<(f32, f32)>,
    pub(super) ransac_b: Vec<(f32, f32)>,
    /// The equalised frame (`equalize`) and CLAHE's tables.
    pub(super) equalized: GrayImage,
    pub(super) clahe: ClaheScratch,
}

impl Work {
    /// Room for `m` tracks in every per-track buffer (the image-sized ones grow on the
    /// first two frames of a size).
    pub(super) fn reserve(&mut self, m: usize) {
        for v in [&mut self.corners, &mut self.ransac_a, &mut self.ransac_b] {
            v.reserve(m);
        }
        for v in [&mut self.fwd, &mut self.back] {
            v.reserve(m);
        }
        self.spare_tracks.reserve(m);
        self.kept.reserve(m);
        self.discs.reserve(m);
        self.ok.reserve(m);
        self.ransac.reserve(m);
    }
}
