//! Running a compaction of the data dir's log (`durable::compact` decides what it keeps):
//! beside the running provider, after a `--retain` sweep. The records up to now are taken
//! (under the commit lock, with the ledger's totals), the kept ones are copied into a new
//! file with the tail written since, and the writer puts it in the log's place between
//! two writes (`DataLog::swap`). A crash at any point leaves either the old log or the new
//! one whole.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::Instant;

use crate::app::Provider;
use crate::durable::compact::{due, plan, Context, Kind, Meta, Step};
use crate::durable::file::{self, encode_frame};
use crate::durable::writer::Swap;
use crate::state::ledger::LedgerTotals;
use crate::state::trace::Touched;

/// What one compaction did, for its log line and the tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Compacted {
    pub records_before: usize,
    pub records_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Why a compaction did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("compaction is off (it needs --retain and a data dir)")]
    Off,
    #[error("the log could not be written up to the compacted part (failing or closing)")]
    NotWritten,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the writer did not take the compacted log: {0}")]
    Swap(String),
    #[error("a --retain sweep ran while the log was being compacted; it is compacted at a later sweep")]
    Raced,
}

/// Compacts the log of `app` now (see the module docs); blocks until it is done.
pub fn run(app: &Provider, dir: &std::path::Path) -> Result<Compacted, CompactError> {
    let log = app.durable().ok_or(CompactError::Off)?;
    let started = Instant::now();
    let (end, metas, totals) = {
        let _order = log.commit_lock();
        let totals = app.payments.ledger.totals();
        let (end, metas) = log.take_metas().ok_or(CompactError::Off)?;
        (end, metas, totals)
    };
    match rewrite(app, dir, end, &metas, totals) {
        Ok((swap, done, mut compacted)) => {
            log.swap(swap);
            match done.recv() {
                Ok(Ok(len)) => {
                    compacted.bytes_after = len;
                    // Routine, every few seconds in a soak: behind RUST_LOG (health and
                    // /metrics count compactions).
                    tracing::debug!(
                        records_before = compacted.records_before,
                        records_after = compacted.records_after,
                        mb_before = compacted.bytes_before >> 20,
                        mb_after = compacted.bytes_after >> 20,
                        took = ?started.elapsed(),
                        "the data dir's log was compacted"
                    );
                    Ok(compacted)
                }
                Ok(Err((_, why))) => {
                    log.untake_metas(metas);
                    Err(CompactError::Swap(why))
                }
                Err(_) => {
                    log.untake_metas(metas);
                    Err(CompactError::Swap("the writer stopped".into()))
                }
            }
        }
        Err(e) => {
            // A partial rewrite (a full disk) is not left behind to fill it further.
            let _ = std::fs::remove_file(dir.join(file::COMPACTING_FILE));
            log.untake_metas(metas);
            Err(e)
        }
    }
}

type Done = std::sync::mpsc::Receiver<Result<u64, (Vec<Meta>, String)>>;

/// Writes the compacted log beside the old one (the kept records up to `end`, then the
/// tail written since), ready for the writer to put in its place.
fn rewrite(
    app: &Provider,
    dir: &std::path::Path,
    end: u64,
    metas: &[Meta],
    totals: LedgerTotals,
) -> Result<(Swap, Done, Compacted), CompactError> {
    let log = app.durable().ok_or(CompactError::Off)?;
    if !log.wait_written(end) {
        return Err(CompactError::NotWritten);
    }
    let payments = &app.payments;
    let mut live = HashSet::new();
    payments.live_keys(&mut live);
    let event_touch = |id: &str| crate::stripe::ids::EventId::parse(id).map(|id| payments.events.table.touch_of(&id));
    // What the records written since touched stays needed, and their ended deliveries count.
    let (later_deliveries, raced) = log.with_metas(|later| {
        let mut ended = Vec::new();
        let mut raced = false;
        for m in later {
            match &m.kind {
                Kind::Commit { touched, .. } => live.extend(touched.iter().map(|t| t.plain())),
                Kind::Delivered { event, url } => ended.extend(event_touch(event).map(|t| (t, *url))),
                // A sweep ran since the cut: what it retired was live at the cut, and
                // the totals were taken before it. Compact at a later sweep instead.
                Kind::Retired => raced = true,
                _ => {}
            }
        }
        (ended, raced)
    });
    if raced {
        return Err(CompactError::Raced);
    }
    let steps = plan(
        metas,
        Context {
            live,
            now_ms: crate::state::clock::now_ms(),
            ttl_ms: app.idempotency.ttl().as_millis() as u64,
            later_deliveries: &later_deliveries,
            event_touch: &event_touch,
            totals,
        },
    );

    let path = dir.join(file::LOG_FILE);
    let temp = dir.join(file::COMPACTING_FILE);
    let old = File::open(&path)?;
    // Read and write: once it is the log, the writer reads its tail back (the next
    // compaction's copy).
    let mut new = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut new);
    out.write_all(&file::header())?;
    let mut at = file::HEADER_LEN;
    let mut reader = BufReader::with_capacity(1 << 20, &old);
    reader.seek(SeekFrom::Start(file::HEADER_LEN))?;
    let mut read_at = file::HEADER_LEN;
    let mut kept = Vec::with_capacity(steps.len());
    let mut frame = Vec::new();
    for step in &steps {
        match step {
            Step::Copy(i) => {
                let m = &metas[*i];
                if m.offset > read_at {
                    reader.seek_relative((m.offset - read_at) as i64)?;
                }
                frame.resize(m.len as usize, 0);
                reader.read_exact(&mut frame)?;
                read_at = m.offset + u64::from(m.len);
                out.write_all(&frame)?;
                kept.push(Meta {
                    offset: at,
                    ..m.clone()
                });
                at += u64::from(m.len);
            }
            Step::Write(record) => {
                frame.clear();
                encode_frame(&record.to_bytes(), &mut frame);
                out.write_all(&frame)?;
                kept.push(Meta::of(record, at, frame.len() as u64, Touched::default(), 0));
                at += frame.len() as u64;
            }
        }
    }
    out.flush()?;
    drop(out);
    // The tail written since, most of it here (the writer copies the rest).
    let copied_to = log.written();
    copy_range(&old, &mut new, end, copied_to)?;
    new.sync_all()?;
    let compacted = Compacted {
        records_before: metas.len(),
        records_after: kept.len(),
        bytes_before: end,
        bytes_after: 0,
    };
    let (done_tx, done) = std::sync::mpsc::channel();
    Ok((
        Swap {
            file: new,
            temp,
            path,
            old_prefix_end: end,
            new_prefix_end: at,
            copied_to,
            metas: kept,
            done: done_tx,
        },
        done,
        compacted,
    ))
}

fn copy_range(from: &File, to: &mut File, start: u64, end: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = start;
    while at < end {
        let n = buf.len().min((end - at) as usize);
        from.read_exact_at(&mut buf[..n], at)?;
        to.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

/// Starts a compaction in the background when the log of `app` is due one and none is
/// running (called by the `--retain` sweep).
pub fn maybe_start(app: &Arc<Provider>) {
    use std::sync::atomic::Ordering;
    let (Some(log), Some(dir)) = (app.durable(), app.compaction.dir.get().cloned()) else {
        return;
    };
    if !log.compacts() || log.degraded().is_some() {
        return;
    }
    let state = &app.compaction;
    if !due(
        log.end(),
        state.compacted_end.load(Ordering::Relaxed),
        app.config.compact_after,
    ) {
        return;
    }
    // The rewrite needs room: at most the log's size again. Without it, compacting would
    // fill the disk the log itself needs (its writes would answer 503 until the rewrite
    // gave up); the log keeps growing instead, and the next sweep looks again.
    let room = rustix::fs::statvfs(&dir).map_or(u64::MAX, |v| v.f_bavail.saturating_mul(v.f_frsize));
    if room < log.end().saturating_add(64 << 20) {
        tracing::debug!(
            room,
            log = log.end(),
            "not compacting: too little disk space for the rewrite"
        );
        return;
    }
    if state.running.swap(true, Ordering::AcqRel) {
        return;
    }
    let owned = app.clone();
    let spawned = std::thread::Builder::new()
        .name("fauxpay-compact".into())
        .spawn(move || {
            let app = owned;
            let state = &app.compaction;
            match run(&app, &dir) {
                Ok(done) => {
                    state.compacted_end.store(done.bytes_after, Ordering::Relaxed);
                    state.runs.fetch_add(1, Ordering::Relaxed);
                    app.metrics.data_log_compactions.inc();
                }
                Err(CompactError::Raced) => tracing::debug!("compaction raced a sweep; tried again at the next one"),
                Err(e) => tracing::warn!(error = %e, "the data dir's log could not be compacted; it is kept whole and tried again later"),
            }
            state.running.store(false, Ordering::Release);
        });
    if spawned.is_err() {
        app.compaction.running.store(false, Ordering::Release);
    }
}
