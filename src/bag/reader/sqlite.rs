//! sqlite3 bags (rosbag2's `.db3`): topics and messages through rusqlite.

#[allow(unused_imports)]
use super::*;

pub(super) fn sql_err(path: &Path, e: rusqlite::Error) -> Error {
    bag_err(path, format!("sqlite3: {e}"))
}

pub(super) fn sqlite_open(path: &Path) -> Result<rusqlite::Connection> {
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

pub(super) fn sqlite_topic_rows(
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

pub(super) fn sqlite_topics(path: &Path) -> Result<Vec<TopicInfo>> {
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

pub(super) fn sqlite_read(
    path: &Path,
    topics: &HashSet<String>,
    f: &mut dyn FnMut(RawMessage) -> Result<Flow>,
) -> Result<Flow> {
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
        return Ok(Flow::Continue(()));
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
        if f(RawMessage {
            topic,
            msgtype,
            log_time: t.max(0) as u64,
            publish_time: t.max(0) as u64,
            data,
        })?
        .is_break()
        {
            return Ok(Flow::Break(()));
        }
    }
    Ok(Flow::Continue(()))
}
