//! Who may use the admin API and the dashboard, in one place: the admin token (a bearer
//! header, scheme in any case, or the dashboard's cookie; compared in constant time), the
//! refusal of cross-site requests on every route that changes state (a page on another
//! site can post a form or a `no-cors` fetch to a developer's local fauxpay), the `Host`
//! allow-list that keeps DNS rebinding out when fauxpay listens on loopback, and the
//! throttle on the dashboard's token form.
//!
//! The Stripe-facing routes (`/v1`, the 3-D Secure page and its authenticate endpoints)
//! are not cross-site checked: a storefront on another origin calls them, as it calls
//! Stripe. Only the `Host` allow-list applies to them.

use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderValue, Method};
use parking_lot::Mutex;

/// The dashboard's cookie, set by its token form.
pub const COOKIE: &str = "fauxpay_admin";

/// Whether `headers` present `token`: `Authorization: Bearer TOKEN` (the scheme in any
/// case, RFC 9110 §11.1), or the dashboard's cookie. Compared in constant time: a timing
/// difference must not tell how much of a guess was right.
pub fn presents_token(headers: &HeaderMap, token: &str) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| bearer(v))
        .is_some_and(|presented| same(presented, token));
    bearer
        || headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .filter(|(name, _)| *name == COOKIE)
            .any(|(_, value)| same(value.as_bytes(), token))
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(value: &HeaderValue) -> Option<&[u8]> {
    let (scheme, presented) = value.as_bytes().split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then(|| presented.trim_ascii())
}

/// `presented == token`, in constant time (lengths differ: unequal; the token's length is
/// not the secret).
pub fn same(presented: &[u8], token: &str) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(presented, token.as_bytes()))
}

/// Whether a request that changes state comes from another site: `Sec-Fetch-Site` says
/// `cross-site` or `same-site` (a browser sets it, and a page cannot), or, from a browser
/// too old to send it, its `Origin` is not the `Host` it was sent to. Browsers send them on
/// every cross-origin POST (forms and `no-cors` fetches included); clients that are not
/// browsers (curl, SDKs, the load generator) send neither and pass. (The dashboard's pages
/// send no referrer, so their own forms carry `Origin: null`: `Sec-Fetch-Site:
/// same-origin` is what vouches for them.)
pub fn cross_site(method: &Method, headers: &HeaderMap) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return false;
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return !matches!(site, "same-origin" | "none");
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => false,
        Some(origin) => {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .unwrap_or("");
            authority.is_empty() || !authority.eq_ignore_ascii_case(host)
        }
    }
}

/// The host names fauxpay answers to on loopback by default.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Whether the request's `Host` (its name, without the port) is allowed; every host is,
/// when `allowed` is empty.
pub fn host_allowed(allowed: &[String], headers: &HeaderMap) -> bool {
    if allowed.is_empty() {
        return true;
    }
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.rfind(':') {
        // `[::1]:12111`, `localhost:12111`; a bare `[::1]` has its colons inside brackets.
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    };
    // As sent, a name is usually spelled as allowed: compared as it is first.
    allowed.iter().any(|a| a == name || a.eq_ignore_ascii_case(name))
}

/// Failed logins on the dashboard's token form: at most [`Throttle::FAILURES`] in a window
/// of [`Throttle::WINDOW`]; past that, every attempt is refused until the window ends
/// (500 guesses used to take 3.2 s).
#[derive(Default)]
pub struct Throttle {
    state: Mutex<Option<(Instant, u32)>>,
}

impl Throttle {
    pub const FAILURES: u32 = 10;
    pub const WINDOW: Duration = Duration::from_secs(60);

    /// `None` when an attempt may be made now, else how long until one may.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        let state = self.state.lock();
        match *state {
            Some((start, n)) if n >= Self::FAILURES && now < start + Self::WINDOW => Some(start + Self::WINDOW - now),
            _ => None,
        }
    }

    pub fn failed(&self, now: Instant) {
        let mut state = self.state.lock();
        match state.as_mut() {
            Some((start, n)) if now < *start + Self::WINDOW => *n += 1,
            _ => *state = Some((now, 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_token_is_a_bearer_in_any_case_or_the_cookie() {
        let ok = |pairs: &[(&'static str, &str)]| presents_token(&headers(pairs), "s3cret");
        assert!(ok(&[("authorization", "Bearer s3cret")]));
        assert!(ok(&[("authorization", "bearer s3cret")]));
        assert!(ok(&[("authorization", "BEARER  s3cret ")]));
        assert!(ok(&[("cookie", "a=b; fauxpay_admin=s3cret")]));
        assert!(!ok(&[("authorization", "Bearer s3cre")]));
        assert!(!ok(&[("authorization", "Bearer s3cret2")]));
        assert!(!ok(&[("authorization", "Basic s3cret")]));
        assert!(!ok(&[("authorization", "Bearer")]));
        assert!(!ok(&[("cookie", "fauxpay_admin=nope")]));
        assert!(!ok(&[]));
    }

    #[test]
    fn cross_site_state_changes_are_told_apart_from_same_site_and_non_browsers() {
        let post = Method::POST;
        let h = |pairs: &[(&'static str, &str)]| headers(pairs);
        assert!(cross_site(
            &post,
            &h(&[("host", "127.0.0.1:12111"), ("origin", "https://evil.example")])
        ));
        assert!(cross_site(
            &post,
            &h(&[("host", "127.0.0.1:12111"), ("sec-fetch-site", "cross-site")])
        ));
        assert!(cross_site(
            &post,
            &h(&[("host", "127.0.0.1:12111"), ("origin", "null")])
        ));
        assert!(!cross_site(
            &post,
            &h(&[("host", "127.0.0.1:12111"), ("origin", "http://127.0.0.1:12111")])
        ));
        assert!(!cross_site(
            &post,
            &h(&[("host", "127.0.0.1:12111"), ("sec-fetch-site", "same-origin")])
        ));
        assert!(!cross_site(&post, &h(&[("host", "127.0.0.1:12111")])), "curl");
        assert!(!cross_site(&Method::GET, &h(&[("origin", "https://evil.example")])));
    }

    #[test]
    fn hosts_are_allowed_by_name_whatever_the_port() {
        let loopback: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        let ok = |host: &str| host_allowed(&loopback, &headers(&[("host", host)]));
        assert!(ok("localhost:12111") && ok("127.0.0.1") && ok("[::1]:8080") && ok("LOCALHOST"));
        assert!(!ok("evil.example") && !ok("evil.example:12111") && !ok("127.0.0.1.evil.example"));
        assert!(!host_allowed(&loopback, &HeaderMap::new()));
        assert!(host_allowed(&[], &headers(&[("host", "anything")])));
    }

    #[test]
    fn the_login_throttle_holds_after_ten_failures_for_a_minute() {
        let t = Throttle::default();
        let start = Instant::now();
        for _ in 0..Throttle::FAILURES {
            assert_eq!(t.wait(start), None);
            t.failed(start);
        }
        assert_eq!(t.wait(start), Some(Throttle::WINDOW));
        assert!(t.wait(start + Duration::from_secs(30)).is_some());
        assert_eq!(t.wait(start + Throttle::WINDOW), None);
    }
}
