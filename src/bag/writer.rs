//! Writing ROS 2 bags: MCAP (`ros2` profile, `ros2msg` schemas, `cdr` messages, zstd chunks,
//! with summary and indexes so `ros2 bag`, Foxglove and `mcap` tools open it) and, for tests
//! and tools, a minimal rosbag2 sqlite3 `.db3` writer.
//!
//! Both write to a temporary `.partial` file next to the target and rename it only in
//! `finish`; dropping an unfinished writer deletes the temporary file, so a failed run never
//! leaves a file under the final name.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::cdr;
use crate::error::{Error, Result};

fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bag".into());
    path.with_file_name(format!(".{name}.partial"))
}

fn werr(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Bag(format!("{}: writing: {e}", path.display()))
}

/// An MCAP bag being written.
pub struct McapBagWriter {
    path: PathBuf,
    tmp: PathBuf,
    writer: Option<mcap::Writer<BufWriter<File>>>,
    schemas: HashMap<String, u16>,
    channels: HashMap<String, (u16, String)>,
    sequence: u32,
}

impl McapBagWriter {
    /// Starts `path` (written as `.NAME.partial` until [`finish`](Self::finish)).
    pub fn create(path: &Path) -> Result<Self> {
        let tmp = partial_path(path);
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let writer = mcap::WriteOptions::new()
            .profile("ros2")
            .library(concat!("gpu_features ", env!("CARGO_PKG_VERSION")))
            .compression(Some(mcap::Compression::Zstd))
            .chunk_size(Some(4 << 20))
            .create(BufWriter::with_capacity(1 << 20, file))
            .map_err(|e| werr(&tmp, e))?;
        Ok(McapBagWriter {
            path: path.to_path_buf(),
            tmp,
            writer: Some(writer),
            schemas: HashMap::new(),
            channels: HashMap::new(),
            sequence: 0,
        })
    }

    fn w(&mut self) -> &mut mcap::Writer<BufWriter<File>> {
        self.writer.as_mut().expect("writer is live until finish")
    }

    /// Adds (or returns) the channel of `topic` with a message type whose schema
    /// [`cdr::schema_text`] knows.
    pub fn channel(&mut self, topic: &str, msgtype: &str) -> Result<u16> {
        let text = cdr::schema_text(msgtype)
            .ok_or_else(|| Error::Bag(format!("no schema known for {msgtype}")))?;
        self.channel_with_schema(topic, msgtype, &text)
    }

    /// Adds (or returns) the channel of `topic` with `ros2msg` schema text of its own.
    pub fn channel_with_schema(&mut self, topic: &str, msgtype: &str, text: &str) -> Result<u16> {
        if let Some((id, t)) = self.channels.get(topic) {
            if t != msgtype {
                return Err(Error::Bag(format!(
                    "output topic {topic} used with two types, {t} and {msgtype}"
                )));
            }
            return Ok(*id);
        }
        let schema_id = match self.schemas.get(msgtype) {
            Some(&id) => id,
            None => {
                let tmp = self.tmp.clone();
                let id = self
                    .w()
                    .add_schema(msgtype, "ros2msg", text.as_bytes())
                    .map_err(|e| werr(&tmp, e))?;
                self.schemas.insert(msgtype.to_string(), id);
                id
            }
        };
        let mut meta = BTreeMap::new();
        // What rosbag2 puts there: a YAML list of QoS profiles; empty = defaults.
        meta.insert("offered_qos_profiles".to_string(), String::new());
        let tmp = self.tmp.clone();
        let id = self
            .w()
            .add_channel(schema_id, topic, "cdr", &meta)
            .map_err(|e| werr(&tmp, e))?;
        self.channels
            .insert(topic.to_string(), (id, msgtype.to_string()));
        Ok(id)
    }

    /// Writes one serialized message; times in nanoseconds since the epoch.
    pub fn write(
        &mut self,
        channel: u16,
        log_time: u64,
        publish_time: u64,
        data: &[u8],
    ) -> Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: self.sequence,
            log_time,
            publish_time,
        };
        let tmp = self.tmp.clone();
        self.w()
            .write_to_known_channel(&header, data)
            .map_err(|e| werr(&tmp, e))
    }

    /// Writes the summary, syncs and renames the file to its final name.
    pub fn finish(mut self) -> Result<PathBuf> {
        let mut w = self.writer.take().expect("finish once");
        w.finish().map_err(|e| werr(&self.tmp, e))?;
        let buf = w.into_inner();
        let file = buf
            .into_inner()
            .map_err(|e| werr(&self.tmp, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&self.tmp, e))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(self.path.clone())
    }
}

impl Drop for McapBagWriter {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A rosbag2 sqlite3 `.db3` file being written (schema version 3 tables: `schema`,
/// `metadata`, `topics`, `messages`), for tests and tools.
pub struct Db3Writer {
    path: PathBuf,
    tmp: PathBuf,
    conn: Option<rusqlite::Connection>,
    topics: HashMap<String, i64>,
}

impl Db3Writer {
    pub fn create(path: &Path) -> Result<Self> {
        let tmp = partial_path(path);
        let _ = std::fs::remove_file(&tmp);
        let conn = rusqlite::Connection::open(&tmp).map_err(|e| werr(&tmp, e))?;
        conn.execute_batch(
            "PRAGMA journal_mode = MEMORY;
             PRAGMA synchronous = OFF;
             CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL);
             INSERT INTO schema VALUES (3, 'jazzy');
             CREATE TABLE metadata(id INTEGER PRIMARY KEY, metadata_version INTEGER NOT NULL,
                                   metadata TEXT NOT NULL);
             CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
                                 serialization_format TEXT NOT NULL,
                                 offered_qos_profiles TEXT NOT NULL);
             CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL,
                                   timestamp INTEGER NOT NULL, data BLOB NOT NULL);
             CREATE INDEX timestamp_idx ON messages (timestamp ASC);
             BEGIN;",
        )
        .map_err(|e| werr(&tmp, e))?;
        Ok(Db3Writer {
            path: path.to_path_buf(),
            tmp,
            conn: Some(conn),
            topics: HashMap::new(),
        })
    }

    fn conn(&self) -> &rusqlite::Connection {
        self.conn.as_ref().expect("live until finish")
    }

    pub fn topic(&mut self, name: &str, msgtype: &str) -> Result<i64> {
        if let Some(&id) = self.topics.get(name) {
            return Ok(id);
        }
        self.conn()
            .execute(
                "INSERT INTO topics(name, type, serialization_format, offered_qos_profiles) \
                 VALUES (?1, ?2, 'cdr', '')",
                (name, msgtype),
            )
            .map_err(|e| werr(&self.tmp, e))?;
        let id = self.conn().last_insert_rowid();
        self.topics.insert(name.to_string(), id);
        Ok(id)
    }

    pub fn write(&mut self, topic: i64, timestamp: u64, data: &[u8]) -> Result<()> {
        self.conn()
            .prepare_cached("INSERT INTO messages(topic_id, timestamp, data) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute((topic, timestamp as i64, data)))
            .map_err(|e| werr(&self.tmp, e))?;
        Ok(())
    }

    pub fn finish(mut self) -> Result<PathBuf> {
        let conn = self.conn.take().expect("finish once");
        conn.execute_batch("COMMIT;")
            .map_err(|e| werr(&self.tmp, e))?;
        conn.close().map_err(|(_, e)| werr(&self.tmp, e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(self.path.clone())
    }
}

impl Drop for Db3Writer {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            drop(c);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes a rosbag2 `metadata.yaml` for a bag directory holding `files` (names relative to
/// `dir`), so directory bags built by tools open in `ros2 bag` and here.
pub fn write_metadata_yaml(
    dir: &Path,
    storage: super::reader::StorageKind,
    files: &[&str],
    topics: &[(String, String, u64)],
    start_ns: u64,
    end_ns: u64,
) -> Result<()> {
    let mut s = String::new();
    s.push_str("rosbag2_bagfile_information:\n  version: 9\n");
    s.push_str(&format!("  storage_identifier: {}\n", storage.name()));
    s.push_str(&format!(
        "  duration:\n    nanoseconds: {}\n  starting_time:\n    nanoseconds_since_epoch: {}\n",
        end_ns.saturating_sub(start_ns),
        start_ns
    ));
    let total: u64 = topics.iter().map(|t| t.2).sum();
    s.push_str(&format!(
        "  message_count: {total}\n  topics_with_message_count:\n"
    ));
    for (name, msgtype, n) in topics {
        s.push_str(&format!(
            "    - topic_metadata:\n        name: {name}\n        type: {msgtype}\n        \
             serialization_format: cdr\n        offered_qos_profiles: \"\"\n        \
             type_description_hash: \"\"\n      message_count: {n}\n"
        ));
    }
    s.push_str("  compression_format: \"\"\n  compression_mode: \"\"\n  relative_file_paths:\n");
    for f in files {
        s.push_str(&format!("    - {f}\n"));
    }
    s.push_str("  files:\n");
    for f in files {
        s.push_str(&format!(
            "    - path: {f}\n      starting_time:\n        nanoseconds_since_epoch: {start_ns}\n      \
             duration:\n        nanoseconds: {}\n      message_count: {total}\n",
            end_ns.saturating_sub(start_ns)
        ));
    }
    s.push_str("  custom_data: ~\n  ros_distro: jazzy\n");
    let p = dir.join("metadata.yaml");
    std::fs::write(&p, s).map_err(|e| Error::io(&p, e))
}
