//! Reading ROS 2 bags without ROS: MCAP files (the `mcap` crate), sqlite3 `.db3` files
//! (`rusqlite`), and bag directories described by rosbag2's `metadata.yaml`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

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
    /// order; sqlite3: by timestamp). Any error (a corrupt chunk, a truncated file, or one
    /// returned by `f`) stops the read and is returned.
    pub fn read(
        &self,
        topics: &HashSet<String>,
        f: &mut dyn FnMut(RawMessage) -> Result<()>,
    ) -> Result<()> {
        for file in &self.files {
            match file.kind {
                StorageKind::Mcap => mcap_read(&file.path, topics, f)?,
                StorageKind::Sqlite3 => sqlite_read(&file.path, topics, f)?,
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// MCAP

fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and lives only during one read; a bag that is modified
    // while we read it gives wrong bytes (caught by MCAP's checks), not memory unsafety in
    // our code, which only reads the slice.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

fn mcap_err(path: &Path, e: mcap::McapError) -> Error {
    let hint = match &e {
        mcap::McapError::UnexpectedEof | mcap::McapError::UnexpectedEoc => {
            " (the file is truncated or was not closed properly)"
        }
        // The start magic was checked on opening, so it is the end that is missing.
        mcap::McapError::BadMagic => {
            " at the end of the file (it is truncated or was not closed properly)"
        }
        mcap::McapError::BadChunkCrc { .. } | mcap::McapError::BadDataCrc { .. } => {
            " (the file is corrupt)"
        }
        _ => "",
    };
    bag_err(path, format!("MCAP: {e}{hint}"))
}

fn channel_topic(ch: &mcap::Channel) -> TopicInfo {
    TopicInfo {
        name: ch.topic.clone(),
        msgtype: ch
            .schema
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        encoding: ch.message_encoding.clone(),
        count: None,
    }
}

fn mcap_topics(path: &Path) -> Result<Vec<TopicInfo>> {
    let map = map_file(path)?;
    let summary = mcap::Summary::read(&map).map_err(|e| mcap_err(path, e))?;
    let mut by_topic: BTreeMap<String, TopicInfo> = BTreeMap::new();
    match summary {
        Some(s) if !s.channels.is_empty() => {
            let counts = s.stats.as_ref().map(|st| &st.channel_message_counts);
            for (id, ch) in &s.channels {
                let mut t = channel_topic(ch);
                t.count = counts.map(|c| c.get(id).copied().unwrap_or(0));
                match by_topic.get_mut(&t.name) {
                    Some(e) => e.count = e.count.zip(t.count).map(|(a, b)| a + b),
                    None => {
                        by_topic.insert(t.name.clone(), t);
                    }
                }
            }
        }
        _ => {
            // No summary (a bag that was not closed cleanly, or written without one): scan.
            for m in mcap::MessageStream::new(&map).map_err(|e| mcap_err(path, e))? {
                let m = m.map_err(|e| mcap_err(path, e))?;
                let t = by_topic
                    .entry(m.channel.topic.clone())
                    .or_insert_with(|| channel_topic(&m.channel));
                t.count = Some(t.count.unwrap_or(0) + 1);
            }
        }
    }
    Ok(by_topic.into_values().collect())
}

fn mcap_read(
    path: &Path,
    topics: &HashSet<String>,
    f: &mut dyn FnMut(RawMessage) -> Result<()>,
) -> Result<()> {
    let map = map_file(path)?;
    for m in mcap::MessageStream::new(&map).map_err(|e| mcap_err(path, e))? {
        let m = m.map_err(|e| mcap_err(path, e))?;
        if !topics.contains(&m.channel.topic) {
            continue;
        }
        if m.channel.message_encoding != "cdr" {
            return Err(bag_err(
                path,
                format!(
                    "topic {} has message encoding {:?}, not cdr (not a ROS 2 bag?)",
                    m.channel.topic, m.channel.message_encoding
                ),
            ));
        }
        let msgtype = m
            .channel
            .schema
            .as_ref()
            .map(|s| s.name.as_str())
            .unwrap_or("");
        f(RawMessage {
            topic: &m.channel.topic,
            msgtype,
            log_time: m.log_time,
            publish_time: m.publish_time,
            data: &m.data,
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// sqlite3

fn sql_err(path: &Path, e: rusqlite::Error) -> Error {
    bag_err(path, format!("sqlite3: {e}"))
}

fn sqlite_open(path: &Path) -> Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql_err(path, e))?;
    let tables: HashSet<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(|e| sql_err(path, e))?;
    if !tables.contains("topics") || !tables.contains("messages") {
        return Err(bag_err(
            path,
            "sqlite3 file is not a rosbag2 bag (no `topics` and `messages` tables)",
        ));
    }
    Ok(conn)
}

fn sqlite_topic_rows(
    path: &Path,
    conn: &rusqlite::Connection,
) -> Result<Vec<(i64, String, String, String)>> {
    conn.prepare("SELECT id, name, type, serialization_format FROM topics ORDER BY id")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sql_err(path, e))
}

fn sqlite_topics(path: &Path) -> Result<Vec<TopicInfo>> {
    let conn = sqlite_open(path)?;
    let counts: HashMap<i64, u64> = conn
        .prepare("SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id")
        .and_then(|mut s| {
            s.query_map([], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64))
            })?
            .collect::<rusqlite::Result<_>>()
        })
        .map_err(|e| sql_err(path, e))?;
    Ok(sqlite_topic_rows(path, &conn)?
        .into_iter()
        .map(|(id, name, msgtype, encoding)| TopicInfo {
            name,
            msgtype,
            encoding,
            count: Some(counts.get(&id).copied().unwrap_or(0)),
        })
        .collect())
}

fn sqlite_read(
    path: &Path,
    topics: &HashSet<String>,
    f: &mut dyn FnMut(RawMessage) -> Result<()>,
) -> Result<()> {
    let conn = sqlite_open(path)?;
    let mut wanted: HashMap<i64, (String, String)> = HashMap::new();
    for (id, name, msgtype, encoding) in sqlite_topic_rows(path, &conn)? {
        if topics.contains(&name) {
            if encoding != "cdr" {
                return Err(bag_err(
                    path,
                    format!("topic {name} has serialization_format {encoding:?}, not cdr"),
                ));
            }
            wanted.insert(id, (name, msgtype));
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = wanted.keys().map(|k| k.to_string()).collect();
    let sql = format!(
        "SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({}) \
         ORDER BY timestamp, id",
        ids.join(",")
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query([]).map_err(|e| sql_err(path, e))?;
    while let Some(row) = rows.next().map_err(|e| sql_err(path, e))? {
        let id: i64 = row.get(0).map_err(|e| sql_err(path, e))?;
        let t: i64 = row.get(1).map_err(|e| sql_err(path, e))?;
        let data = row
            .get_ref(2)
            .and_then(|v| v.as_blob().map_err(rusqlite::Error::from))
            .map_err(|e| sql_err(path, e))?;
        let (topic, msgtype) = &wanted[&id];
        f(RawMessage {
            topic,
            msgtype,
            log_time: t.max(0) as u64,
            publish_time: t.max(0) as u64,
            data,
        })?;
    }
    Ok(())
}
