//! ROS 2 bags without ROS: read MCAP / sqlite3 bags, replay their images through the
//! [`Pipeline`](crate::Pipeline), write the results as an MCAP bag, and evaluate.
//!
//! * [`cdr`]: hand-written CDR (de)serialisation of the few messages involved.
//! * [`reader`]: MCAP files, `.db3` files and bag directories (`metadata.yaml`).
//! * [`writer`]: MCAP output (atomic: temporary file, renamed when complete), and a small
//!   `.db3` writer for tests and tools.
//! * [`replay`]: `gpu_features replay`.
//! * [`report`]: the evaluation report (Markdown, JSON, PNG plots).
//! * [`eval`]: frame-to-frame tracking and the homography (Mikolajczyk) protocol.

pub mod cdr;
pub mod eval;
pub mod plot;
pub mod reader;
pub mod replay;
pub mod report;
pub mod writer;

pub use reader::{Bag, RawMessage, StorageKind, TopicInfo};
pub use replay::{run, ReplayOptions, ReplaySummary};
