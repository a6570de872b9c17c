//! Reading ROS 2 bags without ROS: MCAP files (the `mcap` crate), sqlite3 `.db3` files
//! (`rusqlite`), and bag directories described by rosbag2's `metadata.yaml`.
//!
//! # Why MCAP chunks are still opened here
//!
//! The `mcap` crate finds the records ([`mcap::sans_io::LinearReader`] with a record length
//! limit) and parses each one, but a chunk's records are decompressed, sized and
//! CRC-checked by `mcap_chunk`, and schemas and channels are linked by `McapChannels`,
//! instead of letting the crate's readers open the chunks. Re-checked on 2026-11-23 with a
//! small program reading hand-made files (`handmade_mcap` in `tests/robustness.rs`: one zstd
//! chunk holding a schema, a channel and one message, then data end and footer), through
//! `mcap::MessageStream` and through the sans-io `LinearReader` with
//! `record_length_limit` = file length and chunks decompressed by the crate:
//!
//! | input | 0.24.0 (our version) | 0.26.0 (newest on crates.io) |
//! | --- | --- | --- |
//! | message record length 2^60 inside the chunk | `MessageStream`: aborts the process ("memory allocation of 1152921504606846985 bytes failed"); `LinearReader`: error | same |
//! | message record length `u64::MAX` inside the chunk | `MessageStream`: aborts; `LinearReader`: error | `MessageStream`: panics (add overflow); `LinearReader`: error |
//! | chunk header's uncompressed size 2^60, or the true size + 100 | both hang (killed after 20 s) | both: error ("decompressor made no progress") |
//! | chunk header's uncompressed size the true size - 1 | both panic (subtract overflow, `sans_io/linear_reader.rs:858`) | both: error |
//! | chunk header's uncompressed size 0 | both: `Ok`, the chunk's messages silently dropped | same |
//!
//! (A debug build, i.e. with overflow checks, as our tests run.) So 0.24.0 aborts, hangs or
//! panics on these inputs whichever reader is used, and the hand-made part stays.
//! 0.26.0's `LinearReader` no longer aborts or hangs, but it still takes a chunk that claims
//! 0 bytes as empty (losing its messages without an error), and its `MessageStream` still
//! aborts: moving to it would mean upgrading `mcap`, reading with `LinearReader` plus
//! `mcap::read::ChannelAccumulator` (public from 0.26) and keeping a check of the chunk
//! header's size. The hand-made part is `mcap_chunk` (decompress to at most
//! `mcap_chunk_limit`, then check the size and CRC the header promises) and the loop in
//! `mcap_messages`; `tests/robustness.rs` (`regression_mcap_corrupt_sizes_in_chunk`) holds
//! every input above.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What a reader's callback says after each message: go on, or stop the read there.
pub type Flow = std::ops::ControlFlow<()>;

mod mcap_file;
mod sqlite;

use self::mcap_file::*;
use self::sqlite::*;

const MCAP_MAGIC: &[u8] = b"\x89MCAP0\r\n";
const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// One topic of a bag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    /// ROS type, e.g. `sensor_msgs/msg/Image`.
    pub msgtype: String,
    /// Serialization, `cdr` for every ROS 2 bag.
    pub encoding: String,
    /// Messages on the topic, when the bag says (summary / metadata / sqlite count).
    pub count: Option<u64>,
}

/// One serialized message, borrowed from the reader.
#[derive(Clone, Copy, Debug)]
pub struct RawMessage<'a> {
    pub topic: &'a str,
    pub msgtype: &'a str,
    /// Receive time, nanoseconds since the epoch.
    pub log_time: u64,
    pub publish_time: u64,
    pub data: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    Mcap,
    Sqlite3,
}

impl StorageKind {
    pub fn name(self) -> &'static str {
        match self {
            StorageKind::Mcap => "mcap",
            StorageKind::Sqlite3 => "sqlite3",
        }
    }
}

struct BagFile {
    path: PathBuf,
    kind: StorageKind,
}

/// An opened bag: one file, or the files a `metadata.yaml` lists, read in order.
pub struct Bag {
    path: PathBuf,
    files: Vec<BagFile>,
}

fn bag_err(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Bag(format!("{}: {msg}", path.display()))
}

/// Which storage a file is, from its first bytes.
pub fn sniff(path: &Path) -> Result<StorageKind> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = [0u8; 16];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]).map_err(|e| Error::io(path, e))? {
            0 => break,
            k => n += k,
        }
    }
    let head = &head[..n];
    if head.starts_with(MCAP_MAGIC) {
        Ok(StorageKind::Mcap)
    } else if head == SQLITE_MAGIC {
        Ok(StorageKind::Sqlite3)
    } else if n == 0 {
        Err(bag_err(path, "file is empty"))
    } else {
        Err(bag_err(
            path,
            "neither an MCAP file nor a SQLite3 (.db3) file (unknown magic bytes)",
        ))
    }
}

fn yaml_str<'a>(v: &'a serde_yaml::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|x| x.as_str())
}

impl Bag {
    /// Opens a bag directory (with `metadata.yaml`) or a single `.mcap` / `.db3` file.
    pub fn open(path: &Path) -> Result<Bag> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if !meta.is_dir() {
            let kind = sniff(path)?;
            return Ok(Bag {
                path: path.to_path_buf(),
                files: vec![BagFile {
                    path: path.to_path_buf(),
                    kind,
                }],
            });
        }
        let meta_path = path.join("metadata.yaml");
        if !meta_path.is_file() {
            let mut found: Vec<String> = std::fs::read_dir(path)
                .map_err(|e| Error::io(path, e))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".mcap") || n.ends_with(".db3"))
                .collect();
            found.sort();
            let hint = if found.is_empty() {
                String::new()
            } else {
                format!(
                    "; to read a storage file without it, pass the file itself (found: {})",
                    found.join(", ")
                )
            };
            return Err(bag_err(
                path,
                format!("bag directory has no metadata.yaml{hint}"),
            ));
        }
        let text = std::fs::read_to_string(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
        let doc: serde_yaml::Value = serde_yaml::from_str(&text)
            .map_err(|e| bag_err(&meta_path, format!("not valid YAML: {e}")))?;
        let info = doc
            .get("rosbag2_bagfile_information")
            .ok_or_else(|| bag_err(&meta_path, "no rosbag2_bagfile_information section"))?;
        let storage = yaml_str(info, "storage_identifier").unwrap_or("");
        let declared = match storage {
            "mcap" => StorageKind::Mcap,
            "sqlite3" => StorageKind::Sqlite3,
            other => {
                return Err(bag_err(
                    &meta_path,
                    format!("unsupported storage_identifier {other:?} (mcap or sqlite3)"),
                ))
            }
        };
        let compression = yaml_str(info, "compression_mode").unwrap_or("");
        if !compression.is_empty() && compression != "NONE" {
            return Err(bag_err(
                &meta_path,
                format!(
                    "compression_mode {compression:?} ({}) is not supported; decompress with \
                     `ros2 bag convert` first",
                    yaml_str(info, "compression_format").unwrap_or("?")
                ),
            ));
        }
        let rel = info
            .get("relative_file_paths")
            .and_then(|v| v.as_sequence())
            .ok_or_else(|| bag_err(&meta_path, "no relative_file_paths list"))?;
        if rel.is_empty() {
            return Err(bag_err(&meta_path, "relative_file_paths is empty"));
        }
        let mut files = Vec::new();
        for r in rel {
            let name = r
                .as_str()
                .ok_or_else(|| bag_err(&meta_path, "relative_file_paths has a non-string"))?;
            let p = path.join(name);
            if !p.is_file() {
                return Err(bag_err(
                    &meta_path,
                    format!("lists {name:?}, which does not exist"),
                ));
            }
            let kind = sniff(&p)?;
            if kind != declared {
                return Err(bag_err(
                    &p,
                    format!(
                        "metadata.yaml says {} but the file is {}",
                        declared.name(),
                        kind.name()
                    ),
                ));
            }
            files.push(BagFile { path: p, kind });
        }
        Ok(Bag {
            path: path.to_path_buf(),
            files,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn storage(&self) -> StorageKind {
        self.files[0].kind
    }

    pub fn files(&self) -> Vec<&Path> {
        self.files.iter().map(|f| f.path.as_path()).collect()
    }

    /// Every topic of every file (counts summed), sorted by name.
    pub fn topics(&self) -> Result<Vec<TopicInfo>> {
        let mut all: BTreeMap<String, TopicInfo> = BTreeMap::new();
        for f in &self.files {
            let ts = match f.kind {
                StorageKind::Mcap => mcap_topics(&f.path)?,
                StorageKind::Sqlite3 => sqlite_topics(&f.path)?,
            };
            for t in ts {
                match all.get_mut(&t.name) {
                    Some(e) => {
                        if e.msgtype != t.msgtype {
                            return Err(bag_err(
                                &f.path,
                                format!(
                                    "topic {} has type {} here but {} in an earlier file",
                                    t.name, t.msgtype, e.msgtype
                                ),
                            ));
                        }
                        e.count = e.count.zip(t.count).map(|(a, b)| a + b);
                    }
                    None => {
                        all.insert(t.name.clone(), t);
                    }
                }
            }
        }
        Ok(all.into_values().collect())
    }

    /// Calls `f` on every message of `topics`, file by file, in storage order (MCAP: file
    /// order; sqlite3: by timestamp), until `f` returns [`Flow::Break`]. Any error (a
    /// corrupt chunk, a truncated file, or one returned by `f`) stops the read and is
    /// returned.
    pub fn read(
        &self,
        topics: &HashSet<String>,
        f: &mut dyn FnMut(RawMessage) -> Result<Flow>,
    ) -> Result<()> {
        for file in &self.files {
            let flow = match file.kind {
                StorageKind::Mcap => mcap_read(&file.path, topics, f)?,
                StorageKind::Sqlite3 => sqlite_read(&file.path, topics, f)?,
            };
            if flow.is_break() {
                break;
            }
        }
        Ok(())
    }
}
