//! ROS 2 bags without ROS: reading MCAP / sqlite3 bags, writing MCAP (and small `.db3` for
//! tests and tools). Bags only: the messages' CDR is [`crate::cdr`], the replay command that
//! runs their images through the pipeline is [`crate::replay`].
//!
//! * [`reader`]: MCAP files, `.db3` files and bag directories (`metadata.yaml`).
//! * [`writer`]: MCAP output (atomic: temporary file, renamed when complete), and a small
//!   `.db3` writer.
//!
//! May import: `error`, `image` (the frame size limit), `cdr`.

pub mod reader;
pub mod writer;

pub use reader::{Bag, RawMessage, StorageKind, TopicInfo};
