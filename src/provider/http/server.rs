//! The provider's HTTP server: the accept loop, one task per connection, graceful
//! shutdown, and [`ConnControl`], which lets a handler end its own connection abruptly.
//!
//! Injected network faults need more than a response: `drop_response` closes the
//! connection without sending a byte, `reset` closes it with a TCP RST (zero linger),
//! `hang` holds it. A handler asks for that through the [`ConnControl`] in its request's
//! extensions; the connection task then drops the HTTP connection (and so the socket)
//! without writing anything. A held connection is handed to a small task of its own
//! that keeps only the socket (and what the request must keep alive: its idempotency
//! claim, its in-flight count) until the hold ends, the client goes away or the server
//! stops: HTTP buffers and the request's state are freed at once, so thousands of held
//! requests cost little memory and no CPU. On shutdown, listening stops, idle and held
//! connections close, and in-flight requests finish before [`serve_connections`]
//! returns.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tower_service::Service;

use crate::provider::pipeline::{Abort, Hold};

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

/// Serves `app` on `listener` until `shutdown` resolves, then waits for in-flight
/// requests to finish.
pub async fn serve_connections<S>(
    listener: TcpListener,
    app: S,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    S: Service<hyper::Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, app.clone(), stop_rx.clone(), done_tx.clone()));
                }
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
    let _ = stop_tx.send(true);
    drop(done_tx);
    // Every connection task holds a sender; `None` means all have finished.
    let _ = done_rx.recv().await;
    Ok(())
}

async fn connection<S>(stream: TcpStream, app: S, mut stop: watch::Receiver<bool>, _done: mpsc::Sender<()>)
where
    S: Service<hyper::Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let _ = stream.set_nodelay(true);
    let control = Arc::new(ConnControl::default());
    let service = {
        let control = control.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(control.clone());
            let mut app = app.clone();
            async move { app.call(req).await }
        })
    };
    let mut conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
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
                    tokio::spawn(hold_then_close(stream, hold, stop, _done));
                    return;
                }
            },
            _ = stop.changed(), if !stopping => {
                stopping = true;
                std::pin::Pin::new(&mut conn).graceful_shutdown();
            }
        }
    }
}

/// Keeps a held connection's socket open, sending nothing, until the hold ends, the
/// client goes away or the server stops; then closes it (FIN).
async fn hold_then_close(stream: TcpStream, hold: Hold, mut stop: watch::Receiver<bool>, _done: mpsc::Sender<()>) {
    let Hold { duration, keep } = hold;
    let until = tokio::time::sleep(duration);
    tokio::pin!(until);
    let mut scratch = [0u8; 256];
    loop {
        if *stop.borrow() {
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
