//! Output formats shared by the CLI, the node and the replay.

pub mod csv;
pub mod matches;
pub mod overlay;
pub mod pointcloud;
pub mod tracks;
