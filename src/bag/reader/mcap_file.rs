//! MCAP bags: the summary, the channels and the chunks, opened and checked here (the
//! parent module's docs say why).

#[allow(unused_imports)]
use super::*;

pub(super) fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and lives only during one read; a bag that is modified
    // while we read it gives wrong bytes (caught by MCAP's checks), not memory unsafety in
    // our code, which only reads the slice.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

pub(super) fn mcap_err(path: &Path, e: mcap::McapError) -> Error {
    let hint = match &e {
        mcap::McapError::UnexpectedEof | mcap::McapError::UnexpectedEoc => {
            " (the file is truncated or was not closed properly)"
        }
        // The start magic was checked on opening, so it is the end that is missing.
        mcap::McapError::BadMagic => {
            " at the end of the file (it is truncated or was not closed properly)"
        }
        mcap::McapError::BadChunkCrc { .. }
        | mcap::McapError::BadDataCrc { .. }
        | mcap::McapError::ChunkTooLarge(_)
        | mcap::McapError::DecompressionError(_)
        | mcap::McapError::RecordTooLarge { .. } => " (the file is corrupt)",
        _ => "",
    };
    bag_err(path, format!("MCAP: {e}{hint}"))
}

pub(super) fn channel_topic(ch: &mcap::Channel) -> TopicInfo {
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

pub(super) fn mcap_topics(path: &Path) -> Result<Vec<TopicInfo>> {
    let map = map_file(path)?;
    // `Summary::read` parses the summary section with the `mcap` crate, which reserves what
    // a string's length prefix says before reading it: check the section's lengths first.
    mcap_check_summary(path, &map)?;
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
            // (Never stopped early: every message counts.)
            let _: Flow = mcap_messages(path, &map, &mut |ch, _, _| {
                let t = by_topic
                    .entry(ch.topic.clone())
                    .or_insert_with(|| TopicInfo {
                        name: ch.topic.clone(),
                        msgtype: ch.schema.clone(),
                        encoding: ch.message_encoding.clone(),
                        count: None,
                    });
                t.count = Some(t.count.unwrap_or(0) + 1);
                Ok(Flow::Continue(()))
            })?;
        }
    }
    Ok(by_topic.into_values().collect())
}

pub(super) fn mcap_read(
    path: &Path,
    topics: &HashSet<String>,
    f: &mut dyn FnMut(RawMessage) -> Result<Flow>,
) -> Result<Flow> {
    let map = map_file(path)?;
    mcap_messages(path, &map, &mut |ch, header, data| {
        if !topics.contains(&ch.topic) {
            return Ok(Flow::Continue(()));
        }
        if ch.message_encoding != "cdr" {
            return Err(bag_err(
                path,
                format!(
                    "topic {} has message encoding {:?}, not cdr (not a ROS 2 bag?)",
                    ch.topic, ch.message_encoding
                ),
            ));
        }
        f(RawMessage {
            topic: &ch.topic,
            msgtype: &ch.schema,
            log_time: header.log_time,
            publish_time: header.publish_time,
            data,
        })
    })
}

/// What a message needs of its MCAP channel.
pub(super) struct McapChannel {
    topic: String,
    message_encoding: String,
    /// The schema's name (the ROS type), empty when the channel has none.
    schema: String,
    schema_id: u16,
}

/// The largest decompressed chunk the MCAP reader accepts: 64 times the file, at least
/// 64 MiB, at most a message of the largest frame the library takes. It bounds what a corrupt
/// size field can make the reader allocate.
pub(super) fn mcap_chunk_limit(file_len: usize) -> usize {
    let largest_frame = 4 * crate::image::MAX_PIXELS + (64 << 20);
    file_len.saturating_mul(64).clamp(64 << 20, largest_frame)
}

/// The records of one chunk, decompressed, with the size and CRC its header promises.
///
/// Done here rather than by the `mcap` crate's streams, which trust the sizes in the file: a
/// corrupt record length inside a compressed chunk makes them reserve that much (and abort
/// the process), and a chunk whose header claims more bytes than its data holds makes them
/// loop forever.
pub(super) fn mcap_chunk<'a>(
    path: &Path,
    header: &mcap::records::ChunkHeader,
    data: &'a [u8],
    limit: usize,
) -> Result<std::borrow::Cow<'a, [u8]>> {
    use std::borrow::Cow;
    let size = usize::try_from(header.uncompressed_size)
        .ok()
        .filter(|&n| n <= limit)
        .ok_or_else(|| {
            mcap_err(
                path,
                mcap::McapError::ChunkTooLarge(header.uncompressed_size),
            )
        })?;
    let decompress_err =
        |e: std::io::Error| mcap_err(path, mcap::McapError::DecompressionError(e.to_string()));
    let content: Cow<[u8]> = match header.compression.as_str() {
        "" => Cow::Borrowed(data),
        "zstd" => Cow::Owned(zstd::bulk::decompress(data, size).map_err(decompress_err)?),
        "lz4" => {
            let mut out = Vec::new();
            lz4::Decoder::new(data)
                .and_then(|d| d.take(size as u64 + 1).read_to_end(&mut out))
                .map_err(decompress_err)?;
            Cow::Owned(out)
        }
        other => {
            return Err(mcap_err(
                path,
                mcap::McapError::UnsupportedCompression(other.into()),
            ))
        }
    };
    if content.len() != size {
        return Err(bag_err(
            path,
            format!(
                "MCAP: a chunk holds {} bytes but its header says {size} (the file is corrupt)",
                content.len()
            ),
        ));
    }
    if header.uncompressed_crc != 0 {
        let calculated = crc32fast::hash(&content);
        if calculated != header.uncompressed_crc {
            return Err(mcap_err(
                path,
                mcap::McapError::BadChunkCrc {
                    saved: header.uncompressed_crc,
                    calculated,
                },
            ));
        }
    }
    Ok(content)
}

/// What [`mcap_messages`] calls on each message: its channel, header and data.
pub(super) type McapMessageFn<'f> =
    dyn FnMut(&McapChannel, &mcap::records::MessageHeader, &[u8]) -> Result<Flow> + 'f;

/// Schemas and channels seen so far in an MCAP file, as `mcap::MessageStream` keeps them.
#[derive(Default)]
pub(super) struct McapChannels {
    schemas: HashMap<u16, mcap::records::SchemaHeader>,
    channels: HashMap<u16, McapChannel>,
}

impl McapChannels {
    /// Takes one (non-chunk) record: schemas and channels are kept, messages go to `f`.
    fn record(
        &mut self,
        path: &Path,
        record: mcap::records::Record,
        f: &mut McapMessageFn,
    ) -> Result<Flow> {
        use mcap::records::Record;
        match record {
            Record::Schema { header, .. } => {
                if header.id == 0 {
                    return Err(mcap_err(path, mcap::McapError::InvalidSchemaId));
                }
                match self.schemas.get(&header.id) {
                    Some(s) if *s != header => {
                        return Err(mcap_err(
                            path,
                            mcap::McapError::ConflictingSchemas(header.name),
                        ))
                    }
                    Some(_) => {}
                    None => {
                        self.schemas.insert(header.id, header);
                    }
                }
            }
            Record::Channel(ch) => {
                let schema = match ch.schema_id {
                    0 => String::new(),
                    id => match self.schemas.get(&id) {
                        Some(s) => s.name.clone(),
                        None => {
                            return Err(mcap_err(
                                path,
                                mcap::McapError::UnknownSchema(ch.topic, id),
                            ))
                        }
                    },
                };
                let new = McapChannel {
                    topic: ch.topic,
                    message_encoding: ch.message_encoding,
                    schema,
                    schema_id: ch.schema_id,
                };
                match self.channels.get(&ch.id) {
                    Some(c)
                        if (&c.topic, &c.message_encoding, c.schema_id)
                            != (&new.topic, &new.message_encoding, new.schema_id) =>
                    {
                        return Err(mcap_err(
                            path,
                            mcap::McapError::ConflictingChannels(new.topic),
                        ))
                    }
                    Some(_) => {}
                    None => {
                        self.channels.insert(ch.id, new);
                    }
                }
            }
            Record::Message { header, data } => {
                let ch = self.channels.get(&header.channel_id).ok_or_else(|| {
                    mcap_err(
                        path,
                        mcap::McapError::UnknownChannel(header.sequence, header.channel_id),
                    )
                })?;
                return f(ch, &header, &data);
            }
            _ => {}
        }
        Ok(Flow::Continue(()))
    }
}

/// Splits the first record (opcode u8, length u64 LE, body) off `buf`, the checked content
/// of a chunk or the summary section: a record that does not fit is corruption.
pub(super) fn mcap_split_record<'a>(
    path: &Path,
    buf: &'a [u8],
) -> Result<(u8, &'a [u8], &'a [u8])> {
    let corrupt = |what: String| bag_err(path, format!("MCAP: {what} (the file is corrupt)"));
    let head = buf.get(..9).ok_or_else(|| {
        corrupt(format!(
            "{} stray bytes after the last record of a chunk or section",
            buf.len()
        ))
    })?;
    let len = u64::from_le_bytes(head[1..9].try_into().expect("8 bytes"));
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= buf.len() - 9)
        .ok_or_else(|| {
            corrupt(format!(
                "a record of {len} bytes does not fit in the {} bytes left of its chunk or \
                 section",
                buf.len() - 9
            ))
        })?;
    Ok((head[0], &buf[9..9 + len], &buf[9 + len..]))
}

/// Checks that every length prefix in an MCAP record's body (strings, byte arrays, maps)
/// fits in the bytes that follow it.
///
/// Regression (found by the `bag` fuzz target): the `mcap` crate (through binrw) reserves the
/// length a string prefix states before reading the string, so a corrupt prefix in a
/// Schema or Channel record made it ask for up to 4 GiB (3 GB in the fuzzer's input) from a
/// few kilobytes of file, in the summary section as well as among the messages. Fixed-size
/// fields are left to the crate, which reports a short record as an error. Layouts: the MCAP
/// specification, records section.
///
/// Second regression (same target): an Attachment record whose data ends less than 4 bytes
/// (its CRC) before the record's end made `mcap::parse_record` slice out of bounds and
/// panic; the CRC is now required (`Need(4)`).
pub(super) fn mcap_check_lengths(path: &Path, opcode: u8, body: &[u8]) -> Result<()> {
    /// Walks a body; `None` = ran out of bytes in a fixed field (the crate reports that).
    struct Walk<'a>(&'a [u8]);
    impl<'a> Walk<'a> {
        fn fixed(&mut self, n: usize) -> Option<&'a [u8]> {
            let (a, b) = (self.0.get(..n)?, self.0.get(n..)?);
            self.0 = b;
            Some(a)
        }
        /// A `u32` (or `u64`) length prefix and the bytes it counts: `Err` when it points
        /// past the end.
        fn prefixed(&mut self, wide: bool) -> Option<std::result::Result<&'a [u8], u64>> {
            let n = if wide {
                u64::from_le_bytes(self.fixed(8)?.try_into().ok()?)
            } else {
                u32::from_le_bytes(self.fixed(4)?.try_into().ok()?) as u64
            };
            match usize::try_from(n).ok().filter(|&n| n <= self.0.len()) {
                Some(n) => self.fixed(n).map(Ok),
                None => Some(Err(n)),
            }
        }
    }
    // A field list: a fixed width, a u32-prefixed string / array, a u64-prefixed byte array,
    // or a u32-prefixed map of string pairs.
    #[derive(Clone, Copy)]
    enum F {
        Fixed(usize),
        Str,
        Bytes64,
        StrMap,
        /// A fixed field the crate does not check before slicing: missing = corrupt.
        Need(usize),
    }
    use F::*;
    let fields: &[F] = match opcode {
        0x01 => &[Str, Str],                                      // Header
        0x03 => &[Fixed(2), Str, Str, Str],                       // Schema (data: u32 bytes)
        0x04 => &[Fixed(4), Str, Str, StrMap],                    // Channel
        0x06 => &[Fixed(28), Str, Bytes64],                       // Chunk
        0x07 => &[Fixed(2), Str],                                 // MessageIndex (u32 array)
        0x08 => &[Fixed(32), Str, Fixed(8), Str, Fixed(16)],      // ChunkIndex (offsets map)
        0x09 => &[Fixed(16), Str, Str, Bytes64, Need(4)],         // Attachment (+ crc)
        0x0A => &[Fixed(40), Str, Str],                           // AttachmentIndex
        0x0B => &[Fixed(8), Fixed(2), Fixed(16), Fixed(16), Str], // Statistics (counts map)
        0x0C => &[Str, StrMap],                                   // Metadata
        0x0D => &[Fixed(16), Str],                                // MetadataIndex
        _ => &[],
    };
    let bad = |n: u64| {
        bag_err(
            path,
            format!(
                "MCAP: a length field in a record (opcode {opcode:#04x}) says {n} bytes, more \
                 than the record holds (the file is corrupt)"
            ),
        )
    };
    let mut w = Walk(body);
    for f in fields {
        let ok = match f {
            Fixed(n) => w.fixed(*n).map(|_| Ok(())),
            Need(n) => Some(w.fixed(*n).map(|_| ()).ok_or(*n as u64)),
            Str => w.prefixed(false).map(|r| r.map(|_| ())),
            Bytes64 => w.prefixed(true).map(|r| r.map(|_| ())),
            StrMap => w.prefixed(false).map(|r| {
                let mut m = Walk(r?);
                while !m.0.is_empty() {
                    for _ in 0..2 {
                        match m.prefixed(false) {
                            Some(Ok(_)) => {}
                            Some(Err(n)) => return Err(n),
                            None => return Ok(()),
                        }
                    }
                }
                Ok(())
            }),
        };
        match ok {
            Some(Ok(())) => {}
            Some(Err(n)) => return Err(bad(n)),
            None => return Ok(()),
        }
    }
    Ok(())
}

/// Runs [`mcap_check_lengths`] over the summary section (from the footer's
/// `summary_start` to the footer), which `mcap::Summary::read` parses.
pub(super) fn mcap_check_summary(path: &Path, buf: &[u8]) -> Result<()> {
    // The file ends with the footer record (opcode 0x02, length 20) and the magic.
    let footer_at = match buf.len().checked_sub(MCAP_MAGIC.len() + 9 + 20) {
        Some(n) if buf[n] == 0x02 => n,
        // No footer: `Summary::read` reports that (or the scan does).
        _ => return Ok(()),
    };
    let body = &buf[footer_at + 9..footer_at + 29];
    let start = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    let offsets = u64::from_le_bytes(body[8..16].try_into().expect("8 bytes"));
    if start == 0 {
        return Ok(()); // no summary section
    }
    // Third regression (same target): a footer whose summary offsets point past the footer
    // made the crate's summary reader ask for ~4 GiB of buffer. Both offsets must lie
    // before the footer, in order.
    let within = |v: u64| v <= footer_at as u64;
    if !within(start) || (offsets != 0 && !(start <= offsets && within(offsets))) {
        return Err(bag_err(
            path,
            format!(
                "MCAP: the footer's summary offsets ({start}, {offsets}) point past the \
                 footer at {footer_at} (the file is corrupt)"
            ),
        ));
    }
    let start = start as usize;
    let mut rest = &buf[start..footer_at];
    while !rest.is_empty() {
        let (opcode, body, after) = mcap_split_record(path, rest)?;
        mcap_check_lengths(path, opcode, body)?;
        rest = after;
    }
    Ok(())
}

/// Calls `f` on every message of an MCAP file, in file order, with its channel: what
/// `mcap::MessageStream` does, with every length bounded (records by the bytes that hold
/// them, chunks by [`mcap_chunk_limit`]) and each chunk checked whole before it is used.
/// Stops early when `f` says [`Flow::Break`] (and returns that).
pub(super) fn mcap_messages(path: &Path, buf: &[u8], f: &mut McapMessageFn) -> Result<Flow> {
    use mcap::records::Record;
    use mcap::sans_io::{LinearReadEvent, LinearReader, LinearReaderOptions};
    let limit = mcap_chunk_limit(buf.len());
    let mut reader = LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_emit_chunks(true)
            .with_record_length_limit(buf.len()),
    );
    let mut rest = buf;
    let mut seen = McapChannels::default();
    while let Some(event) = reader.next_event() {
        let (opcode, data) = match event.map_err(|e| mcap_err(path, e))? {
            LinearReadEvent::ReadRequest(need) => {
                let n = need.min(rest.len());
                reader.insert(n).copy_from_slice(&rest[..n]);
                reader.notify_read(n);
                rest = &rest[n..];
                continue;
            }
            LinearReadEvent::Record { opcode, data } => (opcode, data),
        };
        mcap_check_lengths(path, opcode, data)?;
        match mcap::parse_record(opcode, data).map_err(|e| mcap_err(path, e))? {
            Record::Chunk { header, data } => {
                let content = mcap_chunk(path, &header, &data, limit)?;
                // Records inside a chunk are bounded by the chunk's bytes; each one's length
                // prefixes are checked before the `mcap` crate parses it.
                let mut rest: &[u8] = &content;
                while !rest.is_empty() {
                    let (opcode, body, after) = mcap_split_record(path, rest)?;
                    mcap_check_lengths(path, opcode, body)?;
                    let r = mcap::parse_record(opcode, body).map_err(|e| mcap_err(path, e))?;
                    if seen.record(path, r, f)?.is_break() {
                        return Ok(Flow::Break(()));
                    }
                    rest = after;
                }
            }
            other => {
                if seen.record(path, other, f)?.is_break() {
                    return Ok(Flow::Break(()));
                }
            }
        }
    }
    Ok(Flow::Continue(()))
}
