//! The data dir's storage, measured against two embedded engines before committing to
//! one (issue: "measure both costs"): fauxpay's append-only log (`DataLog`: one writer
//! thread, group commit) against SQLite in WAL mode (rusqlite, bundled) and redb, each
//! storing the same records (a confirmed payment intent's write record, ~640 bytes) in
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
use fauxpay::provider::durable::record::Commit;
use fauxpay::provider::durable::{file, DataLog, Fsync, Record};

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
        request_id: format!("req_{i:024}"),
        api_key: "sk_test_bench".into(),
        verb: "POST".into(),
        endpoint: "/v1/payment_intents".into(),
        path: "/v1/payment_intents".into(),
        id: String::new(),
        params: serde_json::json!({"amount": "2000", "currency": "usd", "confirm": "true",
            "payment_method": "pm_card_visa", "metadata": {"order_id": format!("bench-{i}")}}),
        idempotency_key: Some(format!("bench-{i}-k")),
        fingerprint: vec![[i as u64, !(i as u64)]],
        correlation_id: Some(format!("bench-{i}")),
        fault: None,
        decline: None,
        origin: Some("http://127.0.0.1:12111".into()),
        tokens: (0..6).map(|t| [i as u64 * 7 + t + 1, u64::MAX - i as u64]).collect(),
        attempt: Some(1),
        injected_status: None,
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

fn report(engine: &str, durability: &str, n: usize, write_secs: f64, dir: &Path, read: (usize, f64)) {
    println!(
        "{engine:<22} {durability:<7} write {:>9.0} records/s   {:>7.1} MB   read back {:>9.0} records/s ({} records)",
        n as f64 / write_secs,
        size_mb(dir),
        read.0 as f64 / read.1,
        read.0
    );
}

fn fauxpay_log(args: &Args, records: &[Vec<u8>], fsync: Fsync, dir: &Path) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let (f, _) = file::open(dir, |_, _, _| Ok(())).map_err(std::io::Error::other)?;
    let log = DataLog::start(f, fsync)?;
    let parsed: Vec<Record> = records.iter().map(|r| Record::from_bytes(r).unwrap()).collect();
    let started = Instant::now();
    for group in parsed.chunks(args.group) {
        let mut last = 0;
        for r in group {
            last = log.append(r);
        }
        runtime.block_on(log.durable(last)).map_err(std::io::Error::other)?;
    }
    log.close();
    let write = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut n = 0;
    file::open(dir, |_, _, payload| {
        n += usize::from(!payload.is_empty());
        Ok(())
    })
    .map_err(std::io::Error::other)?;
    let name = match fsync {
        Fsync::Always => "always",
        _ => "batch",
    };
    report(
        "fauxpay log",
        name,
        records.len(),
        write,
        dir,
        (n, started.elapsed().as_secs_f64()),
    );
    Ok(())
}

fn sqlite(args: &Args, records: &[Vec<u8>], full: bool, dir: &Path) -> rusqlite::Result<()> {
    std::fs::create_dir_all(dir).ok();
    let mut db = rusqlite::Connection::open(dir.join("log.sqlite"))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    // FULL syncs the WAL at every commit (`always`); NORMAL syncs at checkpoints (`batch`).
    db.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })?;
    db.execute("CREATE TABLE log (seq INTEGER PRIMARY KEY, record BLOB NOT NULL)", [])?;
    let started = Instant::now();
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
    let write = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut n = 0;
    {
        let mut scan = db.prepare("SELECT record FROM log ORDER BY seq")?;
        let mut rows = scan.query([])?;
        while let Some(row) = rows.next()? {
            let r: Vec<u8> = row.get(0)?;
            n += usize::from(!r.is_empty());
        }
    }
    let name = if full { "always" } else { "batch" };
    report(
        "SQLite (WAL)",
        name,
        records.len(),
        write,
        dir,
        (n, started.elapsed().as_secs_f64()),
    );
    Ok(())
}

const LOG: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("log");

fn redb_store(args: &Args, records: &[Vec<u8>], immediate: bool, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).ok();
    let db = redb::Database::create(dir.join("log.redb"))?;
    let started = Instant::now();
    let mut seq = 0u64;
    for group in records.chunks(args.group) {
        let mut tx = db.begin_write()?;
        // Immediate: synced at commit (`always`); None: not synced (`batch`, `never`).
        tx.set_durability(if immediate {
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
    let write = started.elapsed().as_secs_f64();
    let started = Instant::now();
    use redb::ReadableTable;
    let tx = db.begin_read()?;
    let table = tx.open_table(LOG)?;
    let mut n = 0;
    for entry in table.iter()? {
        let (_, v) = entry?;
        n += usize::from(!v.value().is_empty());
    }
    let name = if immediate { "always" } else { "batch" };
    report(
        "redb",
        name,
        records.len(),
        write,
        dir,
        (n, started.elapsed().as_secs_f64()),
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let records: Vec<Vec<u8>> = (0..args.records).map(record).collect();
    println!(
        "{} records of {} bytes in groups of {}",
        records.len(),
        records.iter().map(Vec::len).sum::<usize>() / records.len().max(1),
        args.group
    );
    let fresh = |name: &str| {
        let d = args.dir.join(name);
        let _ = std::fs::remove_dir_all(&d);
        d
    };
    for fsync in [Fsync::Batch, Fsync::Always] {
        fauxpay_log(&args, &records, fsync, &fresh(&format!("log-{fsync:?}")))?;
    }
    for full in [false, true] {
        sqlite(&args, &records, full, &fresh(&format!("sqlite-{full}")))?;
    }
    for immediate in [false, true] {
        redb_store(&args, &records, immediate, &fresh(&format!("redb-{immediate}")))?;
    }
    let _ = std::fs::remove_dir_all(&args.dir);
    Ok(())
}
