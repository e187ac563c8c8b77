//! A finely paced, open-model HTTP client for the benchmark's "p99 at 50% of peak" row.
//!
//! wrk paces with `delay()` in whole milliseconds, so its "fixed rate" arrives in bursts
//! at each millisecond tick and the row measured the bursts. This client starts requests
//! at seeded Poisson arrival times computed to the microsecond, on a dispatcher thread
//! that sleeps to each start, and hands each to the first free connection of
//! `--connections` keep-alive HTTP/1.1 connections. Latency is measured from each
//! request's **intended** start, so when every connection is busy the queueing shows in
//! the percentiles (no coordinated omission).
//!
//! It sends the request `fauxpay load --template stripe` sends (a confirmed payment intent
//! with its own order id and `Idempotency-Key`) to any server, so the same run measures
//! the provider and the hello-world baseline. The last line is a summary in the shape of
//! bench/wrk/common.lua's: `BENCH {"requests":…,"rps":…,"p50_us":…,"p99_us":…,…}`.

#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Mutex};

#[derive(Parser)]
struct Args {
    /// The server, as http://127.0.0.1:PORT.
    url: String,
    /// Requests started per second (Poisson arrivals at this mean rate).
    #[arg(long)]
    rate: f64,
    /// Keep-alive connections (the most requests in flight at once).
    #[arg(long, default_value_t = 100)]
    connections: usize,
    /// How long to send for, in seconds.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Prefix of the order ids and idempotency keys.
    #[arg(long, default_value = "paced")]
    run: String,
}

#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    status_errors: AtomicU64,
    socket_errors: AtomicU64,
}

fn main() {
    let args = Args::parse();
    let addr = match args.url.strip_prefix("http://") {
        Some(a) => a.trim_end_matches('/').to_string(),
        None => {
            eprintln!("paced: the url must be http://host:port, not {}", args.url);
            std::process::exit(2);
        }
    };
    if !(args.rate > 0.0 && args.rate.is_finite()) || args.connections == 0 {
        eprintln!("paced: --rate must be a positive number and --connections at least 1");
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = mpsc::unbounded_channel::<(Instant, u64)>();
    let rx = Arc::new(Mutex::new(rx));
    let counts = Arc::new(Counts::default());
    let histograms: Vec<_> = (0..args.connections)
        .map(|_| {
            let rx = rx.clone();
            let counts = counts.clone();
            let addr = addr.clone();
            let run = args.run.clone();
            runtime.spawn(connection(addr, run, rx, counts))
        })
        .collect();

    // The dispatcher: a plain thread sleeping to each intended start (std's sleep is
    // precise to tens of microseconds; tokio's timer wheel ticks in milliseconds).
    let (rate, seconds, seed) = (args.rate, args.seconds, args.seed);
    let dispatcher = std::thread::spawn(move || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let start = Instant::now() + Duration::from_millis(50);
        let end = start + Duration::from_secs_f64(seconds);
        let mut at = start;
        let mut n = 0u64;
        while at < end {
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            n += 1;
            if tx.send((at, n)).is_err() {
                break;
            }
            let gap = -(1.0 - rng.random::<f64>()).ln() / rate;
            at += Duration::from_secs_f64(gap);
        }
        (start, end)
    });
    // The connections run while the dispatcher sends (a current-thread runtime runs its
    // tasks only inside `block_on`); they end when it stops and the channel closes.
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    runtime.block_on(async {
        for h in histograms {
            if let Ok(h) = h.await {
                all.add(h).unwrap();
            }
        }
    });
    let (start, end) = dispatcher.join().unwrap();
    let finished = Instant::now().max(end);
    let duration = finished - start;
    let requests = counts.requests.load(Ordering::Relaxed);
    println!(
        "BENCH {{\"requests\":{},\"duration_us\":{},\"rps\":{:.1},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"status_errors\":{},\"socket_errors\":{}}}",
        requests,
        duration.as_micros(),
        requests as f64 / duration.as_secs_f64(),
        all.value_at_quantile(0.5),
        all.value_at_quantile(0.99),
        all.value_at_quantile(0.999),
        all.max(),
        counts.status_errors.load(Ordering::Relaxed),
        counts.socket_errors.load(Ordering::Relaxed),
    );
}

/// One keep-alive connection: takes the next due request, sends it, reads the answer,
/// records the latency from its intended start.
async fn connection(
    addr: String,
    run: String,
    rx: Arc<Mutex<mpsc::UnboundedReceiver<(Instant, u64)>>>,
    counts: Arc<Counts>,
) -> Histogram<u64> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut stream: Option<TcpStream> = None;
    let mut buf = Vec::with_capacity(8192);
    loop {
        let next = rx.lock().await.recv().await;
        let Some((intended, n)) = next else { break };
        let order = format!("{run}-{n}");
        let body =
            format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}");
        let request = format!(
            "POST /v1/payment_intents HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer sk_test_bench\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nIdempotency-Key: {order}-k\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.is_none() {
            match TcpStream::connect(&addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    stream = Some(s);
                }
                Err(_) => {
                    counts.socket_errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
        }
        let s = stream.as_mut().expect("connected above");
        match exchange(s, request.as_bytes(), &mut buf).await {
            Ok(status) => {
                counts.requests.fetch_add(1, Ordering::Relaxed);
                if !(200..300).contains(&status) {
                    counts.status_errors.fetch_add(1, Ordering::Relaxed);
                }
                let _ = hist.record((intended.elapsed().as_micros() as u64).max(1));
            }
            Err(_) => {
                counts.socket_errors.fetch_add(1, Ordering::Relaxed);
                stream = None;
            }
        }
    }
    hist
}

/// Writes one request and reads one `Content-Length` answer; returns its status.
async fn exchange(s: &mut TcpStream, request: &[u8], buf: &mut Vec<u8>) -> std::io::Result<u16> {
    s.write_all(request).await?;
    buf.clear();
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("non-UTF-8 head"))?;
            let status: u16 = head
                .get(9..12)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("no status"))?;
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .ok_or_else(|| bad("no Content-Length"))?;
            let total = end + 4 + length;
            while buf.len() < total {
                read_more(s, buf).await?;
            }
            return Ok(status);
        }
        read_more(s, buf).await?;
    }
}

async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 8192];
    let n = s.read(&mut chunk).await?;
    if n == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
