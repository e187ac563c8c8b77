//! [`Client`]: how a delivery reaches its endpoint. An `http://` endpoint gets an HTTP/1.1
//! POST over a pool of keep-alive connections per host, made with hyper's client
//! connection directly: the endpoint's URL is split into host and path with a few string
//! operations (no URL parser, redirect policy or proxy matcher on every send). reqwest
//! did all three per delivery: about 39k instructions a delivery, three deliveries a
//! payment, measured with `bench/callgrind.sh webhook`. `https://` endpoints go through
//! reqwest and its TLS; that client is built on the first one (building it reads the
//! system's CA certificates, a few milliseconds no provider without such an endpoint
//! should pay at start).
//! Used by the delivery engine (`crate::webhooks::delivery`), which decides
//! what to send, when, and what an answer means.
//!
//! A pooled connection the receiver closed while it sat idle can fail a send. When hyper
//! gives the request back (it never left) or the connection closed or was reset with no
//! answer byte after it left, the request is sent once more on a new connection, as
//! browsers do on a reused keep-alive connection. The receiver had closed that connection, so it almost
//! always never read the request; if it had, it sees the event twice, which is what at
//! least once means for every webhook receiver.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST, USER_AGENT};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::TcpStream;

/// The `User-Agent` of every delivery (Stripe's, with fauxpay's name).
const USER_AGENT_VALUE: &str = "Stripe/1.0 (+https://stripe.com/docs/webhooks) fauxpay";
const JSON_UTF8: &str = "application/json; charset=utf-8";
/// The most of a receiver's answer that is read (Stripe ignores the body; a longer one
/// only costs the connection, which is not reused).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why a send got no status.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("no answer within {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    #[error("{0}")]
    Failed(String),
}

type Sender = SendRequest<Full<Bytes>>;

/// Sends deliveries; see the module docs.
pub struct Client {
    /// Idle keep-alive connections per `host:port`.
    idle: Mutex<HashMap<Box<str>, Vec<Sender>>>,
    /// The most idle connections kept per host.
    max_idle: usize,
    /// For `https://` endpoints, built on the first.
    tls: OnceLock<reqwest::Client>,
}

/// An `http://` URL split into what a request needs.
#[derive(Debug, PartialEq, Eq)]
struct Plain<'a> {
    /// `host:port`, as connected to (port 80 when the URL has none).
    authority: std::borrow::Cow<'a, str>,
    /// The host (and port) as the URL writes it, for the `Host` header.
    host: &'a str,
    /// The path and query, `/` at least.
    path: &'a str,
}

/// Splits a plain `http://` URL; `None` for anything else (https, user info), which goes
/// through reqwest.
fn plain(url: &str) -> Option<Plain<'_>> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
        _ => return None, // "http://host?q" or no path: rare, left to reqwest
    };
    if authority.is_empty() || authority.contains('@') || path.contains('#') {
        return None;
    }
    let has_port = match authority.rfind(']') {
        Some(bracket) => authority[bracket..].contains(':'),
        None => authority.contains(':'),
    };
    let host = authority;
    let authority = if has_port {
        authority.into()
    } else {
        format!("{authority}:80").into()
    };
    Some(Plain { authority, host, path })
}

impl Client {
    /// A client keeping at most `max_idle` idle connections per host.
    pub fn new(max_idle: usize) -> Self {
        Self {
            idle: Mutex::default(),
            max_idle,
            tls: OnceLock::new(),
        }
    }

    /// POSTs `body` to `url` with its `Stripe-Signature`; the status of the answer, read
    /// whole (up to 64 KiB), within `timeout`.
    pub async fn post(&self, url: &str, signature: String, body: Bytes, timeout: Duration) -> Result<u16, SendError> {
        let send = async {
            match plain(url) {
                Some(target) => self.post_plain(&target, signature, body).await,
                None => self.post_reqwest(url, signature, body).await,
            }
        };
        tokio::time::timeout(timeout, send)
            .await
            .unwrap_or(Err(SendError::Timeout(timeout)))
    }

    async fn post_plain(&self, target: &Plain<'_>, signature: String, body: Bytes) -> Result<u16, SendError> {
        let request = || {
            hyper::Request::post(target.path)
                .header(HOST, target.host)
                .header(USER_AGENT, USER_AGENT_VALUE)
                .header(CONTENT_TYPE, JSON_UTF8)
                .header("stripe-signature", signature.as_str())
                .body(Full::new(body.clone()))
                .map_err(|e| SendError::Failed(format!("invalid request: {e}")))
        };
        let (mut sender, answer) = match self.checkout(&target.authority) {
            Some(mut pooled) => match pooled.try_send_request(request()?).await {
                Ok(answer) => (pooled, answer),
                Err(mut e) => match e.take_message() {
                    // The idle connection was gone before the request left: a new one.
                    Some(request) => self.send_fresh(&target.authority, request).await?,
                    // It closed or was reset with no answer byte after the request left
                    // (the receiver had closed it while idle): once more on a new one.
                    None if closed_under_us(e.error()) => self.send_fresh(&target.authority, request()?).await?,
                    None => return Err(failed(e.error())),
                },
            },
            None => self.send_fresh(&target.authority, request()?).await?,
        };
        let status = answer.status().as_u16();
        let whole = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .is_ok();
        if whole {
            // Ready again once hyper has seen the end of the answer.
            if sender.ready().await.is_ok() {
                self.check_in(&target.authority, sender);
            }
        }
        Ok(status)
    }

    /// Sends on a new connection to `authority`.
    async fn send_fresh(
        &self,
        authority: &str,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<(Sender, hyper::Response<hyper::body::Incoming>), SendError> {
        let stream = TcpStream::connect(authority)
            .await
            .map_err(|e| SendError::Failed(format!("tcp connect error: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed(&e))?;
        tokio::spawn(async move {
            // Ends when the connection closes; its errors reach the request as well.
            let _ = connection.await;
        });
        let answer = sender.send_request(request).await.map_err(|e| failed(&e))?;
        Ok((sender, answer))
    }

    fn checkout(&self, authority: &str) -> Option<Sender> {
        let mut idle = self.idle.lock();
        let senders = idle.get_mut(authority)?;
        while let Some(sender) = senders.pop() {
            if sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    fn check_in(&self, authority: &str, sender: Sender) {
        let mut idle = self.idle.lock();
        match idle.get_mut(authority) {
            Some(senders) if senders.len() < self.max_idle => senders.push(sender),
            Some(_) => {}
            None => {
                idle.insert(authority.into(), vec![sender]);
            }
        }
    }

    async fn post_reqwest(&self, url: &str, signature: String, body: Bytes) -> Result<u16, SendError> {
        let tls = self.tls.get_or_init(|| {
            reqwest::Client::builder()
                .user_agent(USER_AGENT_VALUE)
                .pool_max_idle_per_host(self.max_idle)
                // A redirect is an answer like any other non-2xx (a failed delivery), as
                // on the plain-http path; Stripe does not follow them either.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default()
        });
        let answer = tls
            .post(url)
            .header(CONTENT_TYPE, JSON_UTF8)
            .header("stripe-signature", signature)
            .body(body)
            .send()
            .await
            .map_err(|e| failed(&e))?;
        let status = answer.status().as_u16();
        // Read the body (up to 64 KiB, as on the plain path), so the connection can be
        // reused; a longer one is dropped unread, with its connection.
        let body = http::Response::<reqwest::Body>::from(answer).into_body();
        let _ = Limited::new(body, MAX_ANSWER_BYTES).collect().await;
        Ok(status)
    }
}

/// Whether a send on a reused connection failed because the receiver had closed it: the
/// connection ended, or was reset, before any byte of an answer.
fn closed_under_us(e: &hyper::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    e.is_incomplete_message()
        || io.is_some_and(|io| matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted))
}

/// An error and its causes, on one line.
fn failed(e: &dyn std::error::Error) -> SendError {
    SendError::Failed(fauxpay_error_chain::error_chain(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Option<(String, String)> {
        plain(url).map(|p| (p.authority.into_owned(), p.path.to_string()))
    }

    #[test]
    fn the_host_header_is_the_host_as_the_url_writes_it() {
        assert_eq!(plain("http://localhost/hook").unwrap().host, "localhost");
        assert_eq!(plain("http://127.0.0.1:8080/hook").unwrap().host, "127.0.0.1:8080");
    }

    #[test]
    fn plain_urls_split_into_authority_and_path() {
        let s = |a: &str, p: &str| Some((a.to_string(), p.to_string()));
        assert_eq!(
            split("http://127.0.0.1:8080/webhooks/stripe"),
            s("127.0.0.1:8080", "/webhooks/stripe")
        );
        assert_eq!(split("http://localhost/hook?x=1"), s("localhost:80", "/hook?x=1"));
        assert_eq!(split("http://[::1]:9000/h"), s("[::1]:9000", "/h"));
        assert_eq!(split("http://[::1]/h"), s("[::1]:80", "/h"));
    }

    #[test]
    fn everything_else_goes_through_reqwest() {
        for url in [
            "https://example.test/hook",
            "http://user:pw@host/hook",
            "http://host",
            "http://host?x=1",
            "http:///path",
            "http://host/path#frag",
        ] {
            assert_eq!(split(url), None, "{url}");
        }
    }
}
