//! Which frames the tracker gets and which of them get `feature` and `restart` messages
//! ([`FeatureGate`]), as `track.frontend` says: VINS-Fusion's rule (every frame tracked,
//! `feature` every `feature_every` frames since the (re)start: [`FeatureRate`]) or
//! VINS-Mono's `feature_tracker` node ([`MonoRate`]). The node and the replay share it.
//!
//! May import: as `output`.

use crate::config::{Frontend, TrackConfig};
use crate::track::Reset;

/// Which tracked frames get a `feature` message (`track.feature_every`): every Nth since the
/// tracker started or last restarted, the Nth first; what the node and the replay share.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeatureRate {
    since_start: u64,
}

impl FeatureRate {
    /// One tracked frame (`restarted`: the tracker started over on it); true when its
    /// `feature` message is due.
    pub fn due(&mut self, restarted: bool, every: u32) -> bool {
        if restarted {
            self.since_start = 0;
        }
        self.since_start += 1;
        self.since_start % u64::from(every.max(1)) == 0
    }
}

/// What VINS-Mono's `feature_tracker` node does with a frame (its image callback),
/// [`MonoRate::step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonoStep {
    /// Not tracked: the first frame (it starts the clock), or the first after a restart.
    Skip,
    /// The stamp jumped more than 1 s ahead or went back: `restart` goes out instead of this
    /// frame (the tracker keeps its tracks, as VINS-Mono's).
    Restart,
    /// Tracked. `full`: a frame its frequency control publishes (F test, mask, new corners);
    /// `send`: its `feature` message goes out (every published frame but the very first).
    Track { full: bool, send: bool },
}

/// VINS-Mono's frequency control and stream check (`img_callback`): `freq` messages per
/// second, counted from a clock that restarts whenever the rate is within 1 % of `freq`.
#[derive(Clone, Copy, Debug)]
pub struct MonoRate {
    started: bool,
    first_time: f64,
    last_time: f64,
    pub_count: u32,
    sent_first: bool,
}

impl Default for MonoRate {
    fn default() -> Self {
        MonoRate {
            started: false,
            first_time: 0.0,
            last_time: 0.0,
            pub_count: 1,
            sent_first: false,
        }
    }
}

impl MonoRate {
    /// The frame stamped `stamp` seconds; `freq` Hz (0 = 100, as VINS-Mono reads it).
    pub fn step(&mut self, stamp: f64, freq: u32) -> MonoStep {
        let freq = if freq == 0 { 100.0 } else { f64::from(freq) };
        if !self.started {
            (self.started, self.first_time, self.last_time) = (true, stamp, stamp);
            return MonoStep::Skip;
        }
        if stamp - self.last_time > 1.0 || stamp < self.last_time {
            (self.started, self.last_time, self.pub_count) = (false, 0.0, 1);
            return MonoStep::Restart;
        }
        self.last_time = stamp;
        // The rate so far, rounded half away from zero as C's round().
        let rate = f64::from(self.pub_count) / (stamp - self.first_time);
        let full = rate.round() <= freq;
        if full {
            if (rate - freq).abs() < 0.01 * freq {
                (self.first_time, self.pub_count) = (stamp, 0);
            }
            self.pub_count += 1;
        }
        let send = full && self.sent_first;
        self.sent_first |= full;
        MonoStep::Track { full, send }
    }
}

/// What the node or the replay does with a frame before tracking it ([`FeatureGate::before`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before {
    /// Not tracked; `restart`: send `restart` for it.
    Skip { restart: bool },
    /// Tracked; `full` false: flow only (`Tracker::track_flow_only`).
    Track { full: bool },
}

/// After the tracker ran on a frame ([`FeatureGate::after`]): send `restart` (the tracker
/// started over on it), send its `feature` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct After {
    pub restart: bool,
    pub feature: bool,
}

/// Which frames the tracker gets and which get `feature` and `restart` messages, as
/// `track.frontend` says: VINS-Fusion's (every frame tracked; `feature` every
/// `feature_every` frames since the (re)start; `restart` when the tracker starts over) or
/// VINS-Mono's node ([`MonoRate`]). What the node and the replay share.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeatureGate {
    rate: FeatureRate,
    mono: MonoRate,
    /// The tracker's resets seen so far.
    resets: usize,
    /// VINS-Mono: the tracked frame's `feature` is due.
    send: bool,
}

impl FeatureGate {
    /// The frame stamped `stamp` seconds, before tracking.
    pub fn before(&mut self, stamp: f64, cfg: &TrackConfig) -> Before {
        match cfg.frontend {
            Frontend::VinsFusion => Before::Track { full: true },
            Frontend::VinsMono => match self.mono.step(stamp, cfg.freq) {
                MonoStep::Skip => Before::Skip { restart: false },
                MonoStep::Restart => Before::Skip { restart: true },
                MonoStep::Track { full, send } => {
                    self.send = send;
                    Before::Track { full }
                }
            },
        }
    }

    /// What [`FeatureGate::before`] will say of the frame stamped `stamp`, without moving
    /// the gate on: Some(full) when it will be tracked.
    pub fn peek(&self, stamp: f64, cfg: &TrackConfig) -> Option<bool> {
        let mut ahead = *self;
        match ahead.before(stamp, cfg) {
            Before::Track { full } => Some(full),
            Before::Skip { .. } => None,
        }
    }

    /// The tracked frame, with the tracker's resets so far (`Tracker::resets`).
    pub fn after(&mut self, resets: &[Reset], cfg: &TrackConfig) -> After {
        let new = &resets[self.resets.min(resets.len())..];
        self.resets = resets.len();
        match cfg.frontend {
            Frontend::VinsFusion => {
                let restart = !new.is_empty();
                After {
                    restart,
                    feature: self.rate.due(restart, cfg.feature_every),
                }
            }
            // A time going back was already sent as VINS-Mono's restart two frames ago.
            Frontend::VinsMono => After {
                restart: new.iter().any(|&r| r != Reset::TimeWentBack),
                feature: std::mem::take(&mut self.send),
            },
        }
    }

    /// The youngest tracks the `feature` message carries: VINS-Mono's, those seen twice.
    pub fn min_age(cfg: &TrackConfig) -> u32 {
        match cfg.frontend {
            Frontend::VinsFusion => 1,
            Frontend::VinsMono => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_rate_every_nth_since_the_restart() {
        let mut r = FeatureRate::default();
        let got: Vec<bool> = [false, false, false, false, true, false, false]
            .iter()
            .map(|&restart| r.due(restart, 2))
            .collect();
        // Frames 2 and 4 of the start, then frame 2 after the restart on frame 5.
        assert_eq!(got, [false, true, false, true, false, true, false]);
        let mut one = FeatureRate::default();
        assert!((0..5).all(|k| one.due(k == 3, 1)));
    }

    #[test]
    fn mono_rate_as_vins_mono_at_20_hz_with_freq_10() {
        // 20 Hz frames: the first starts the clock; then every second frame is published,
        // the first published one not sent.
        let mut r = MonoRate::default();
        let got: Vec<MonoStep> = (0..7)
            .map(|k| r.step(100.0 + 0.05 * k as f64, 10))
            .collect();
        let tr = |full, send| MonoStep::Track { full, send };
        assert_eq!(
            got,
            [
                MonoStep::Skip,
                tr(false, false),
                tr(true, false),
                tr(false, false),
                tr(true, true),
                tr(false, false),
                tr(true, true)
            ]
        );
        // A 2 s gap: restart instead of that frame, the next one starts the clock, and the
        // first published frame after it is sent (only the very first never is).
        assert_eq!(r.step(102.3, 10), MonoStep::Restart);
        assert_eq!(r.step(102.35, 10), MonoStep::Skip);
        assert_eq!(r.step(102.40, 10), tr(false, false));
        assert_eq!(r.step(102.45, 10), tr(true, true));
        // Time going back restarts too; freq 0 is 100 Hz: every frame published.
        assert_eq!(r.step(50.0, 0), MonoStep::Restart);
        assert_eq!(r.step(50.05, 0), MonoStep::Skip);
        assert_eq!(r.step(50.10, 0), tr(true, true));
        assert_eq!(r.step(50.15, 0), tr(true, true));
    }

    #[test]
    fn peek_tells_what_before_says_and_leaves_the_gate() {
        let cfg = TrackConfig {
            frontend: Frontend::VinsMono,
            freq: 10,
            ..Default::default()
        };
        let mut g = FeatureGate::default();
        let mut said = vec![];
        for k in 0..8 {
            let stamp = 100.0 + 0.05 * k as f64;
            let peeked = (g.peek(stamp, &cfg), g.peek(stamp, &cfg));
            let got = match g.before(stamp, &cfg) {
                Before::Track { full } => Some(full),
                Before::Skip { .. } => None,
            };
            assert_eq!(peeked, (got, got), "frame {k}");
            said.push(got);
        }
        // Skipped, flow-only and full frames all came up.
        for want in [None, Some(false), Some(true)] {
            assert!(said.contains(&want), "{said:?}");
        }
    }

    #[test]
    fn feature_gate_per_frontend() {
        let mut cfg = TrackConfig {
            feature_every: 2,
            ..Default::default()
        };
        let mut g = FeatureGate::default();
        let mut resets = vec![];
        let mut got = vec![];
        for k in 0..4 {
            assert_eq!(g.before(k as f64, &cfg), Before::Track { full: true });
            if k == 2 {
                resets.push(Reset::Camera);
            }
            got.push(g.after(&resets, &cfg));
        }
        let a = |restart, feature| After { restart, feature };
        assert_eq!(
            got,
            [
                a(false, false),
                a(false, true),
                a(true, false),
                a(false, true)
            ]
        );
        cfg.frontend = Frontend::VinsMono;
        cfg.feature_every = 1;
        let mut g = FeatureGate::default();
        let mut resets = vec![];
        assert_eq!(g.before(0.0, &cfg), Before::Skip { restart: false });
        assert_eq!(g.before(0.05, &cfg), Before::Track { full: false });
        assert_eq!(g.after(&resets, &cfg), a(false, false));
        assert_eq!(g.before(0.10, &cfg), Before::Track { full: true });
        assert_eq!(
            g.after(&resets, &cfg),
            a(false, false),
            "the first is not sent"
        );
        assert_eq!(g.before(0.15, &cfg), Before::Track { full: false });
        // The tracker's own start-over on a time going back is not sent again.
        resets.push(Reset::TimeWentBack);
        assert_eq!(g.after(&resets, &cfg), a(false, false));
        assert_eq!(g.before(0.20, &cfg), Before::Track { full: true });
        resets.push(Reset::Resolution);
        assert_eq!(g.after(&resets, &cfg), a(true, true));
        assert_eq!(FeatureGate::min_age(&cfg), 2);
    }
}
