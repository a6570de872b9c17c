//! ROS 2 bags without ROS: read MCAP / sqlite3 bags, replay their images through the
//! [`Pipeline`](crate::Pipeline), write the results as an MCAP bag, and evaluate.
//!
//! * [`cdr`]: CDR (de)serialisation of the few messages involved (serde + `cdr-encoding`).
//! * [`reader`]: MCAP files, `.db3` files and bag directories (`metadata.yaml`).
//! * [`writer`]: MCAP output (atomic: temporary file, renamed when complete), and a small
//!   `.db3` writer for tests and tools.
//! * [`replay`]: `gpu_features replay`.
//! * [`report`]: the evaluation report (Markdown, JSON, HTML, PNG plots drawn by [`plot`]).
//! * [`html`]: the report's Markdown as a self-contained HTML page.
//! * [`eval`]: frame-to-frame tracking and the homography (Mikolajczyk) protocol.

pub mod cdr;
pub mod eval;
pub mod html;
pub mod plot;
pub mod reader;
pub mod replay;
pub mod report;
pub mod writer;

pub use reader::{Bag, RawMessage, StorageKind, TopicInfo};
pub use replay::{run, ReplayOptions, ReplaySummary};
