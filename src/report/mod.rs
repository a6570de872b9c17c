//! Presenting measurements, for every command that reports: distribution summaries
//! ([`Dist`]), PNG charts ([`plot`]) and Markdown turned into a self-contained HTML page
//! ([`html`]). The replay's report (`replay::report`), `bench`, the soak and the node's load
//! generator all draw on these.
//!
//! May import: `error` and external crates only. Nothing here knows about frames, bags or
//! the pipeline; the rooms that measure (replay, eval, bench, soak, ros::load) import this one.

pub mod dist;
pub mod html;
pub mod plot;

pub use self::dist::{pct, Dist};
