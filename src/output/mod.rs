//! Output formats shared by the CLI, the node and the replay.
//!
//! May import: `cdr`, `config`, `features`, `image`, `matching`, `track`.

pub mod annotations;
pub mod csv;
pub mod gate;
pub mod matches;
pub mod overlay;
pub mod pointcloud;
pub mod tracks;
