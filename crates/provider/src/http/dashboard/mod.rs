//! The dashboard's HTTP edge: `GET /__fauxpay/` (the overview) and the pages under
//! `/__fauxpay/ui/` (payments, one payment, duplicates, requests, profile), the forms
//! that change the provider (profile, reset, admin token), and `/__fauxpay/ui/live`,
//! the change marker the pages poll to update themselves.
//!
//! Handlers are thin: they read a view model from [`crate::dashboard`] and
//! render it with [`pages`]. With `--admin-token`, every page wants the token as a
//! bearer header or as the `fauxpay_admin` cookie that the token form sets
//! (`HttpOnly`, `SameSite=Strict`, so another site's form cannot post with it). Every
//! page carries a Content-Security-Policy that lets only its own inline script run (by
//! hash), so even a value that escaped escaping could not execute.

pub mod pages;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post, MethodRouter};
use base64::Engine;
use maud::Markup;
use sha2::{Digest, Sha256};

use self::pages::{Live, Tab, UI};
use crate::app::Provider;
use crate::dashboard::{self as view, clip, PaymentFilter, RequestFilter};
use fauxpay_faults as faults;

type AppState = Arc<Provider>;

/// The cookie the token form sets.
use super::guard::{self, Throttle, COOKIE};

/// The largest pasted profile accepted (the admin API's limit).
const MAX_PROFILE_BYTES: usize = super::extract::MAX_BODY_BYTES;

/// Only the page's own script (by hash) and inline style; requests to this origin only.
static CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(include_str!("live.js")));
    HeaderValue::from_str(&format!(
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{hash}'; connect-src 'self'; \
         img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
});

/// The dashboard's routes: all but the token form behind the admin token, when there is one.
pub fn routes(provider: AppState) -> Vec<(&'static str, MethodRouter<AppState>)> {
    let guard =
        |route: MethodRouter<AppState>| route.route_layer(middleware::from_fn_with_state(provider.clone(), auth));
    vec![
        ("/__fauxpay/", guard(get(overview))),
        ("/__fauxpay/ui", get(|| async { Redirect::to("/__fauxpay/") })),
        ("/__fauxpay/ui/payments", guard(get(payments))),
        ("/__fauxpay/ui/payments/{id}", guard(get(payment))),
        ("/__fauxpay/ui/duplicates", guard(get(duplicates))),
        ("/__fauxpay/ui/requests", guard(get(requests))),
        ("/__fauxpay/ui/profile", guard(get(profile).post(swap_profile))),
        ("/__fauxpay/ui/reset", guard(post(reset))),
        ("/__fauxpay/ui/live", guard(get(live))),
        ("/__fauxpay/ui/login", {
            let throttle = Arc::new(Throttle::default());
            post(move |state, headers, form| login(state, headers, form, throttle.clone()))
        }),
    ]
}

/// Whether `headers` carry the admin token (bearer or cookie), or none is required.
fn authorised(app: &Provider, headers: &HeaderMap) -> bool {
    app.config
        .admin_token
        .as_deref()
        .is_none_or(|token| guard::presents_token(headers, token))
}

async fn auth(State(app): State<AppState>, req: Request, next: Next) -> Response {
    if guard::cross_site(req.method(), req.headers()) {
        return (
            StatusCode::FORBIDDEN,
            "fauxpay's dashboard refuses forms posted from another site (their Origin or Sec-Fetch-Site says so).\n",
        )
            .into_response();
    }
    if authorised(&app, req.headers()) {
        return next.run(req).await;
    }
    if req.uri().path() == "/__fauxpay/ui/live" {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    page(
        StatusCode::UNAUTHORIZED,
        &app,
        "Admin token",
        Tab::None,
        Live::Off,
        pages::login(false),
    )
}

/// A whole page: layout, status, and the security headers.
fn page(status: StatusCode, app: &Provider, title: &str, tab: Tab, live: Live, body: Markup) -> Response {
    let html = pages::layout(title, tab, live, &view::change_marker(app), body).into_string();
    let mut resp = (status, Html(html)).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, CSP.clone());
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn param<'a>(q: &'a HashMap<String, String>, name: &str) -> &'a str {
    q.get(name).map_or("", |v| clip(v))
}

async fn overview(State(app): State<AppState>) -> Response {
    let o = view::overview(&app);
    page(
        StatusCode::OK,
        &app,
        "Overview",
        Tab::Overview,
        Live::On,
        pages::overview(&o),
    )
}

async fn payments(State(app): State<AppState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let filter = PaymentFilter {
        q: param(&q, "q").to_string(),
        status: param(&q, "status").to_string(),
    };
    let list = view::payments(&app, &filter);
    page(
        StatusCode::OK,
        &app,
        "Payments",
        Tab::Payments,
        Live::On,
        pages::payments(&list, &filter),
    )
}

async fn payment(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    match view::payment(&app, clip(&id)) {
        Some(v) => page(
            StatusCode::OK,
            &app,
            clip(&id),
            Tab::Payments,
            Live::On,
            pages::payment(&v),
        ),
        None => page(
            StatusCode::NOT_FOUND,
            &app,
            "Unknown payment",
            Tab::Payments,
            Live::Off,
            pages::message(
                "Unknown payment",
                &format!("fauxpay has no payment intent or charge '{}'.", clip(&id)),
            ),
        ),
    }
}

async fn duplicates(State(app): State<AppState>) -> Response {
    let groups = view::duplicates(&app);
    page(
        StatusCode::OK,
        &app,
        "Duplicates",
        Tab::Duplicates,
        Live::On,
        pages::duplicates(&groups),
    )
}

async fn requests(State(app): State<AppState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let filter = RequestFilter {
        outcome: param(&q, "outcome").to_string(),
        fault: param(&q, "fault").to_string(),
        q: param(&q, "q").to_string(),
    };
    let records = view::requests(&app, &filter);
    page(
        StatusCode::OK,
        &app,
        "Requests",
        Tab::Requests,
        Live::On,
        pages::requests(&records, &filter),
    )
}

fn bundled_names() -> Vec<&'static str> {
    faults::bundled::BUNDLED.iter().map(|(n, _)| *n).collect()
}

async fn profile(State(app): State<AppState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let notice = q.contains_key("activated").then_some("Profile activated.");
    let body = pages::profile(&view::profile(&app), &bundled_names(), None, &[], notice);
    page(StatusCode::OK, &app, "Profile", Tab::Profile, Live::Off, body)
}

async fn swap_profile(State(app): State<AppState>, Form(form): Form<HashMap<String, String>>) -> Response {
    let (origin, text) = match (form.get("bundled"), form.get("toml")) {
        (Some(name), _) => match faults::bundled::text(name) {
            Some(text) => (format!("fault-profiles/{name}.toml"), text.to_string()),
            None => return refused(&app, "", vec![format!("unknown bundled profile '{}'", clip(name))]),
        },
        (None, Some(text)) if text.len() > MAX_PROFILE_BYTES => {
            return refused(
                &app,
                "",
                vec![format!("a profile may be at most {MAX_PROFILE_BYTES} bytes")],
            )
        }
        (None, Some(text)) => ("pasted profile".to_string(), text.clone()),
        (None, None) => return refused(&app, "", vec!["choose a bundled profile or paste one".to_string()]),
    };
    match faults::parse_profile_text(&origin, &text) {
        Ok(profile) => {
            app.swap_profile(profile, text);
            Redirect::to(&format!("{UI}/profile?activated=1")).into_response()
        }
        Err(e) => refused(&app, &text, e.lines()),
    }
}

fn refused(app: &Provider, pasted: &str, errors: Vec<String>) -> Response {
    let body = pages::profile(&view::profile(app), &bundled_names(), Some(pasted), &errors, None);
    page(StatusCode::BAD_REQUEST, app, "Profile", Tab::Profile, Live::Off, body)
}

async fn reset(State(app): State<AppState>, Form(form): Form<HashMap<String, String>>) -> Response {
    if form.get("confirm").map(String::as_str) != Some("yes") {
        let body = pages::message(
            "Not reset",
            "Tick “Yes, forget everything” to reset the provider; nothing was changed.",
        );
        return page(
            StatusCode::BAD_REQUEST,
            &app,
            "Not reset",
            Tab::Profile,
            Live::Off,
            body,
        );
    }
    app.reset();
    tracing::info!("state reset from the dashboard: payments, idempotency keys and ledger cleared");
    Redirect::to("/__fauxpay/").into_response()
}

async fn live(State(app): State<AppState>) -> Response {
    let mut resp = view::change_marker(&app).into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The token form: the cookie when the token is right; at most ten wrong guesses a
/// minute, then 429 until the minute ends; never from another site.
async fn login(
    State(app): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
    throttle: Arc<Throttle>,
) -> Response {
    if guard::cross_site(&axum::http::Method::POST, &headers) {
        return (
            StatusCode::FORBIDDEN,
            "fauxpay's token form refuses posts from another site.\n",
        )
            .into_response();
    }
    let now = std::time::Instant::now();
    if let Some(wait) = throttle.wait(now) {
        let mut resp = (
            StatusCode::TOO_MANY_REQUESTS,
            "Too many wrong admin tokens: the form is closed for a minute.\n",
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return resp;
    }
    let presented = form.get("token").map(String::as_str).unwrap_or("");
    match &app.config.admin_token {
        Some(token) if guard::same(presented.as_bytes(), token) => {
            let mut resp = Redirect::to("/__fauxpay/").into_response();
            // The token is what the operator chose; only cookie-safe ones can be kept.
            if let Ok(v) =
                HeaderValue::from_str(&format!("{COOKIE}={token}; Path=/__fauxpay; HttpOnly; SameSite=Strict"))
            {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Some(_) => {
            throttle.failed(now);
            page(
                StatusCode::UNAUTHORIZED,
                &app,
                "Admin token",
                Tab::None,
                Live::Off,
                pages::login(true),
            )
        }
        None => Redirect::to("/__fauxpay/").into_response(),
    }
}
