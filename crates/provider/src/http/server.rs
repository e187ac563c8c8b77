//! The provider's HTTP server: the accept loop, one task per connection, graceful
//! shutdown, and [`ConnControl`], which lets a handler end its own connection abruptly.
//!
//! Injected network faults need more than a response: `drop_response` closes the
//! connection without sending a byte, `reset` closes it with a TCP RST (zero linger),
//! `hang` holds it. A handler asks for that through the connection's [`ConnControl`],
//! which the connection's service holds ([`ConnectionService`]); the connection task then
//! drops the HTTP connection (and so the socket) without writing anything. A held
//! connection is handed to a small task of its own that keeps only the socket (and what
//! the request must keep alive: its idempotency claim, its in-flight count) until the
//! hold ends, the client goes away or the server stops: HTTP buffers and the request's
//! state are freed at once, so thousands of held requests cost little memory and no CPU.
//!
//! Hostile clients are bounded here ([`Limits`]): a request's header must arrive within
//! the header timeout (hyper's timer, which also closes a keep-alive connection idle that
//! long); at most `max_connections` are open at once (held ones included), beyond which
//! a connection gets a Stripe-shaped 503 and is closed, counted in
//! `fauxpay_connections_refused_total`. The answers hyper makes itself for a request it
//! cannot parse (400, 414, 431) have an empty body; [`EdgeIo`], the connection's I/O,
//! rewrites them into Stripe's JSON error object on their way out. It also holds each
//! answer's first write until its round ([`super::rounds`]).
//!
//! On shutdown, listening stops, idle and held connections close, and in-flight requests
//! may finish until the shutdown deadline; then every connection still open (a partial
//! header, a silent client, a long latency) is cut and [`serve_connections`] returns.

use std::convert::Infallible;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tower_service::Service;

use super::rounds::Turn;
pub use crate::config::Limits;
use crate::pipeline::{Abort, Hold};

/// How a handler ends its connection.
enum Ending {
    Abort(Abort),
    Hold(Hold),
}

/// A per-connection handle through which a handler can end the connection.
#[derive(Default)]
pub struct ConnControl {
    abort: Mutex<Option<Abort>>,
    hold: Mutex<Option<Hold>>,
    notify: Notify,
}

impl ConnControl {
    /// Ends the connection as `how` says; the handler's response is never sent.
    pub fn abort(&self, how: Abort) {
        *self.abort.lock() = Some(how);
        self.notify.notify_one();
    }

    /// Holds the connection without a response byte for `hold.duration` (less if the
    /// client goes away or the server stops), then closes it. The handler's future is
    /// dropped: what it must keep alive goes in `hold.keep`.
    pub fn hold(&self, hold: Hold) {
        *self.hold.lock() = Some(hold);
        self.notify.notify_one();
    }

    async fn ended(&self) -> Ending {
        loop {
            if let Some(hold) = self.hold.lock().take() {
                return Ending::Hold(hold);
            }
            if let Some(how) = *self.abort.lock() {
                return Ending::Abort(how);
            }
            self.notify.notified().await;
        }
    }
}

/// Where the server is in its life: serving, stopping (in-flight requests finish), or
/// past the shutdown deadline (every connection is cut).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    Stopping,
    Cut,
}

/// The server's connection figures, shared with `/metrics`.
#[derive(Clone, Default)]
pub struct ConnectionStats {
    /// Open now (mirrors `open`, for `/metrics`).
    pub gauge: Gauge,
    pub refused: Counter,
    open: Arc<AtomicUsize>,
}

impl ConnectionStats {
    pub fn new(gauge: Gauge, refused: Counter) -> Self {
        Self {
            gauge,
            refused,
            open: Arc::default(),
        }
    }

    /// Counts a connection open until the returned guard is dropped, unless `max` are.
    fn admit(&self, max: usize) -> Option<OpenConnection> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()?;
        self.gauge.inc();
        Some(OpenConnection(self.clone()))
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// One open connection, counted until dropped (it moves to a held connection's task).
struct OpenConnection(ConnectionStats);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.gauge.dec();
    }
}

/// What each connection task shares with the accept loop.
struct Shared {
    phase: watch::Receiver<Phase>,
    done: mpsc::Sender<()>,
    limits: Limits,
}

/// What [`serve_connections`] serves: a service made for each connection, which holds the
/// connection's [`ConnControl`] itself, so that no request carries it (an extension costs
/// every request a map: ~480 instructions, `bench/callgrind.sh`).
pub trait ConnectionService:
    Service<hyper::Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static
{
    /// This service, for the connection that `control` ends.
    fn for_connection(&self, control: &Arc<ConnControl>) -> Self;
}

/// A plain router (the benchmark's hello) has no fault to act with: it keeps no control.
impl ConnectionService for axum::Router {
    fn for_connection(&self, _: &Arc<ConnControl>) -> Self {
        self.clone()
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight requests
/// finish until `limits.shutdown_deadline`, and cuts whatever is left.
pub async fn serve_connections<S>(
    listener: TcpListener,
    app: S,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: Limits,
    stats: ConnectionStats,
) -> std::io::Result<()>
where
    S: ConnectionService,
    S::Future: Send + 'static,
{
    let (phase_tx, phase_rx) = watch::channel(Phase::Serving);
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    let refusing = Arc::new(AtomicUsize::new(0));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match stats.admit(limits.max_connections) {
                    Some(open) => {
                        let shared = Shared { phase: phase_rx.clone(), done: done_tx.clone(), limits };
                        tokio::spawn(connection(stream, app.clone(), shared, open));
                    }
                    None => {
                        stats.refused.inc();
                        refuse(stream, &refusing);
                    }
                },
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            },
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = phase_tx.send(Phase::Stopping);
    drop(done_tx);
    // Every connection task holds a sender; `None` means all have finished.
    if tokio::time::timeout(limits.shutdown_deadline, done_rx.recv())
        .await
        .is_err()
    {
        let open = stats.open();
        tracing::warn!(
            open,
            deadline = ?limits.shutdown_deadline,
            "shutdown deadline passed: cutting the connections still open"
        );
        let _ = phase_tx.send(Phase::Cut);
        let _ = done_rx.recv().await;
    }
    Ok(())
}

/// Refusals being written at once; beyond this a refused connection is just closed.
const MAX_REFUSING: usize = 64;

/// Answers a connection beyond the limit with a Stripe-shaped 503 and closes it: the
/// client's request (already sent, usually) is read and discarded for a moment first, so
/// that closing does not reset the connection before the answer is read.
fn refuse(stream: TcpStream, refusing: &Arc<AtomicUsize>) {
    if refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let refusing = refusing.clone();
    tokio::spawn(async move {
        let answer = edge_error(
            503,
            "api_error",
            "fauxpay has too many open connections (--max-connections); retry later.",
        );
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            let mut written = 0;
            while written < answer.len() {
                if stream.writable().await.is_err() {
                    return;
                }
                match stream.try_write(&answer[written..]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
            let _ = socket2::SockRef::from(&stream).shutdown(std::net::Shutdown::Write);
            let mut scratch = [0u8; 1024];
            loop {
                if stream.readable().await.is_err() {
                    return;
                }
                match stream.try_read(&mut scratch) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
        })
        .await;
        drop(stream);
        refusing.fetch_sub(1, Ordering::AcqRel);
    });
}

async fn connection<S>(stream: TcpStream, app: S, shared: Shared, open: OpenConnection)
where
    S: ConnectionService,
    S::Future: Send + 'static,
{
    let Shared {
        mut phase,
        done: _done,
        limits,
    } = shared;
    let _ = stream.set_nodelay(true);
    let control = Arc::new(ConnControl::default());
    let service = {
        let app = app.for_connection(&control);
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let mut app = app.clone();
            async move { app.call(req).await }
        })
    };
    let mut conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(EdgeIo::new(stream), service);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = &mut conn => return,
            ending = control.ended() => match ending {
                Ending::Abort(how) => {
                    // Take the socket back from the HTTP state (nothing was written), then
                    // drop it: FIN, or RST after a zero linger.
                    let stream = conn.into_parts().io.into_inner();
                    if how == Abort::Reset {
                        let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                    }
                    drop(stream);
                    return;
                }
                Ending::Hold(hold) => {
                    // Keep the socket only; the HTTP state and the handler go now.
                    let stream = conn.into_parts().io.into_inner();
                    tokio::spawn(hold_then_close(stream, hold, phase, _done, open));
                    return;
                }
            },
            changed = phase.changed() => match changed.map(|()| *phase.borrow_and_update()) {
                // In-flight requests finish; an idle connection closes.
                Ok(Phase::Stopping) if !stopping => {
                    stopping = true;
                    Pin::new(&mut conn).graceful_shutdown();
                }
                Ok(Phase::Stopping | Phase::Serving) => {}
                // Past the deadline (or the server is gone): cut.
                Ok(Phase::Cut) | Err(_) => return,
            },
        }
    }
}

/// Keeps a held connection's socket open, sending nothing, until the hold ends, the
/// client goes away or the server stops; then closes it (FIN).
async fn hold_then_close(
    stream: TcpStream,
    hold: Hold,
    mut stop: watch::Receiver<Phase>,
    _done: mpsc::Sender<()>,
    _open: OpenConnection,
) {
    let Hold { duration, keep } = hold;
    let until = tokio::time::sleep(duration);
    tokio::pin!(until);
    let mut scratch = [0u8; 256];
    loop {
        if *stop.borrow() != Phase::Serving {
            break;
        }
        tokio::select! {
            _ = &mut until => break,
            _ = stop.changed() => break,
            ready = stream.readable() => {
                if ready.is_err() {
                    break;
                }
                // Whatever else the client sends is ignored; end of stream ends the hold.
                match stream.try_read(&mut scratch) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
            }
        }
    }
    drop(keep);
    drop(stream);
}

/// Raises the soft limit on open files to the hard one (where the system allows) and
/// returns the limit now in force, `None` when it cannot be read (or is unlimited). One
/// connection is one file: with the common soft limit of 1,024 a few silent clients
/// would lock everyone out.
pub fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = raised,
            Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
        }
    }
    limit.current
}

/// A Stripe-shaped error answer written by the edge itself (no handler ran): JSON with
/// `Content-Type: application/json`, and the connection closes after it.
pub fn edge_error(status: u16, kind: &str, message: &str) -> Bytes {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let body = serde_json::json!({"error": {"type": kind, "message": message}}).to_string();
    Bytes::from(format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ))
}

/// The answer that replaces hyper's own bodiless one for a request it could not parse.
fn edge_answer(status: u16) -> Option<Bytes> {
    let message = match status {
        400 => "fauxpay could not parse this HTTP request (malformed request line or header).",
        408 => "The request took too long to arrive.",
        413 => "The request is too large.",
        414 => "The request URL is too long.",
        431 => "The request's header fields are too large (too many, or too long).",
        _ => return None,
    };
    Some(edge_error(status, "invalid_request_error", message))
}

/// The status of a response head hyper wrote on its own: a 4xx with no `content-type`
/// (every answer fauxpay makes has one), head only.
fn hyper_own_error(buf: &[u8]) -> Option<u16> {
    let rest = buf.strip_prefix(b"HTTP/1.1 4")?;
    let status = std::str::from_utf8(rest.get(..2)?).ok()?.parse::<u16>().ok()? + 400;
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = &buf[..end];
    let has_type = head
        .split(|&b| b == b'\n')
        .any(|line| line.len() >= 13 && line[..13].eq_ignore_ascii_case(b"content-type:"));
    (!has_type && buf.len() == end + 4).then_some(status)
}

pin_project_lite::pin_project! {
    /// A connection's I/O as hyper sees it: the socket, except that the bodiless error
    /// answers hyper writes itself (400, 414, 431) leave as Stripe's JSON error object.
    /// The check costs a prefix comparison per write (`HTTP/1.1 4`), and a scan of the
    /// head for 4xx answers only.
    pub struct EdgeIo {
        #[pin]
        inner: TokioIo<TcpStream>,
        // A replacement answer still to be written, from this offset.
        pending: Option<(Bytes, usize)>,
        // When this connection's next answer may be written (answers leave in rounds).
        turn: Turn,
    }
}

impl EdgeIo {
    fn new(stream: TcpStream) -> Self {
        Self {
            inner: TokioIo::new(stream),
            pending: None,
            turn: Turn::default(),
        }
    }

    /// The socket.
    pub fn into_inner(self) -> TcpStream {
        self.inner.into_inner()
    }

    /// Writes what remains of a replacement answer.
    fn poll_pending(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let mut this = self.project();
        while let Some((bytes, offset)) = this.pending.as_mut() {
            let n = ready!(hyper::rt::Write::poll_write(this.inner.as_mut(), cx, &bytes[*offset..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *offset += n;
            if *offset >= bytes.len() {
                *this.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Ready when a write may go: the connection's turn has come (answers leave in
    /// rounds) and what remains of a replacement answer is written.
    fn poll_before_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.as_mut().project().turn.poll_write_turn(cx));
        self.poll_pending(cx)
    }

    /// Replaces `buf` (all of it reported written) when it is one of hyper's own answers.
    fn replace(self: Pin<&mut Self>, buf: &[u8]) -> Option<usize> {
        let answer = edge_answer(hyper_own_error(buf)?)?;
        *self.project().pending = Some((answer, 0));
        Some(buf.len())
    }
}

impl hyper::rt::Read for EdgeIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_read(cx, buf)
    }
}

impl hyper::rt::Write for EdgeIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        ready!(self.as_mut().poll_before_write(cx))?;
        if let Some(n) = self.as_mut().replace(buf) {
            let _ = self.as_mut().poll_pending(cx)?;
            return Poll::Ready(Ok(n));
        }
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.as_mut().poll_before_write(cx))?;
        if let [only] = bufs {
            if let Some(n) = self.as_mut().replace(only) {
                let _ = self.as_mut().poll_pending(cx)?;
                return Poll::Ready(Ok(n));
            }
        }
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.as_mut().poll_pending(cx))?;
        let this = self.project();
        let flushed = ready!(this.inner.poll_flush(cx));
        this.turn.flushed();
        Poll::Ready(flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.as_mut().poll_pending(cx))?;
        self.project().inner.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn each_answer_waits_for_its_round_and_a_flush_ends_the_turn() {
        use hyper::rt::Write;
        use std::future::poll_fn;
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let mut io = EdgeIo::new(listener.accept().await.unwrap().0);
        for answer in [&b"first "[..], b"second"] {
            // The first write of an answer waits in a round; once released it goes.
            let first = poll_fn(|cx| Poll::Ready(Pin::new(&mut io).poll_write(cx, answer))).await;
            assert!(first.is_pending(), "an answer waits for its round");
            let n = poll_fn(|cx| Pin::new(&mut io).poll_write(cx, answer)).await.unwrap();
            assert_eq!(n, answer.len());
            assert!(matches!(io.turn, Turn::Writing));
            poll_fn(|cx| Pin::new(&mut io).poll_flush(cx)).await.unwrap();
            assert!(matches!(io.turn, Turn::Idle), "a flush ends the turn");
        }
        let mut got = [0u8; 12];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"first second");
    }

    #[test]
    fn only_hypers_own_bodiless_errors_are_replaced() {
        let own = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(hyper_own_error(own), Some(431));
        assert_eq!(
            hyper_own_error(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"),
            Some(400)
        );
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n";
        assert_eq!(hyper_own_error(ours), None);
        assert_eq!(hyper_own_error(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), None);
        assert_eq!(
            hyper_own_error(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}"),
            None
        );
        let answer = edge_answer(431).unwrap();
        let text = std::str::from_utf8(&answer).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(text.contains("content-type: application/json\r\n"));
        let body: serde_json::Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }
}
