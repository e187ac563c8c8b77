//! The dashboard's pages as HTML, from the view models of
//! [`crate::dashboard`]. maud's `html!` escapes every interpolated value
//! (metadata, keys, ids, profile text: anything a request could have put there); only
//! the embedded stylesheet and script are written raw. Style and script are inline, so
//! a page is one response and works offline.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::dashboard::{
    self, clock, money, outcome_text, story, Overview, PaymentFilter, PaymentList, PaymentView, ProfileView,
    RequestFilter, OUTCOME_CLASSES,
};
use crate::journal::{Outcome, RequestRecord};
use crate::state::ledger::{LedgerRecord, MovementKind};

const STYLE: &str = include_str!("style.css");
const SCRIPT: &str = include_str!("live.js");

/// The base path of the dashboard's pages.
pub const UI: &str = "/__fauxpay/ui";

/// Which page a layout is for (the navigation marks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Payments,
    Duplicates,
    Requests,
    Profile,
    None,
}

/// Whether a page refreshes itself while the provider changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    On,
    Off,
}

pub fn layout(title: &str, tab: Tab, live: Live, marker: &str, body: Markup) -> Markup {
    let nav = [
        (Tab::Overview, "/__fauxpay/".to_string(), "Overview"),
        (Tab::Payments, format!("{UI}/payments"), "Payments"),
        (Tab::Duplicates, format!("{UI}/duplicates"), "Duplicates"),
        (Tab::Requests, format!("{UI}/requests"), "Requests"),
        (Tab::Profile, format!("{UI}/profile"), "Profile"),
    ];
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                // No icon to fetch (a browser asks for /favicon.ico otherwise).
                link rel="icon" href="data:,";
                title { (title) " · fauxpay" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    span.brand { "fauxpay" }
                    nav {
                        @for (t, href, label) in &nav {
                            a href=(href) class=[(*t == tab).then_some("here")] { (label) }
                        }
                    }
                    span.live #live { @if live == Live::On { "live" } }
                }
                main data-live=(if live == Live::On { "on" } else { "off" }) data-marker=(marker) {
                    (body)
                }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
}

fn payment_link(id: &str) -> Markup {
    html! { a.mono href={ (UI) "/payments/" (id) } { (id) } }
}

fn status_tag(status: &str) -> Markup {
    let class = match status {
        "succeeded" | "complete" => "tag ok",
        "requires_payment_method" | "canceled" | "failed" | "expired" => "tag bad",
        _ => "tag warn",
    };
    html! { span class=(class) { (status) } }
}

fn outcome_tag(r: &RequestRecord) -> Markup {
    let class = match r.outcome {
        Outcome::Status(s) if (200..300).contains(&s) => "tag ok",
        Outcome::Status(s) if s >= 500 => "tag bad",
        Outcome::Status(_) => "tag warn",
        _ => "tag bad",
    };
    html! { span class=(class) { (outcome_text(r.outcome)) } }
}

fn card(n: impl maud::Render, label: &str, bad: bool) -> Markup {
    html! { div class=(if bad { "card bad" } else { "card" }) { div.n { (n) } div.l { (label) } } }
}

pub fn overview(o: &Overview) -> Markup {
    let s = &o.summary;
    html! {
        h1 { "Overview" }
        div.cards {
            (card(o.payment_intents, "payment intents", false))
            @if o.checkout_sessions > 0 {
                (card(format!("{} / {}", o.checkout_sessions_complete, o.checkout_sessions), "checkout sessions paid", false))
            }
            (card(s.charges, "charges captured", false))
            (card(s.refunds, "refunds", false))
            (card(s.duplicate_groups.len(), "orders charged twice or more", !s.duplicate_groups.is_empty()))
            (card(s.duplicate_charges, "extra charges", s.duplicate_charges > 0))
            (card(s.over_refunds.len(), "over-refunds", !s.over_refunds.is_empty()))
            (card(s.blocked_duplicates, "duplicates blocked", false))
            (card(format!("{:.1}", o.requests_per_second), "requests/s (last 10 s)", false))
        }
        h2 { "Money" }
        div.scroll {
            table {
                thead { tr { th { "currency" } th { "captured" } th { "refunded" } } }
                tbody {
                    @if s.captured.is_empty() { tr { td colspan="3" .muted { "Nothing captured yet." } } }
                    @for (cur, amount) in &s.captured {
                        tr {
                            td { (cur) }
                            td { (money(*amount, cur)) }
                            td { (money(s.refunded.get(cur).copied().unwrap_or(0), cur)) }
                        }
                    }
                }
            }
        }
        h2 { "Fault profile" }
        p {
            a href={ (UI) "/profile" } { strong { (o.profile.name) } } " — " (o.profile.description)
            br;
            span.muted { "active since " (clock(o.profile.activated_ms)) " UTC · seed " (o.profile.seed) " · " (o.profile.rules) " rules · " (o.requests_logged) " requests seen" }
        }
        h2 { "Faults injected" }
        @if o.faults.is_empty() { p.muted { "None so far." } } @else {
            div.scroll { table {
                thead { tr { th { "fault" } th { "times" } } }
                tbody { @for (label, n) in &o.faults { tr { td { code { (label) } } td { (n) } } } }
            } }
        }
        h2 { "Duplicate groups" }
        @if s.duplicate_groups.is_empty() { p.muted { "No order was charged twice." } } @else {
            div.scroll { table {
                thead { tr { th { "order (correlation id)" } th { "charges" } th { "captured" } th { "too much" } } }
                tbody {
                    @for g in s.duplicate_groups.iter().take(dashboard::MAX_ROWS) {
                        tr {
                            td { a.mono href={ (UI) "/duplicates#" (g.correlation_id) } { (g.correlation_id) } }
                            td { @for c in &g.charges { (payment_link(&c.id)) " " } }
                            td { (money(g.captured_amount, &g.currency)) }
                            td { (money(g.extra_amount, &g.currency)) }
                        }
                    }
                }
            } }
        }
        @if !s.over_refunds.is_empty() {
            h2 { "Over-refunds" }
            div.scroll { table {
                thead { tr { th { "charge" } th { "order" } th { "captured" } th { "already refunded" } th { "asked" } th { "key" } } }
                tbody { @for r in &s.over_refunds { tr {
                    td { (payment_link(&r.charge)) }
                    td.mono { (r.correlation_id.as_deref().unwrap_or("")) }
                    td { (r.captured) } td { (r.already_refunded) } td { (r.requested) }
                    td.mono { (r.idempotency_key.as_deref().unwrap_or("")) }
                } } }
            } }
        }
    }
}

const INTENT_STATUSES: &[&str] = &[
    "succeeded",
    "requires_payment_method",
    "requires_confirmation",
    "requires_action",
    "requires_capture",
    "processing",
    "canceled",
];

pub fn payments(list: &PaymentList, filter: &PaymentFilter) -> Markup {
    html! {
        h1 { "Payments" }
        form.filters method="get" action={ (UI) "/payments" } {
            label { "id, order or correlation id" input type="search" name="q" value=(filter.q) placeholder="pi_…, ch_…, order-42"; }
            label { "status" select name="status" {
                option value="" selected[filter.status.is_empty()] { "any" }
                @for s in INTENT_STATUSES { option value=(s) selected[filter.status == *s] { (s) } }
                option value="failed" selected[filter.status == "failed"] { "failed (charges)" }
            } }
            button type="submit" { "Search" }
        }
        h2 { "Payment intents" }
        div.scroll { table {
            thead { tr { th { "id" } th { "status" } th { "amount" } th { "order" } th { "metadata" } th { "created" } } }
            tbody {
                @if list.intents.is_empty() { tr { td colspan="6" .muted { "No payment intent matches." } } }
                @for pi in &list.intents { tr {
                    td { (payment_link(&pi.id.as_str())) }
                    td { (status_tag(pi.status.as_str())) }
                    td { (money(pi.amount, pi.currency.code())) }
                    td.mono { (pi.correlation_id.as_ref().map_or("", |c| c.as_str())) }
                    td.mono { @for (k, v) in pi.metadata.iter() { (k) "=" (v) " " } }
                    td { (clock(pi.created.get() as u64 * 1000)) }
                } }
            }
        } }
        @if list.more_intents { p.muted { "Showing the newest " (dashboard::MAX_ROWS) "; search to narrow." } }
        h2 { "Charges" }
        div.scroll { table {
            thead { tr { th { "id" } th { "status" } th { "amount" } th { "captured" } th { "refunded" } th { "payment intent" } th { "order" } } }
            tbody {
                @if list.charges.is_empty() { tr { td colspan="7" .muted { "No charge matches." } } }
                @for ch in &list.charges { tr {
                    td { (payment_link(&ch.id.as_str())) }
                    td { (status_tag(if ch.decline().is_some() { "failed" } else if ch.captured { "succeeded" } else { "uncaptured" })) }
                    td { (money(ch.amount, ch.currency.code())) }
                    td { (money(ch.amount_captured.get(), ch.currency.code())) }
                    td { (money(ch.amount_refunded(), ch.currency.code())) }
                    td { @if let Some(pi) = ch.payment_intent { (payment_link(&pi.as_str())) } }
                    td.mono { (ch.correlation_id.as_ref().map_or("", |c| c.as_str())) }
                } }
            }
        } }
        @if list.more_charges { p.muted { "Showing the newest " (dashboard::MAX_ROWS) "; search to narrow." } }
    }
}

pub fn requests_table(records: &[RequestRecord]) -> Markup {
    html! {
        div.scroll { table {
            thead { tr {
                th { "time (UTC)" } th { "request" } th { "key" } th { "attempt" } th { "fault" }
                th { "committed" } th { "client saw" } th { "object" }
            } }
            tbody {
                @if records.is_empty() { tr { td colspan="8" .muted { "No request." } } }
                @for r in records { tr {
                    td.mono { (clock(r.time_ms)) }
                    td { span.mono { (r.method.as_str()) " " (r.path) } br; span.mono.muted { (r.request_id.as_str()) } }
                    td.mono { (r.idempotency_key.as_ref().map_or("—", |k| k.as_str())) }
                    td { (r.attempt) }
                    td { @if let Some(f) = &r.fault { span.tag.warn { (f) } } }
                    td { (r.committed_status.map_or("—".to_string(), |s| s.to_string())) }
                    td { (outcome_tag(r)) @if r.replayed { " " span.tag { "replay" } } }
                    td { @if let Some(o) = r.object { (payment_link(&o.as_str())) } }
                } }
            }
        } }
    }
}

fn ledger_table(records: &[std::sync::Arc<LedgerRecord>]) -> Markup {
    html! {
        div.scroll { table {
            thead { tr { th { "seq" } th { "movement" } th { "amount" } th { "key" } th { "request" } th { "fault" } th { "time (UTC)" } } }
            tbody {
                @if records.is_empty() { tr { td colspan="7" .muted { "No money moved." } } }
                @for r in records { tr {
                    td { (r.seq) }
                    td {
                        span.mono { (match r.id() { crate::state::ledger::MovementId::Charge(c) => c.to_string(), crate::state::ledger::MovementId::Refund(re) => re.to_string() }) }
                        " " (match r.kind() { MovementKind::Charge => "charge", MovementKind::Refund => "refund" })
                        @if r.duplicate { " " span.tag.bad { "duplicate" } }
                    }
                    td { (money(r.amount(), r.currency().code())) }
                    td.mono { (r.idempotency_key.as_ref().map_or("—", |k| k.as_str())) }
                    td.mono { (r.request_id.as_str()) }
                    td { @if let Some(f) = r.fault() { span.tag.warn { (f) } } }
                    td.mono { (clock(r.created_ms)) }
                } }
            }
        } }
    }
}

pub fn payment(v: &PaymentView) -> Markup {
    html! {
        @if let Some(pi) = &v.intent {
            h1 { "Payment " span.mono { (pi.id.as_str()) } }
            dl.kv {
                dt { "status" } dd { (status_tag(pi.status.as_str())) }
                dt { "amount" } dd { (money(pi.amount, pi.currency.code())) " · received " (money(pi.amount_received.get(), pi.currency.code())) }
                dt { "order (correlation id)" } dd.mono { (v.correlation_id.as_deref().unwrap_or("—")) }
                @if let Some(cs) = &v.checkout_session {
                    dt { "checkout session" } dd { span.mono { (cs.id.as_str()) } " " (status_tag(cs.status.as_str())) }
                }
                dt { "payment method" } dd.mono { (pi.payment_method.map_or("—".to_string(), |p| p.to_string())) }
                dt { "created" } dd { (clock(pi.created.get() as u64 * 1000)) " UTC" }
                @if let Some(e) = pi.last_payment_error() { dt { "last error" } dd { (e.code) ": " (e.message) } }
                dt { "metadata" } dd { @for (k, val) in pi.metadata.iter() { code { (k) } " = " code { (val) } br; } }
            }
        } @else {
            h1 { "Charge " @if let Some(c) = v.charges.first() { span.mono { (c.id.as_str()) } } }
        }
        @if !v.siblings.is_empty() {
            p.why { "The same order has other payment intents: " @for s in &v.siblings { (payment_link(&s.as_str())) " " } }
        }
        h2 { "Charges" }
        div.scroll { table {
            thead { tr { th { "id" } th { "amount" } th { "captured" } th { "refunded" } th { "outcome" } } }
            tbody {
                @if v.charges.is_empty() { tr { td colspan="5" .muted { "No charge." } } }
                @for c in &v.charges { tr {
                    td.mono { (c.id.as_str()) }
                    td { (money(c.amount, c.currency.code())) }
                    td { (money(c.amount_captured.get(), c.currency.code())) }
                    td { (money(c.amount_refunded(), c.currency.code())) }
                    td { @if let Some(d) = c.decline() { span.tag.bad { (d.decline_code) } } @else { span.tag.ok { "paid" } } }
                } }
            }
        } }
        h2 { "Attempts (request journal)" }
        p.muted { "Every request for this payment or its order: its key, the fault that acted, what was committed and what the client saw." }
        (requests_table(&v.requests))
        h2 { "Ledger records" }
        (ledger_table(&v.ledger))
    }
}

pub fn duplicates(groups: &[(dashboard::DuplicateGroup, Vec<RequestRecord>)]) -> Markup {
    html! {
        h1 { "Duplicates" }
        @if groups.is_empty() { p.muted { "No order was charged twice." } }
        @for (g, requests) in groups {
            @let s = story::tell(g, requests);
            section.story id=(g.correlation_id) {
                h3 { (s.headline) }
                p { "Charges: " @for c in &g.charges { (payment_link(&c.id)) " (" (money(c.amount, &g.currency)) @if let Some(k) = &c.idempotency_key { ", key " code { (k) } } ") " } }
                ol {
                    @for step in &s.steps {
                        li {
                            span.mono.muted { (step.time) } " " (step.text)
                            @if step.charged.is_some() { " " span.tag.bad { "charged" } }
                            @if step.in_doubt { " " span.tag.warn { "client in doubt" } }
                        }
                    }
                }
                @for reason in &s.why { div.why { (reason) } }
            }
        }
    }
}

pub fn requests(records: &[RequestRecord], filter: &RequestFilter) -> Markup {
    html! {
        h1 { "Requests" }
        form.filters method="get" action={ (UI) "/requests" } {
            label { "outcome" select name="outcome" {
                @for (value, label) in OUTCOME_CLASSES { option value=(value) selected[filter.outcome == *value] { (label) } }
                @if !filter.outcome.is_empty() && !OUTCOME_CLASSES.iter().any(|(v, _)| *v == filter.outcome) {
                    option value=(filter.outcome) selected { (filter.outcome) }
                }
            } }
            label { "fault" input type="search" name="fault" value=(filter.fault) placeholder="any, none, drop_response…"; }
            label { "id, key, path or order" input type="search" name="q" value=(filter.q); }
            button type="submit" { "Filter" }
        }
        p.muted { "Newest first, at most " (dashboard::MAX_ROWS) " (the journal keeps the most recent requests)." }
        (requests_table(records))
    }
}

/// The profile page; `errors` and `pasted` when a pasted profile was refused, `notice`
/// after a change.
pub fn profile(
    p: &ProfileView,
    bundled: &[&str],
    pasted: Option<&str>,
    errors: &[String],
    notice: Option<&str>,
) -> Markup {
    html! {
        h1 { "Fault profile" }
        @if let Some(n) = notice { p.notice { (n) } }
        dl.kv {
            dt { "name" } dd { strong { (p.name) } }
            dt { "description" } dd { (p.description) }
            dt { "seed" } dd { (p.seed) }
            dt { "rules" } dd { (p.rules) }
            dt { "active since" } dd { (clock(p.activated_ms)) " UTC" }
        }
        h2 { "Source" }
        pre { (p.source) }
        h2 { "Pick a bundled profile" }
        form.filters method="post" action={ (UI) "/profile" } {
            label { "profile" select name="bundled" { @for b in bundled { option value=(b) selected[*b == p.name] { (b) } } } }
            button type="submit" { "Activate" }
        }
        h2 #paste { "Paste a profile (TOML or JSON)" }
        @if !errors.is_empty() {
            div.errors #profile-errors {
                strong { "The profile was refused; the active one is unchanged." }
                ul { @for e in errors { li { (e) } } }
            }
        }
        form method="post" action={ (UI) "/profile" } {
            textarea name="toml" spellcheck="false" { (pasted.unwrap_or("")) }
            p { button type="submit" { "Validate and activate" } }
        }
        h2 { "Reset the provider" }
        form method="post" action={ (UI) "/reset" } {
            p { "Forgets every payment, idempotency key, ledger record and logged request. The profile stays." }
            label style="flex-direction:row;align-items:center;gap:.4rem" {
                input type="checkbox" name="confirm" value="yes"; "Yes, forget everything"
            }
            p { button.danger type="submit" { "Reset" } }
        }
    }
}

/// The token form (with `--admin-token`, before a cookie is set).
pub fn login(failed: bool) -> Markup {
    html! {
        h1 { "Admin token" }
        p { "This provider runs with " code { "--admin-token" } ". Enter it to open the dashboard (kept in a cookie for this browser)." }
        @if failed { p.errors { "That is not the admin token." } }
        form.filters method="post" action={ (UI) "/login" } {
            label { "token" input type="password" name="token" autocomplete="current-password"; }
            button type="submit" { "Open" }
        }
    }
}

/// A short page for an unknown payment or a refused action.
pub fn message(title: &str, text: &str) -> Markup {
    html! { h1 { (title) } p { (text) } p { a href="/__fauxpay/" { "Back to the overview" } } }
}
