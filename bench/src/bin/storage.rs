//! The data dir's storage, measured against two embedded engines before committing to
//! one (issue: "measure both costs"): fauxpay's append-only log (`DataLog`: one writer
//! thread, group commit) against SQLite in WAL mode (rusqlite, bundled) and redb, each
//! storing the same records (a confirmed payment intent's write record, ~400 bytes) in
//! groups of `--group` (the requests waiting at once), at the durability of
//! `--fsync batch` (written to the OS, synced later) and `--fsync always` (synced
//! before the group is answered). Then each reads everything back, as recovery does.
//!
//!   cargo run --release -p fauxpay-bench --bin storage -- --records 200000
//!
//! Prints one line per engine and durability: records/s written, MB on disk, records/s
//! read back.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use fauxpay_provider::durable::record::Commit;
use fauxpay_provider::durable::{file, DataLog, Fsync, Record};
use fauxpay_provider::stripe::ids::{RequestId, Token};
use fauxpay_provider::stripe::params::Params;

#[derive(Parser)]
struct Args {
    /// Records written per engine and durability.
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    /// Records per group commit (64: the benchmark's connections).
    #[arg(long, default_value_t = 64)]
    group: usize,
    /// Where the engines write (a fresh folder under it per run).
    #[arg(long, default_value = "target/bench-storage")]
    dir: PathBuf,
}

fn record(i: usize) -> Vec<u8> {
    Record::Commit(Box::new(Commit {
        at_ms: 1_764_800_000_000 + i as u64,
        request_id: Token::from_pair([i as u64 + 1, 0])
            .map(RequestId::from_token)
            .unwrap_or_else(RequestId::generate),
        api_key: "sk_test_bench".into(),
        verb: "POST".into(),
        endpoint: "/v1/payment_intents".into(),
        path: "/v1/payment_intents".into(),
        id: String::new(),
        sub: String::new(),
        params: Params::from_form(
            format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=bench-{i}")
                .as_bytes(),
        )
        .unwrap_or_default(),
        idempotency_key: Some(format!("bench-{i}-k")),
        fingerprint: vec![[i as u64, !(i as u64)]],
        correlation_id: Some(format!("bench-{i}")),
        fault: None,
        decline: None,
        origin: Some("http://127.0.0.1:12111".into()),
        // What a create-and-confirm draws: its three events' ids are one draw.
        tokens: (0..4).map(|t| [i as u64 * 7 + t + 1, u64::MAX - i as u64]).collect(),
        attempt: Some(1),
        injected_status: None,
        status: Some(200),
        derived_event_ids: true,
    }))
    .to_bytes()
}

fn size_mb(dir: &Path) -> f64 {
    fn walk(p: &Path) -> u64 {
        std::fs::read_dir(p)
            .map(|d| {
                d.flatten()
                    .map(|e| match e.metadata() {
                        Ok(m) if m.is_dir() => walk(&e.path()),
                        Ok(m) => m.len(),
                        Err(_) => 0,
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(dir) as f64 / 1e6
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What one engine did: seconds to write every record, and to read them back.
struct Measured {
    write_secs: f64,
    read: usize,
    read_secs: f64,
}

/// Times `write`, then `read` (which returns how many records it found).
fn measure(write: impl FnOnce() -> Result<()>, read: impl FnOnce() -> Result<usize>) -> Result<Measured> {
    let started = Instant::now();
    write()?;
    let write_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let read = read()?;
    Ok(Measured {
        write_secs,
        read,
        read_secs: started.elapsed().as_secs_f64(),
    })
}

/// fauxpay's log: `always` is `--fsync always`, else `--fsync batch`.
fn fauxpay_log(args: &Args, records: &[Vec<u8>], always: bool, dir: &Path) -> Result<Measured> {
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let (f, _) = file::open(dir, |_, _, _| Ok(()))?;
    let log = DataLog::start(f, if always { Fsync::Always } else { Fsync::Batch }, None)?;
    let parsed = records
        .iter()
        .map(|r| Record::from_bytes(r))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    measure(
        || {
            for group in parsed.chunks(args.group) {
                let last = group.iter().fold(0, |_, r| log.append(r));
                runtime.block_on(log.durable(last))?;
            }
            log.close();
            Ok(())
        },
        || {
            let mut n = 0;
            file::open(dir, |_, _, payload| {
                n += usize::from(!payload.is_empty());
                Ok(())
            })?;
            Ok(n)
        },
    )
}

/// SQLite in WAL mode: `always` is `synchronous=FULL` (the WAL synced at every commit),
/// else `NORMAL` (synced at checkpoints).
fn sqlite(args: &Args, records: &[Vec<u8>], always: bool, dir: &Path) -> Result<Measured> {
    std::fs::create_dir_all(dir)?;
    let mut db = rusqlite::Connection::open(dir.join("log.sqlite"))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", if always { "FULL" } else { "NORMAL" })?;
    db.execute("CREATE TABLE log (seq INTEGER PRIMARY KEY, record BLOB NOT NULL)", [])?;
    measure(
        || {
            for group in records.chunks(args.group) {
                let tx = db.transaction()?;
                {
                    let mut insert = tx.prepare_cached("INSERT INTO log (record) VALUES (?1)")?;
                    for r in group {
                        insert.execute([r])?;
                    }
                }
                tx.commit()?;
            }
            Ok(())
        },
        // As recovery would: a new connection reading the whole log.
        || {
            let db = rusqlite::Connection::open(dir.join("log.sqlite"))?;
            let mut scan = db.prepare("SELECT record FROM log ORDER BY seq")?;
            let mut rows = scan.query([])?;
            let mut n = 0;
            while let Some(row) = rows.next()? {
                n += usize::from(!row.get::<_, Vec<u8>>(0)?.is_empty());
            }
            Ok(n)
        },
    )
}

const LOG: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("log");

/// redb: `always` is `Durability::Immediate` (synced at commit), else `None`.
fn redb_store(args: &Args, records: &[Vec<u8>], always: bool, dir: &Path) -> Result<Measured> {
    use redb::ReadableTable;
    std::fs::create_dir_all(dir)?;
    let db = redb::Database::create(dir.join("log.redb"))?;
    measure(
        || {
            let mut seq = 0u64;
            for group in records.chunks(args.group) {
                let mut tx = db.begin_write()?;
                tx.set_durability(if always {
                    redb::Durability::Immediate
                } else {
                    redb::Durability::None
                });
                {
                    let mut table = tx.open_table(LOG)?;
                    for r in group {
                        seq += 1;
                        table.insert(seq, r.as_slice())?;
                    }
                }
                tx.commit()?;
            }
            Ok(())
        },
        || {
            let tx = db.begin_read()?;
            let mut n = 0;
            for entry in tx.open_table(LOG)?.iter()? {
                n += usize::from(!entry?.1.value().is_empty());
            }
            Ok(n)
        },
    )
}

type Engine = fn(&Args, &[Vec<u8>], bool, &Path) -> Result<Measured>;

fn main() -> Result<()> {
    let args = Args::parse();
    let records: Vec<Vec<u8>> = (0..args.records).map(record).collect();
    println!(
        "{} records of {} bytes in groups of {}",
        records.len(),
        records.iter().map(Vec::len).sum::<usize>() / records.len().max(1),
        args.group
    );
    let engines: [(&str, Engine); 3] = [
        ("fauxpay log", fauxpay_log),
        ("SQLite (WAL)", sqlite),
        ("redb", redb_store),
    ];
    for (name, engine) in engines {
        for always in [false, true] {
            let dir = args.dir.join(format!("{name}-{always}").replace([' ', '(', ')'], ""));
            let _ = std::fs::remove_dir_all(&dir);
            let m = engine(&args, &records, always, &dir)?;
            println!(
                "{name:<22} {:<7} write {:>9.0} records/s   {:>7.1} MB   read back {:>9.0} records/s ({} records)",
                if always { "always" } else { "batch" },
                records.len() as f64 / m.write_secs,
                size_mb(&dir),
                m.read as f64 / m.read_secs,
                m.read
            );
        }
    }
    let _ = std::fs::remove_dir_all(&args.dir);
    Ok(())
}
