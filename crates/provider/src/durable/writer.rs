//! [`DataLog`]: appends records to the log file with group commit. Requests serialise
//! their records into a shared buffer (taking a log sequence number, [`Lsn`]); one writer
//! thread takes the whole buffer, writes it with one `write`, syncs it as `--fsync`
//! says, and announces the last `Lsn` it made durable. A request waits for its own
//! `Lsn` before its answer leaves.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::sync::watch;

use super::compact::Meta;
use super::file::encode_frame;
use super::record::Record;
use crate::state::trace::Touched;

/// A record's position in the log: the n-th record appended since start.
pub type Lsn = u64;

/// When the log is synced to the disk (`--fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// `fdatasync` before any answer leaves (one per group of concurrent requests): an
    /// answered change survives a machine crash or power loss.
    Always,
    /// Written to the OS before the answer leaves, synced every 100 ms: an answered
    /// change survives a crash of fauxpay (`kill -9`); a machine crash may lose the last
    /// 100 ms.
    #[default]
    Batch,
    /// Written to the OS before the answer leaves, synced when the OS decides: survives a
    /// crash of fauxpay, not of the machine.
    Never,
}

impl std::str::FromStr for Fsync {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(Fsync::Always),
            "batch" => Ok(Fsync::Batch),
            "never" => Ok(Fsync::Never),
            _ => Err(format!("'{s}' is not one of always, batch, never")),
        }
    }
}

/// How long the writer lets records gather before a write when it has no sync to wait
/// on (`batch`, `never`); `always` gathers them during each sync.
const LINGER: Duration = Duration::from_micros(200);

/// How often `--fsync batch` syncs.
const BATCH_SYNC: Duration = Duration::from_millis(100);

/// The log cannot be written now (the disk is full, the file went away): what was
/// appended since is held in memory and written when the writer next succeeds.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the data dir's log could not be written")]
pub struct WriteFailed;

/// How often the writer tries again while the log cannot be written.
const RETRY: Duration = Duration::from_millis(500);

struct Pending {
    buf: Vec<u8>,
    /// The last Lsn handed out.
    last: Lsn,
    closing: bool,
    /// Where the log file ends once everything appended is written.
    end: u64,
    /// With compaction on: what compaction needs to know of each record in the file, in
    /// order (those of the part being compacted are taken out while it runs).
    metas: Option<Vec<Meta>>,
    /// A compacted log for the writer to put in the file's place.
    swap: Option<Swap>,
}

/// A compacted log ready to take the log file's place (see [`DataLog::swap`]).
pub struct Swap {
    /// The compacted file, open for appending, and its path (beside the log).
    pub file: File,
    pub temp: std::path::PathBuf,
    /// The log file's path.
    pub path: std::path::PathBuf,
    /// The end of the compacted part in the old file, and of its rewrite in the new one.
    pub old_prefix_end: u64,
    pub new_prefix_end: u64,
    /// How far the old file is already copied into the new one (its tail after
    /// `old_prefix_end`); the writer copies the rest.
    pub copied_to: u64,
    /// The records of the new file's compacted part.
    pub metas: Vec<Meta>,
    /// Told whether the new file took the log's place (else the metas are given back).
    pub done: std::sync::mpsc::Sender<Result<u64, (Vec<Meta>, String)>>,
}

/// The log being appended to; see the module docs.
pub struct DataLog {
    pending: Mutex<Pending>,
    wake: Condvar,
    durable: watch::Sender<Lsn>,
    /// Set while the log cannot be written (cleared when a write succeeds again).
    failed: AtomicBool,
    /// Why, while `failed` is set.
    failure: Mutex<Option<String>>,
    /// Writes (or syncs) that failed since the start.
    failures: std::sync::atomic::AtomicU64,
    /// Held by a write request from its operation until its record is appended, so
    /// records are in the order their changes were made.
    commit: Mutex<()>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The data dir's lock, held while the log lives.
    dir_lock: Mutex<Option<File>>,
    /// Where the writer has written the file to (every byte before it is in the file).
    written: Mutex<u64>,
    written_cv: Condvar,
    /// Set by [`DataLog::close`].
    closed: AtomicBool,
    /// Whether records are kept for compaction.
    compacts: bool,
}

impl DataLog {
    /// Starts the writer on `file` (positioned at its end). `metas`, with compaction on,
    /// are those of the records already in the file.
    pub fn start(mut file: File, fsync: Fsync, metas: Option<Vec<Meta>>) -> std::io::Result<Arc<Self>> {
        use std::io::Seek;
        let end = file.stream_position()?;
        let compacts = metas.is_some();
        let log = Arc::new(Self {
            pending: Mutex::new(Pending {
                buf: Vec::with_capacity(1 << 16),
                last: 0,
                closing: false,
                end,
                metas,
                swap: None,
            }),
            wake: Condvar::new(),
            durable: watch::channel(0).0,
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            failures: std::sync::atomic::AtomicU64::new(0),
            commit: Mutex::new(()),
            writer: Mutex::new(None),
            dir_lock: Mutex::new(None),
            written: Mutex::new(end),
            written_cv: Condvar::new(),
            closed: AtomicBool::new(false),
            compacts,
        });
        let me = log.clone();
        let handle = std::thread::Builder::new()
            .name("fauxpay-data-log".into())
            .spawn(move || me.write_loop(file, fsync))?;
        *log.writer.lock() = Some(handle);
        Ok(log)
    }

    /// Keeps the data dir's lock (from [`super::file::open`]) for as long as this log lives.
    pub fn hold_lock(&self, lock: Option<File>) {
        *self.dir_lock.lock() = lock;
    }

    /// Serialises the operations of write requests (see [`DataLog::append`]).
    pub fn commit_lock(&self) -> MutexGuard<'_, ()> {
        self.commit.lock()
    }

    /// Appends `record`; returns its Lsn (wait for it with [`DataLog::durable`]).
    pub fn append(&self, record: &Record) -> Lsn {
        self.append_touching(record, Touched::default(), 0)
    }

    /// Appends a write's `record` with the keys its operation touched and the ledger's
    /// last sequence number before it ran (kept for compaction when it is on).
    pub fn append_touching(&self, record: &Record, touched: Touched, ledger_seq: u64) -> Lsn {
        let payload = record.to_bytes();
        let mut p = self.pending.lock();
        let offset = p.end;
        let len = 8 + payload.len() as u64;
        p.end += len;
        if let Some(metas) = p.metas.as_mut() {
            metas.push(Meta::of(record, offset, len, touched, ledger_seq));
        }
        encode_frame(&payload, &mut p.buf);
        p.last += 1;
        let lsn = p.last;
        drop(p);
        self.wake.notify_one();
        lsn
    }

    /// The last Lsn handed out.
    pub fn appended(&self) -> Lsn {
        self.pending.lock().last
    }

    /// Whether records are kept for compaction (`--retain` with a data dir).
    pub fn compacts(&self) -> bool {
        self.compacts
    }

    /// Where the file ends once everything appended so far is written.
    pub fn end(&self) -> u64 {
        self.pending.lock().end
    }

    /// Takes the records appended so far out for compaction: where they end, and what
    /// is known of them (`None` with compaction off). Call it under the commit lock, so
    /// that no write is half made.
    pub fn take_metas(&self) -> Option<(u64, Vec<Meta>)> {
        let mut p = self.pending.lock();
        let end = p.end;
        p.metas.as_mut().map(|m| (end, std::mem::take(m)))
    }

    /// Runs `f` on the records appended since [`DataLog::take_metas`].
    pub fn with_metas<R>(&self, f: impl FnOnce(&[Meta]) -> R) -> R {
        f(self.pending.lock().metas.as_deref().unwrap_or_default())
    }

    /// Puts records taken by [`DataLog::take_metas`] back in front (compaction gave up).
    pub fn untake_metas(&self, mut taken: Vec<Meta>) {
        if let Some(metas) = self.pending.lock().metas.as_mut() {
            taken.append(metas);
            *metas = taken;
        }
    }

    /// Blocks until the file holds every byte before `offset` (or the log fails or
    /// closes first: false).
    pub fn wait_written(&self, offset: u64) -> bool {
        let mut written = self.written.lock();
        while *written < offset {
            if self.failed.load(Ordering::Acquire) || self.closed.load(Ordering::Acquire) {
                return false;
            }
            self.written_cv.wait_for(&mut written, Duration::from_millis(100));
        }
        true
    }

    /// Where the file is written to now.
    pub fn written(&self) -> u64 {
        *self.written.lock()
    }

    /// Hands a compacted log to the writer, which copies the rest of the old file's tail
    /// into it and puts it in the file's place before its next write.
    pub fn swap(&self, swap: Swap) {
        let mut p = self.pending.lock();
        if p.closing {
            // The writer may be gone: nobody would answer.
            let _ = std::fs::remove_file(&swap.temp);
            let _ = swap.done.send(Err((swap.metas, "the log is closing".into())));
            return;
        }
        p.swap = Some(swap);
        drop(p);
        self.wake.notify_one();
    }

    /// Resolves once every record up to `lsn` is durable (as `--fsync` says), or at once
    /// with [`WriteFailed`] while the log cannot be written.
    pub async fn durable(&self, lsn: Lsn) -> Result<(), WriteFailed> {
        if *self.durable.borrow() < lsn && !self.failed.load(Ordering::Acquire) {
            let mut rx = self.durable.subscribe();
            let _ = rx.wait_for(|d| *d >= lsn || self.failed.load(Ordering::Acquire)).await;
        }
        match *self.durable.borrow() >= lsn {
            true => Ok(()),
            false => Err(WriteFailed),
        }
    }

    /// Why the log cannot be written, while it cannot.
    pub fn degraded(&self) -> Option<String> {
        self.failed
            .load(Ordering::Acquire)
            .then(|| self.failure.lock().clone())
            .flatten()
    }

    /// Writes and syncs of the log that failed since the start.
    pub fn write_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Writes what is pending, syncs, and stops the writer (at shutdown).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending.lock().closing = true;
        self.wake.notify_one();
        if let Some(handle) = self.writer.lock().take() {
            let _ = handle.join();
        }
    }

    fn write_loop(&self, mut file: File, fsync: Fsync) {
        use std::io::Seek;
        // Where the last whole write ended: a failed write is cut back to it, and its
        // bytes (with what was appended since) are written again once the disk allows.
        let mut good = file.stream_position().unwrap_or(0);
        let mut spare = Vec::with_capacity(1 << 16);
        let mut last_sync = Instant::now();
        let mut unsynced = false;
        loop {
            let mut p = self.pending.lock();
            let failing = self.failed.load(Ordering::Acquire);
            if let Some(swap) = p.swap.take() {
                let Swap {
                    file: new,
                    temp,
                    path,
                    old_prefix_end,
                    new_prefix_end,
                    copied_to,
                    metas: compacted,
                    done,
                } = swap;
                let result = match failing || p.closing {
                    true => Err("the log is failing or closing".to_string()),
                    false => Self::take_place(&mut file, good, new, copied_to, &temp, &path).map_err(|e| e.to_string()),
                };
                match result {
                    Ok(new_len) => {
                        good = new_len;
                        let shift = |offset: u64| offset - old_prefix_end + new_prefix_end;
                        p.end = shift(p.end);
                        if let Some(metas) = p.metas.as_mut() {
                            for m in metas.iter_mut() {
                                m.offset = shift(m.offset);
                            }
                            let mut all = compacted;
                            all.append(metas);
                            *metas = all;
                        }
                        *self.written.lock() = good;
                        let _ = done.send(Ok(good));
                    }
                    Err(e) => {
                        let _ = std::fs::remove_file(&temp);
                        let _ = done.send(Err((compacted, e)));
                    }
                }
            }
            while p.buf.is_empty() && spare.is_empty() && !p.closing && p.swap.is_none() {
                // With unsynced writes, wake in time for the batch sync.
                if unsynced && fsync == Fsync::Batch {
                    let left = BATCH_SYNC.saturating_sub(last_sync.elapsed());
                    if self.wake.wait_for(&mut p, left).timed_out() {
                        break;
                    }
                } else {
                    self.wake.wait(&mut p);
                }
            }
            if failing && !p.closing {
                // Not in a busy loop while the disk is full: try again a little later
                // (or as soon as something new is appended).
                self.wake.wait_for(&mut p, RETRY);
            } else if fsync != Fsync::Always && !p.buf.is_empty() && !p.closing {
                // Group commit without a sync to wait on: let the requests running now
                // append too, so one write carries many records (waking for each record
                // cost more than the write itself).
                drop(p);
                std::thread::sleep(LINGER);
                p = self.pending.lock();
            }
            let closing = p.closing && p.buf.is_empty();
            if spare.is_empty() {
                std::mem::swap(&mut p.buf, &mut spare);
            } else {
                spare.extend_from_slice(&p.buf);
                p.buf.clear();
            }
            let upto = p.last;
            drop(p);
            let result = (|| -> std::io::Result<()> {
                if !spare.is_empty() {
                    file.write_all(&spare)?;
                    unsynced = true;
                }
                let due = match fsync {
                    Fsync::Always => true,
                    Fsync::Batch => closing || failing || last_sync.elapsed() >= BATCH_SYNC,
                    Fsync::Never => closing,
                };
                if unsynced && due {
                    file.sync_data()?;
                    unsynced = false;
                    last_sync = Instant::now();
                }
                Ok(())
            })();
            match result {
                Ok(()) => {
                    good += spare.len() as u64;
                    spare.clear();
                    *self.written.lock() = good;
                    self.written_cv.notify_all();
                    if failing {
                        *self.failure.lock() = None;
                        self.failed.store(false, Ordering::Release);
                        tracing::info!("the data dir's log is written again: every held change is durable now");
                    }
                    self.durable.send_replace(upto);
                }
                Err(e) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        tracing::error!(error = %e, "the data dir's log could not be written: writes answer 503 and their changes are held in memory until it can");
                    }
                    *self.failure.lock() = Some(e.to_string());
                    self.failed.store(true, Ordering::Release);
                    // Cut back what part of the failed write reached the file, so the
                    // retry leaves no torn frame behind.
                    let _ = file.set_len(good);
                    let _ = file.seek(std::io::SeekFrom::Start(good));
                    unsynced = false;
                    // Wake the requests waiting for durability: they answer now.
                    self.durable.send_modify(|_| {});
                }
            }
            if closing {
                if self.failed.load(Ordering::Acquire) {
                    tracing::error!(
                        bytes = spare.len(),
                        "stopping with changes the data dir's log could not hold: they are lost (their requests were answered 503)"
                    );
                }
                return;
            }
        }
    }
}

impl DataLog {
    /// The writer's part of a swap: copies the old file's tail from `swap.copied_to` to
    /// `good` into `new`, syncs it, renames it over the log and syncs the directory, and
    /// makes it the file written to. Returns the new file's length. (`copied_to`: how far
    /// the old file's tail is in `new` already.)
    fn take_place(
        file: &mut File,
        good: u64,
        mut new: File,
        copied_to: u64,
        temp: &std::path::Path,
        path: &std::path::Path,
    ) -> std::io::Result<u64> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::FileExt;
        let mut at = copied_to;
        let mut buf = vec![0u8; 1 << 20];
        // The old file read through its path (still the log until the rename), not the
        // handle written to, which may be open for writing only.
        let old = if at < good { Some(File::open(path)?) } else { None };
        while let (true, Some(old)) = (at < good, &old) {
            let n = buf.len().min((good - at) as usize);
            old.read_exact_at(&mut buf[..n], at)?;
            new.write_all(&buf[..n])?;
            at += n as u64;
        }
        new.sync_all()?;
        let len = new.seek(SeekFrom::End(0))?;
        // Everything that can fail on the new file has; from the rename on, the new file
        // is the log whatever happens next, so it is the one written to.
        std::fs::rename(temp, path)?;
        *file = new;
        let synced = path
            .parent()
            .map_or(Ok(()), |dir| File::open(dir).and_then(|d| d.sync_all()));
        if let Err(e) = synced {
            // The rename survives a crash of fauxpay; a machine crash might undo it.
            tracing::warn!(error = %e, "the data dir could not be synced after the compacted log took the log's place");
        }
        Ok(len)
    }
}

impl Drop for DataLog {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn appended_records_are_durable_in_order_and_read_back() {
        let dir = std::env::temp_dir().join(format!("fauxpay-writer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for fsync in [Fsync::Always, Fsync::Batch, Fsync::Never] {
            let (file, _) = super::super::file::open(&dir, |_, _, _| Ok(())).unwrap();
            let log = DataLog::start(file, fsync, None).unwrap();
            let lsns: Vec<Lsn> = (0..100)
                .map(|i| {
                    log.append(&Record::Attempt {
                        identity: format!("k{i}"),
                        n: 1,
                        at_ms: i,
                    })
                })
                .collect();
            log.durable(*lsns.last().unwrap()).await.unwrap();
            log.close();
        }
        let mut seen = Vec::new();
        super::super::file::open(&dir, |_, _, p| {
            seen.push(Record::from_bytes(p).map_err(|e| e.to_string())?);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), 300);
        assert!(matches!(&seen[101], Record::Attempt { identity, .. } if identity == "k1"));
    }
}
