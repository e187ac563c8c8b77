//! Holds N connections open on the provider, each with one request that a forced `hang`
//! fault keeps unanswered, so the provider's cost of idle held requests can be measured.
//!
//! Opens `--connections` (10,000) TCP connections to `--addr` (a few hundred at a time),
//! sends each `POST /v1/payment_intents` with `Fauxpay-Fault: hang; hang=60s` and a
//! unique `Idempotency-Key`, waits until `/metrics` reports
//! `fauxpay_api_requests_in_flight` ≥ N, prints `held N`, keeps them for `--hold-secs`
//! while the caller samples the server's RSS and CPU from /proc, prints `releasing`,
//! closes every connection and exits. Everything is bounded by `--deadline-secs`.
//!
//! The file-descriptor limit must allow N sockets in this process and in the server
//! (`ulimit -n 65536` in the calling script).

#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[derive(Parser)]
struct Args {
    /// The provider's address (host:port on 127.0.0.1).
    #[arg(long)]
    addr: SocketAddr,
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// How long to keep the connections once all are held.
    #[arg(long, default_value_t = 5)]
    hold_secs: u64,
    /// Connections opened concurrently while ramping up.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Give up (exit 1) after this long.
    #[arg(long, default_value_t = 90)]
    deadline_secs: u64,
}

/// Request `i`, with `Host` the address it goes to, as a client's is: the provider answers
/// only the names it listens under (a 403 to any other, against DNS rebinding).
fn request(i: usize, addr: SocketAddr) -> Vec<u8> {
    let body = format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=hold-{i}");
    format!(
        "POST /v1/payment_intents HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer sk_test_bench\r\nIdempotency-Key: hold-{i}\r\nFauxpay-Fault: hang; hang=60s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The provider's `fauxpay_api_requests_in_flight` gauge, over a plain HTTP/1.0 GET; an
/// answer without it is an error that quotes the answer's first line.
fn in_flight(addr: SocketAddr) -> Result<u64, String> {
    let get = || -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    };
    let text = get().map_err(|e| format!("GET /metrics: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("fauxpay_api_requests_in_flight "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "GET /metrics answered `{}` without fauxpay_api_requests_in_flight",
                text.lines().next().unwrap_or("nothing")
            )
        })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let deadline = Instant::now() + Duration::from_secs(args.deadline_secs);
    let mut held: Vec<TcpStream> = Vec::with_capacity(args.connections);
    let mut next = 0;
    while next < args.connections {
        if Instant::now() > deadline {
            eprintln!("hold: deadline passed while connecting ({} open)", held.len());
            std::process::exit(1);
        }
        let end = (next + args.batch).min(args.connections);
        let opened = futures_util::future::join_all((next..end).map(|i| async move {
            let mut s = TcpStream::connect(args.addr).await?;
            s.write_all(&request(i, args.addr)).await?;
            Ok::<_, std::io::Error>(s)
        }))
        .await;
        for s in opened {
            match s {
                Ok(s) => held.push(s),
                Err(e) => {
                    eprintln!("hold: connection failed: {e}");
                    std::process::exit(1);
                }
            }
        }
        next = end;
    }
    loop {
        let n = match tokio::task::spawn_blocking(move || in_flight(args.addr))
            .await
            .expect("join")
        {
            Ok(n) => n,
            Err(e) => {
                eprintln!("hold: {e}");
                std::process::exit(1);
            }
        };
        if n as usize >= args.connections {
            println!("held {n}");
            break;
        }
        if Instant::now() > deadline {
            eprintln!(
                "hold: only {n} of {} requests in flight before the deadline",
                args.connections
            );
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(args.hold_secs)).await;
    println!("releasing");
    drop(held);
}
