//! Presenting measurements, for every command that reports: distribution summaries
//! ([`Dist`]), PNG charts ([`plot`]) and Markdown turned into a self-contained HTML page
//! ([`html`]). The replay's report (`replay::report`), `bench`, the soak and the node's load
//! generator all draw on these.
//!
//! May import: `error`; nothing here knows about frames, bags or backends.

pub mod dist;
pub mod html;
pub mod plot;

pub use self::dist::{pct, Dist};
