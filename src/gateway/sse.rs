//! Server-sent events (the `text/event-stream` of MCP's Streamable HTTP transport), read one
//! event at a time as bytes arrive and written again: an event relayed as received goes out as
//! its own bytes; an event whose message schemagate replaced goes out with the same `id` and
//! `event` fields and the new data. An event past the size limit is never buffered whole: it is
//! skipped as it arrives, only its first bytes kept (to find the `id` of the message it held).
//!
//! The reading rules are the HTML standard's: lines end with CRLF, LF or CR; a line starting
//! with `:` is a comment; `field: value` loses one space after the colon; `data` lines join
//! with `\n`; a blank line ends the event.

use bytes::{Bytes, BytesMut};

/// Bytes of an oversized event kept to find its message's `id`.
const HEAD_BYTES: usize = 4096;

/// One event read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event's bytes as received, its closing blank line included.
    pub raw: Bytes,
    /// The `id` field, if any (the last one given).
    pub id: Option<Bytes>,
    /// The `event` field, if any.
    pub name: Option<Bytes>,
    /// The `data` lines joined with `\n`; `None` when the event has no `data` field (a priming
    /// event, `retry` alone).
    pub data: Option<Bytes>,
}

/// What the stream holds next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Event(Event),
    /// An event past the limit, skipped: its `id` field (if it came before the cut), the first
    /// bytes of its data, and its size.
    Oversized {
        id: Option<Bytes>,
        head: Bytes,
        len: usize,
    },
}

/// Reads events of at most `max` bytes from chunks pushed as they arrive.
pub struct Reader {
    buf: BytesMut,
    max: usize,
    /// Where the first line of `buf` not yet known to be whole starts.
    scanned: usize,
    /// Skipping an oversized event.
    skipping: Option<Skipped>,
    /// Whether the stream's opening byte order mark, if any, has been dropped.
    started: bool,
    /// The stream has ended: a CR last in it is a whole line end.
    ended: bool,
}

/// An oversized event being skipped: its first bytes, its size so far, and where its current
/// line stands, so its end is found however the bytes are cut.
struct Skipped {
    head: Bytes,
    len: usize,
    line_len: usize,
    after_cr: bool,
    ended_cr: bool,
}

impl Skipped {
    /// Passes over `bytes` of the event; the number used if its end is among them.
    fn pass(&mut self, bytes: &[u8]) -> Option<usize> {
        if self.ended_cr {
            // The event ended on a CR last in what had come: an LF next belongs to it.
            let end = usize::from(*bytes.first()? == b'\n');
            self.len += end;
            return Some(end);
        }
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    if self.line_len == 0 {
                        // A CR ending the event takes the LF that may follow it along.
                        let end = match (b, bytes.get(i + 1)) {
                            (b'\r', Some(b'\n')) => i + 2,
                            (b'\r', None) => {
                                self.ended_cr = true;
                                self.len += bytes.len();
                                return None;
                            }
                            _ => i + 1,
                        };
                        self.len += end;
                        return Some(end);
                    }
                    self.line_len = 0;
                }
                _ => {
                    self.after_cr = false;
                    self.line_len += 1;
                }
            }
        }
        self.len += bytes.len();
        None
    }

    fn done(self) -> Next {
        let Fields { id, data, .. } = fields(&self.head);
        Next::Oversized {
            id,
            head: data.unwrap_or_default(),
            len: self.len,
        }
    }
}

impl Reader {
    pub fn new(max: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max,
            scanned: 0,
            skipping: None,
            started: false,
            ended: false,
        }
    }

    /// Adds bytes received.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole event, if one has arrived.
    pub fn next_event(&mut self) -> Option<Next> {
        if !self.started {
            // A byte order mark opening the stream is dropped (it may come cut in pieces).
            const BOM: &[u8] = "\u{feff}".as_bytes();
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return None;
            }
            if self.buf.starts_with(BOM) {
                let _ = self.buf.split_to(BOM.len());
            }
            self.started = true;
        }
        loop {
            if let Some(skipped) = &mut self.skipping {
                return match skipped.pass(&self.buf) {
                    Some(used) => {
                        let _ = self.buf.split_to(used);
                        self.skipping.take().map(Skipped::done)
                    }
                    None => {
                        self.buf.clear();
                        None
                    }
                };
            }
            match event_end(&self.buf, self.scanned, self.ended) {
                Ok(end) => {
                    self.scanned = 0;
                    let raw = self.buf.split_to(end).freeze();
                    if end > self.max {
                        let mut skipped = self.skip(&raw[..HEAD_BYTES.min(raw.len())]);
                        skipped.len = raw.len();
                        return Some(skipped.done());
                    }
                    if is_blank(&raw) {
                        // Blank lines between events dispatch nothing.
                        continue;
                    }
                    let Fields { id, name, data } = fields(&raw);
                    return Some(Next::Event(Event {
                        raw,
                        id,
                        name,
                        data,
                    }));
                }
                Err(_) if self.buf.len() > self.max => {
                    // Past the limit and still going: keep the head, skip the rest as it comes.
                    self.scanned = 0;
                    let head = self.buf.split_to(HEAD_BYTES.min(self.buf.len())).freeze();
                    let mut skipped = self.skip(&head);
                    // No end in what was read (else `event_end` had found it).
                    let _ = skipped.pass(&head);
                    self.skipping = Some(skipped);
                }
                Err(resume) => {
                    self.scanned = resume;
                    return None;
                }
            }
        }
    }

    fn skip(&self, head: &[u8]) -> Skipped {
        Skipped {
            head: Bytes::copy_from_slice(head),
            len: 0,
            line_len: 0,
            after_cr: false,
            ended_cr: false,
        }
    }

    /// At the end of the stream, called until it answers `None`: the events a last CR ended,
    /// then an oversized event being skipped, which the end cut off. Bytes of an event with no
    /// closing blank line are dropped, as the standard says.
    pub fn finish(&mut self) -> Option<Next> {
        self.ended = true;
        if let Some(skipped) = &mut self.skipping {
            if skipped.ended_cr {
                skipped.ended_cr = false;
            }
            return self.skipping.take().map(Skipped::done);
        }
        self.next_event()
    }

    /// Bytes received that do not yet make a whole event (an event cut off when the stream ends).
    pub fn pending(&self) -> usize {
        self.buf.len() + self.skipping.as_ref().map_or(0, |s| s.len)
    }
}

/// Where the event that starts `buf` ends (one past the blank line that closes it), reading
/// lines from `line_start`; else where the first line not yet whole starts.
fn event_end(buf: &[u8], mut line_start: usize, at_end: bool) -> Result<usize, usize> {
    loop {
        let Some(at) = buf
            .get(line_start..)
            .and_then(|rest| memchr::memchr2(b'\n', b'\r', rest))
        else {
            return Err(line_start);
        };
        let end = line_start + at;
        let next = match (buf[end], buf.get(end + 1)) {
            (b'\r', Some(b'\n')) => end + 2,
            // A CR last may be the first half of a CRLF still to come.
            (b'\r', None) if !at_end => return Err(line_start),
            _ => end + 1,
        };
        if end == line_start {
            return Ok(next);
        }
        line_start = next;
    }
}

fn is_blank(raw: &[u8]) -> bool {
    raw.iter().all(|b| matches!(b, b'\r' | b'\n'))
}

#[derive(Default)]
struct Fields {
    id: Option<Bytes>,
    name: Option<Bytes>,
    data: Option<Bytes>,
}

/// The fields of one event's bytes.
fn fields(raw: &Bytes) -> Fields {
    let mut out = Fields::default();
    let mut data: Option<Vec<u8>> = None;
    let mut single: Option<Bytes> = None;
    for line in lines(raw) {
        if line.is_empty() || line[0] == b':' {
            continue;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => match (&mut data, &single) {
                (None, None) => single = Some(raw.slice_ref(value)),
                (None, Some(first)) => {
                    let mut joined = first.to_vec();
                    joined.push(b'\n');
                    joined.extend_from_slice(value);
                    data = Some(joined);
                }
                (Some(joined), _) => {
                    joined.push(b'\n');
                    joined.extend_from_slice(value);
                }
            },
            // An id holding NUL is ignored, as the standard says.
            b"id" if !value.contains(&0) => out.id = Some(raw.slice_ref(value)),
            b"event" => out.name = Some(raw.slice_ref(value)),
            _ => {}
        }
    }
    out.data = data.map(Bytes::from).or(single);
    out
}

/// The lines of `raw`, without their line ends.
fn lines(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = raw;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = memchr::memchr2(b'\n', b'\r', rest).unwrap_or(rest.len());
        let line = &rest[..end];
        let skip = match (rest.get(end), rest.get(end + 1)) {
            (Some(b'\r'), Some(b'\n')) => 2,
            (Some(_), _) => 1,
            (None, _) => 0,
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

/// Writes an event with `id` and `name` (as another event had them) and `data`, one `data:`
/// line per line of it.
pub fn write(id: Option<&[u8]>, name: Option<&[u8]>, data: &[u8], out: &mut Vec<u8>) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name);
        out.push(b'\n');
    }
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id);
        out.push(b'\n');
    }
    for line in lines(data) {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    if data.is_empty() {
        out.extend_from_slice(b"data: \n");
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(chunks: &[&[u8]], max: usize) -> Vec<Next> {
        let mut reader = Reader::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            reader.push(chunk);
            while let Some(next) = reader.next_event() {
                out.push(next);
            }
        }
        while let Some(next) = reader.finish() {
            out.push(next);
        }
        out
    }

    fn event(next: &Next) -> &Event {
        match next {
            Next::Event(e) => e,
            other => panic!("an event, not {other:?}"),
        }
    }

    #[test]
    fn events_are_read_whatever_the_line_ends_and_however_the_bytes_are_cut() {
        let stream = b"\xef\xbb\xbf: a comment\nid: 7\nevent: message\ndata: {\"a\":\ndata:1}\n\nid: 8\r\ndata: x\r\n\r\nretry: 100\r\rdata:  two spaces\n\n";
        let whole = read_all(&[stream], 1 << 20);
        for cut in 0..stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(read_all(&[a, b], 1 << 20), whole, "cut at {cut}");
        }
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(read_all(&bytewise, 1 << 20), whole);
        assert_eq!(whole.len(), 4, "{whole:?}");
        let first = event(&whole[0]);
        assert_eq!(first.id.as_deref(), Some(&b"7"[..]));
        assert_eq!(first.name.as_deref(), Some(&b"message"[..]));
        assert_eq!(first.data.as_deref(), Some(&b"{\"a\":\n1}"[..]));
        assert!(
            first.raw.starts_with(b": a comment"),
            "the byte order mark is dropped"
        );
        assert_eq!(event(&whole[1]).data.as_deref(), Some(&b"x"[..]));
        assert_eq!(
            event(&whole[1]).raw,
            Bytes::from_static(b"id: 8\r\ndata: x\r\n\r\n")
        );
        assert_eq!(event(&whole[2]).data, None, "retry alone carries no data");
        assert_eq!(event(&whole[3]).data.as_deref(), Some(&b" two spaces"[..]));
    }

    #[test]
    fn an_event_past_the_limit_is_skipped_with_its_head_kept_and_the_stream_goes_on() {
        for (eol, chunk) in ["\n", "\r\n", "\r"]
            .into_iter()
            .flat_map(|eol| [1usize, 7, 100, 4096, 1 << 20].map(|c| (eol, c)))
        {
            let big = format!(
                "id: 41{eol}data: {{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":\"{}\"}}{eol}{eol}",
                "x".repeat(10_000)
            );
            let stream = format!("{big}id: 42{eol}data: {{\"small\":true}}{eol}{eol}");
            let chunks: Vec<&[u8]> = stream.as_bytes().chunks(chunk).collect();
            let read = read_all(&chunks, 1024);
            assert_eq!(read.len(), 2, "chunks of {chunk}");
            match &read[0] {
                Next::Oversized { id, head, len } => {
                    assert_eq!(id.as_deref(), Some(&b"41"[..]));
                    assert!(head.starts_with(br#"{"jsonrpc":"2.0","id":5"#));
                    assert_eq!(*len, big.len(), "chunks of {chunk}");
                }
                other => panic!("oversized, not {other:?}"),
            }
            assert_eq!(
                event(&read[1]).data.as_deref(),
                Some(&br#"{"small":true}"#[..])
            );
        }
    }

    #[test]
    fn a_written_event_reads_back_as_written() {
        let mut out = Vec::new();
        write(Some(b"9"), Some(b"message"), b"{\"a\":1}", &mut out);
        write(None, None, b"line one\nline two", &mut out);
        let read = read_all(&[&out], 1 << 20);
        assert_eq!(event(&read[0]).id.as_deref(), Some(&b"9"[..]));
        assert_eq!(event(&read[0]).data.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(
            event(&read[1]).data.as_deref(),
            Some(&b"line one\nline two"[..])
        );
    }
}
