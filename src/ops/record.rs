//! Sessions written to files as they happen, one JSON line per message: the recorder behind
//! `--record DIR`. It knows lines and files, nothing of what the lines say.
//!
//! Writing never holds the relay up: a [`Tape`] hands each line to a bounded queue and one
//! writer thread writes them; a line the queue cannot take is dropped and counted (and logged at
//! most once a second), never waited for. Files are bounded in size one by one (past
//! `max_file_bytes`, the rest of that session is not written) and together (past
//! `max_total_bytes`, the oldest closed recordings in the directory are removed first). Files are
//! created with mode 0600, the directory (when it has to be made) with 0700: a recording holds
//! what tools were called with and what they answered. Sessions are sampled at `sample`.

use crate::ops::stamp;
use crate::ops::tally::Tally;
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Lines waiting for the writer thread at most; past it, lines are dropped.
const QUEUE: usize = 16 * 1024;
/// A recording's file name ends so.
const SUFFIX: &str = ".jsonl";
/// The writer's pause between drains while lines keep coming.
const PAUSE: Duration = Duration::from_millis(2);

/// Where and how much to record.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    pub dir: PathBuf,
    /// Most bytes one session's file holds.
    pub max_file_bytes: u64,
    /// Most bytes the directory's recordings hold together.
    pub max_total_bytes: u64,
    /// The share of sessions recorded, from 0 to 1.
    pub sample: f64,
}

/// What became of a line handed to a tape (the `outcome` of the lines series).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written,
    /// The queue to the writer was full.
    QueueFull,
    /// The session's file reached `max_file_bytes`.
    FileFull,
    /// The directory reached `max_total_bytes` with no closed recording left to remove.
    DirFull,
    /// The file could not be created or written.
    WriteError,
}

impl Outcome {
    /// Every outcome, in declaration order (`outcome as usize` is its place).
    pub const ALL: [Outcome; 5] = [
        Outcome::Written,
        Outcome::QueueFull,
        Outcome::FileFull,
        Outcome::DirFull,
        Outcome::WriteError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Written => "written",
            Outcome::QueueFull => "queue_full",
            Outcome::FileFull => "file_full",
            Outcome::DirFull => "dir_full",
            Outcome::WriteError => "write_error",
        }
    }
}

/// Told of every line's outcome (the metrics count them).
pub type OnOutcome = Arc<dyn Fn(Outcome) + Send + Sync>;

enum Job {
    Open {
        file: u64,
        path: PathBuf,
        max_bytes: u64,
    },
    Line {
        file: u64,
        line: bytes::Bytes,
    },
    Close {
        file: u64,
    },
    /// Answered once every job before it is written (for tests and a clean stop).
    Flush(SyncSender<()>),
}

/// The process's recorder: sessions get their [`Tape`] from it.
pub struct Recorder {
    config: RecordConfig,
    queue: SyncSender<Job>,
    next_file: AtomicU64,
    on_outcome: OnOutcome,
    dropped: Mutex<Tally>,
    /// Sessions ended whose close the full queue could not take: closed by the writer once it
    /// has drained the queue (so after their last lines), never left open.
    closing: Arc<Mutex<Vec<u64>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Starts recording into `config.dir` (made if missing), its writer thread running.
    pub fn start(config: RecordConfig, on_outcome: OnOutcome) -> io::Result<Arc<Self>> {
        // Made if missing (a directory already there is taken as it is).
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&config.dir)?;
        let (queue, jobs) = std::sync::mpsc::sync_channel(QUEUE);
        let closing = Arc::new(Mutex::new(Vec::new()));
        let files = Files::new(&config, Arc::clone(&on_outcome), Arc::clone(&closing))?;
        std::thread::Builder::new()
            .name("record".to_owned())
            .spawn(move || files.run(jobs))?;
        Ok(Arc::new(Self {
            config,
            queue,
            next_file: AtomicU64::new(1),
            on_outcome,
            dropped: Mutex::new(Tally::default()),
            closing,
        }))
    }

    /// A tape for a new session of `server` (`session` names it in the file name), if the
    /// session is sampled (at `sample`, else the config's); its file holds at most `max_bytes`
    /// (else the config's `max_file_bytes`).
    pub fn tape(
        self: &Arc<Self>,
        server: &str,
        session: &str,
        sample: Option<f64>,
        max_bytes: Option<u64>,
    ) -> Option<Tape> {
        if !sampled(sample.unwrap_or(self.config.sample)) {
            return None;
        }
        let max_bytes = max_bytes.unwrap_or(self.config.max_file_bytes);
        let file = self.next_file.fetch_add(1, Ordering::Relaxed);
        let path = self
            .config
            .dir
            .join(file_name(server, session, SystemTime::now()));
        self.send(Job::Open {
            file,
            path,
            max_bytes,
        });
        Some(Tape {
            recorder: Arc::clone(self),
            file,
        })
    }

    /// Waits until every line handed over so far is written.
    pub fn flush(&self) {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if self.queue.send(Job::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(10));
        }
    }

    fn send(&self, job: Job) {
        // An open that does not fit goes as its lines do: the queue is full.
        if self.queue.try_send(job).is_err() {
            (self.on_outcome)(Outcome::QueueFull);
            let due = self
                .dropped
                .lock()
                .map(|mut tally| tally.count())
                .unwrap_or(None);
            if let Some(count) = due {
                tracing::warn!(
                    dir = %self.config.dir.display(),
                    dropped = count,
                    "recording: the writer is behind; lines were not recorded (the relay was not slowed)"
                );
            }
        }
    }
}

/// One session's recording: each line handed to it is written, in order, to the session's file.
/// The file is closed when the tape is dropped.
pub struct Tape {
    recorder: Arc<Recorder>,
    file: u64,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape").field("file", &self.file).finish()
    }
}

impl Tape {
    /// Hands one line (without its newline) to the writer.
    pub fn write(&self, line: bytes::Bytes) {
        self.recorder.send(Job::Line {
            file: self.file,
            line,
        });
    }
}

impl Drop for Tape {
    fn drop(&mut self) {
        let close = Job::Close { file: self.file };
        if self.recorder.queue.try_send(close).is_err() {
            if let Ok(mut closing) = self.recorder.closing.lock() {
                closing.push(self.file);
            }
        }
    }
}

/// Whether a session is recorded, at `rate`.
fn sampled(rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    if rate <= 0.0 {
        return false;
    }
    let draw = getrandom::u64().unwrap_or(0);
    (draw as f64 / u64::MAX as f64) < rate
}

/// `SERVER-YYYYMMDDTHHMMSS.mmmZ-SESSION.jsonl`, each name kept to letters, digits, `.`, `_` and
/// `-` (others become `_`): names sort by server, then by start.
pub fn file_name(server: &str, session: &str, at: SystemTime) -> String {
    let clean = |name: &str| -> String {
        name.chars()
            .take(64)
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
                _ => '_',
            })
            .collect()
    };
    let nanos = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let stamp = stamp::utc(nanos, stamp::Style::Basic);
    format!("{}-{stamp}-{}{SUFFIX}", clean(server), clean(session))
}

/// The server a recording's file name names (see [`file_name`]).
pub fn server_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?.strip_suffix(SUFFIX)?;
    // SERVER-STAMP-SESSION: the stamp is the first part that looks like one.
    let parts: Vec<&str> = name.split('-').collect();
    let at = parts
        .iter()
        .position(|p| p.len() == 20 && p.as_bytes().get(8) == Some(&b'T') && p.ends_with('Z'))?;
    (at > 0).then(|| parts[..at].join("-"))
}

/// The writer thread's files.
struct Files {
    config: RecordConfig,
    open: HashMap<u64, Open>,
    /// Closed recordings in the directory, oldest first, with their sizes.
    closed: VecDeque<(PathBuf, u64)>,
    /// Bytes of every recording in the directory, open or closed.
    total: u64,
    on_outcome: OnOutcome,
    errors: Tally,
    /// Closes the queue could not take (see [`Recorder`]).
    closing: Arc<Mutex<Vec<u64>>>,
}

struct Open {
    path: PathBuf,
    writer: Option<Gathered>,
    bytes: u64,
    max_bytes: u64,
    full: bool,
}

impl Files {
    /// The directory's recordings as they are (from earlier runs too), oldest first.
    fn new(
        config: &RecordConfig,
        on_outcome: OnOutcome,
        closing: Arc<Mutex<Vec<u64>>>,
    ) -> io::Result<Self> {
        let mut found: Vec<(SystemTime, PathBuf, u64)> = Vec::new();
        for entry in std::fs::read_dir(&config.dir)? {
            let entry = entry?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some(&SUFFIX[1..]) {
                continue;
            }
            let meta = entry.metadata()?;
            if meta.is_file() {
                let at = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((at, path, meta.len()));
            }
        }
        found.sort();
        let total = found.iter().map(|(_, _, len)| len).sum();
        Ok(Self {
            config: config.clone(),
            open: HashMap::new(),
            closed: found
                .into_iter()
                .map(|(_, path, len)| (path, len))
                .collect(),
            total,
            on_outcome,
            errors: Tally::default(),
            closing,
        })
    }

    fn run(mut self, jobs: Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            self.job(job);
            // Whatever else is waiting; while lines keep coming, a pause between drains (the
            // relays hand lines over without waking this thread each time), then one flush for
            // all of it.
            loop {
                let mut drained = 0;
                while let Ok(job) = jobs.try_recv() {
                    self.job(job);
                    drained += 1;
                }
                if drained == 0 {
                    break;
                }
                std::thread::sleep(PAUSE);
            }
            // The queue is empty: the sessions whose close it could not take have had all
            // their lines.
            let closing =
                std::mem::take(&mut *self.closing.lock().unwrap_or_else(|e| e.into_inner()));
            for file in closing {
                self.close(file);
            }
            self.flush_all();
        }
    }

    /// Writes out what every open file has gathered; a file that cannot be written is written
    /// no more (and said once a second).
    fn flush_all(&mut self) {
        for open in self.open.values_mut() {
            if let Some(writer) = &mut open.writer {
                if let Err(e) = writer.flush() {
                    open.writer = None;
                    report(&mut self.errors, &open.path, &e);
                }
            }
        }
    }

    fn close(&mut self, file: u64) {
        if let Some(mut open) = self.open.remove(&file) {
            if let Some(writer) = &mut open.writer {
                let _ = writer.flush();
            }
            self.closed.push_back((open.path, open.bytes));
        }
    }

    fn job(&mut self, job: Job) {
        match job {
            Job::Open {
                file,
                path,
                max_bytes,
            } => {
                let writer = OpenOptions::new()
                    .create_new(true)
                    .write(true)
                    .mode(0o600)
                    .open(&path)
                    .map(Gathered::new);
                let writer = match writer {
                    Ok(writer) => Some(writer),
                    Err(e) => {
                        report(&mut self.errors, &path, &e);
                        None
                    }
                };
                self.open.insert(
                    file,
                    Open {
                        path,
                        writer,
                        bytes: 0,
                        max_bytes,
                        full: false,
                    },
                );
            }
            Job::Line { file, line } => {
                let outcome = self.line(file, line);
                (self.on_outcome)(outcome);
            }
            Job::Close { file } => self.close(file),
            Job::Flush(done) => {
                self.flush_all();
                let _ = done.send(());
            }
        }
    }

    fn line(&mut self, file: u64, line: bytes::Bytes) -> Outcome {
        let len = line.len() as u64 + 1;
        let Some(open) = self.open.get(&file) else {
            return Outcome::WriteError;
        };
        if open.writer.is_none() {
            return Outcome::WriteError;
        }
        if open.full || open.bytes + len > open.max_bytes {
            if let Some(open) = self.open.get_mut(&file) {
                open.full = true;
            }
            return Outcome::FileFull;
        }
        // Room in the directory: the oldest closed recordings go first.
        while self.total + len > self.config.max_total_bytes {
            let Some((path, bytes)) = self.closed.pop_front() else {
                return Outcome::DirFull;
            };
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => report(&mut self.errors, &path, &e),
            }
            self.total = self.total.saturating_sub(bytes);
            tracing::info!(file = %path.display(), "recording: removed the oldest recording to stay within --record-max-total-bytes");
        }
        let Some(open) = self.open.get_mut(&file) else {
            return Outcome::WriteError;
        };
        let Some(writer) = &mut open.writer else {
            return Outcome::WriteError;
        };
        match writer.push(line) {
            Ok(()) => {
                open.bytes += len;
                self.total += len;
                Outcome::Written
            }
            Err(e) => {
                let path = open.path.clone();
                open.writer = None;
                report(&mut self.errors, &path, &e);
                Outcome::WriteError
            }
        }
    }
}

/// Lines gathered before they are written out together past this many bytes (or at the end of
/// a drain).
const GATHER_BYTES: usize = 256 * 1024;
/// Lines one `writev` takes at most (two slices each, within the usual `IOV_MAX` of 1024).
const LINES_PER_WRITE: usize = 500;

/// A recording's file and its lines not yet written: written out together, each line's own
/// bytes and a newline, one vectored write for many lines (no copy into a buffer).
struct Gathered {
    file: File,
    lines: Vec<bytes::Bytes>,
    bytes: usize,
}

impl Gathered {
    fn new(file: File) -> Self {
        Self {
            file,
            lines: Vec::new(),
            bytes: 0,
        }
    }

    /// Takes one line (without its newline); writes out what is gathered past `GATHER_BYTES`.
    fn push(&mut self, line: bytes::Bytes) -> io::Result<()> {
        self.bytes += line.len() + 1;
        self.lines.push(line);
        match self.bytes >= GATHER_BYTES {
            true => self.flush(),
            false => Ok(()),
        }
    }

    /// Writes out every line gathered.
    fn flush(&mut self) -> io::Result<()> {
        let mut slices = Vec::with_capacity(2 * LINES_PER_WRITE.min(self.lines.len()));
        for chunk in self.lines.chunks(LINES_PER_WRITE) {
            slices.clear();
            for line in chunk {
                slices.push(IoSlice::new(line));
                slices.push(IoSlice::new(b"\n"));
            }
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                let written = self.file.write_vectored(rest)?;
                if written == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                IoSlice::advance_slices(&mut rest, written);
            }
        }
        self.lines.clear();
        self.bytes = 0;
        Ok(())
    }
}

fn report(errors: &mut Tally, path: &Path, error: &io::Error) {
    if let Some(count) = errors.count() {
        tracing::error!(file = %path.display(), %error, errors = count, "recording: cannot write; the session goes on unrecorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn config(dir: &Path, file: u64, total: u64) -> RecordConfig {
        RecordConfig {
            dir: dir.to_owned(),
            max_file_bytes: file,
            max_total_bytes: total,
            sample: 1.0,
        }
    }

    fn counting() -> (OnOutcome, Arc<Mutex<Vec<Outcome>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        (Arc::new(move |o| into.lock().expect("lock").push(o)), seen)
    }

    #[test]
    fn a_session_is_one_private_file_of_its_lines_in_order() {
        let dir = tempfile::tempdir().expect("dir");
        let (count, seen) = counting();
        let recorder = Recorder::start(config(dir.path(), 1 << 20, 1 << 20), count).expect("start");
        let tape = recorder
            .tape("crm/prod", "s1", None, None)
            .expect("sampled");
        tape.write(bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        ));
        tape.write(bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        ));
        drop(tape);
        recorder.flush();
        let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .expect("read")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(files.len(), 1);
        let name = files[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert!(
            name.starts_with("crm_prod-") && name.ends_with("-s1.jsonl"),
            "{name}"
        );
        assert_eq!(server_of(&files[0]).as_deref(), Some("crm_prod"));
        assert_eq!(
            std::fs::read_to_string(&files[0]).expect("read"),
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
        );
        let mode = std::fs::metadata(&files[0])
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(*seen.lock().expect("lock"), vec![Outcome::Written; 2]);
    }

    #[test]
    fn files_and_the_directory_stay_within_their_bounds() {
        let dir = tempfile::tempdir().expect("dir");
        let (count, seen) = counting();
        // Lines of 10 bytes with their newline: 3 fit a file, 5 the directory.
        let recorder = Recorder::start(config(dir.path(), 30, 50), count).expect("start");
        let first = recorder.tape("a", "1", None, None).expect("sampled");
        for _ in 0..4 {
            first.write(bytes::Bytes::from_static(b"123456789"));
        }
        drop(first);
        recorder.flush();
        let second = recorder.tape("a", "2", None, None).expect("sampled");
        for _ in 0..3 {
            second.write(bytes::Bytes::from_static(b"abcdefghi"));
        }
        recorder.flush();
        let outcomes = seen.lock().expect("lock").clone();
        assert_eq!(
            outcomes,
            [
                vec![Outcome::Written; 3],
                vec![Outcome::FileFull],
                vec![Outcome::Written; 3]
            ]
            .concat()
        );
        // The first file went, oldest first, to make room for the second's third line.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].ends_with("-2.jsonl"), "{names:?}");
        // With no closed recording left to remove, the directory's bound holds.
        let third = recorder.tape("a", "3", None, None).expect("sampled");
        for _ in 0..3 {
            third.write(bytes::Bytes::from_static(b"ABCDEFGHI"));
        }
        recorder.flush();
        let last = seen.lock().expect("lock").clone();
        assert_eq!(
            &last[7..],
            &[Outcome::Written, Outcome::Written, Outcome::DirFull]
        );
    }

    #[test]
    fn no_session_is_recorded_at_a_rate_of_zero_unless_its_own_settings_say() {
        let dir = tempfile::tempdir().expect("dir");
        let (count, seen) = counting();
        let mut config = config(dir.path(), 100, 100);
        config.sample = 0.0;
        let recorder = Recorder::start(config, count).expect("start");
        assert!(recorder.tape("a", "1", None, None).is_none());
        // A session's own rate and bound (a gateway route's) over the recorder's.
        let own = recorder
            .tape("a", "2", Some(1.0), Some(20))
            .expect("sampled");
        for _ in 0..3 {
            own.write(bytes::Bytes::from_static(b"123456789"));
        }
        recorder.flush();
        assert_eq!(
            *seen.lock().expect("lock"),
            [Outcome::Written, Outcome::Written, Outcome::FileFull]
        );
    }
}
