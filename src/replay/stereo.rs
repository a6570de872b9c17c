//! Stereo in the replay (`track.stereo`, VINS-Fusion's stereo mode, as the node runs it):
//! the two image topics' frames paired by stamp (within 3 ms, the node's and VINS-Fusion's
//! tolerance) and tracked together by the first camera's tracker; a first-camera frame whose
//! partner never comes is tracked alone, as the node does when the second camera's frame
//! is missing. The bag may hold the two cameras' frames in either order: each waits for its
//! partner (a few frames at most).
//!
//! The first camera is the VINS config's `image0_topic` (else the first `--topic`); its
//! `feature` message carries both cameras' points, the second camera's tracks go on the
//! second topic's `tracks`.

use std::collections::VecDeque;

use super::report::FeatureTrackFrame;
use super::tracks::{TrackFrame, TrackState};
use super::tracks_topic;
use crate::bag::writer::McapBagWriter;
use crate::camera::CameraModel;
use crate::cdr::{self, Header};
use crate::error::{Error, Result};
use crate::image::GrayImage;
use crate::track::STEREO_PAIR_TOLERANCE_NS;

/// Frames of one camera kept waiting for their partner.
const KEPT: usize = 4;

/// A frame waiting for its partner, with the index of its report measures.
pub(super) struct Waiting {
    pub at: (u64, u64),
    pub header: Header,
    pub gray: GrayImage,
    pub camera: Option<CameraModel>,
    pub stats_index: usize,
}

impl Waiting {
    fn stamp_ns(&self) -> i64 {
        self.header.stamp.as_nanos() as i64
    }

    fn frame(&self) -> TrackFrame<'_> {
        TrackFrame {
            at: self.at,
            header: &self.header,
            gray: &self.gray,
            camera: self.camera.as_ref(),
        }
    }
}

/// The pair's tracker and the frames waiting.
pub(super) struct StereoPair {
    left: String,
    right: String,
    state: TrackState,
    /// The second camera's `tracks` channel.
    right_tracks: u16,
    lefts: VecDeque<Waiting>,
    rights: VecDeque<Waiting>,
    /// First-camera frames tracked with their partner, and alone.
    pub pairs: usize,
    pub alone: usize,
}

/// A tracked first-camera frame: its report index and measures.
pub(super) type Tracked = (usize, Option<FeatureTrackFrame>);

impl StereoPair {
    /// The first and second cameras' topics among the replayed `topics`: the VINS config's
    /// `image0_topic` and `image1_topic` when it names them, else the topics in the order
    /// given. Exactly two image topics are needed.
    pub(super) fn topics<'t>(
        topics: &[&'t str],
        vins_topics: Option<&[String]>,
    ) -> Result<(&'t str, &'t str)> {
        if topics.len() != 2 {
            return Err(Error::Config(format!(
                "track.stereo pairs two image topics (the first camera's first); {} are \
                 replayed ({}): give two with --topic, or --set track.stereo=false",
                topics.len(),
                topics.join(", ")
            )));
        }
        if let Some(v) = vins_topics.filter(|v| v.len() >= 2) {
            let find = |name: &String| topics.iter().copied().find(|t| *t == name);
            if let (Some(l), Some(r)) = (find(&v[0]), find(&v[1])) {
                return Ok((l, r));
            }
        }
        Ok((topics[0], topics[1]))
    }

    pub(super) fn new(
        writer: &mut McapBagWriter,
        left: &str,
        right: &str,
        state: TrackState,
    ) -> Result<StereoPair> {
        Ok(StereoPair {
            left: left.to_string(),
            right: right.to_string(),
            state,
            right_tracks: writer.channel(&tracks_topic(right), cdr::POINT_CLOUD2)?,
            lefts: VecDeque::new(),
            rights: VecDeque::new(),
            pairs: 0,
            alone: 0,
        })
    }

    /// A frame of either camera; returns the first-camera frames tracked now.
    pub(super) fn put(
        &mut self,
        writer: &mut McapBagWriter,
        topic: &str,
        frame: Waiting,
        scratch: &mut Vec<u8>,
    ) -> Result<Vec<Tracked>> {
        let mut done = Vec::new();
        if topic == self.left {
            // Second-camera frames older than this one can no longer find a partner.
            let t = frame.stamp_ns();
            while self
                .rights
                .front()
                .is_some_and(|r| r.stamp_ns() < t - STEREO_PAIR_TOLERANCE_NS)
            {
                self.rights.pop_front();
            }
            self.lefts.push_back(frame);
            if self.lefts.len() > KEPT {
                let l = self.lefts.pop_front().expect("not empty");
                done.push(self.track(writer, l, None, scratch)?);
            }
        } else if topic == self.right {
            // First-camera frames older than this one will not get a partner: alone.
            let t = frame.stamp_ns();
            while self
                .lefts
                .front()
                .is_some_and(|l| l.stamp_ns() < t - STEREO_PAIR_TOLERANCE_NS)
            {
                let l = self.lefts.pop_front().expect("not empty");
                done.push(self.track(writer, l, None, scratch)?);
            }
            self.rights.push_back(frame);
            if self.rights.len() > KEPT {
                self.rights.pop_front();
            }
        }
        // The oldest waiting first-camera frame with its partner, in stamp order.
        while let Some(l) = self.lefts.front() {
            let t = l.stamp_ns();
            let Some(k) = self
                .rights
                .iter()
                .position(|r| (r.stamp_ns() - t).abs() <= STEREO_PAIR_TOLERANCE_NS)
            else {
                break;
            };
            let l = self.lefts.pop_front().expect("not empty");
            let r = self.rights.remove(k).expect("found");
            self.rights.drain(..k);
            done.push(self.track(writer, l, Some(r), scratch)?);
        }
        Ok(done)
    }

    /// At the end of the bag: the first-camera frames still waiting, tracked alone.
    pub(super) fn flush(
        &mut self,
        writer: &mut McapBagWriter,
        scratch: &mut Vec<u8>,
    ) -> Result<Vec<Tracked>> {
        let mut done = Vec::new();
        while let Some(l) = self.lefts.pop_front() {
            done.push(self.track(writer, l, None, scratch)?);
        }
        self.rights.clear();
        Ok(done)
    }

    fn track(
        &mut self,
        writer: &mut McapBagWriter,
        l: Waiting,
        r: Option<Waiting>,
        scratch: &mut Vec<u8>,
    ) -> Result<Tracked> {
        let right = r.as_ref().map(|r| (r.frame(), self.right_tracks));
        match right {
            Some(_) => self.pairs += 1,
            None => self.alone += 1,
        }
        let f = self.state.frame(writer, l.frame(), right, scratch)?;
        Ok((l.stats_index, f))
    }
}
