//! The `fauxpay` command's integration tests, in one binary: the built binary for
//! `serve`, `load`, `demo`, `report` and exit codes; the crates' layering; the
//! deployment files (docker-compose, Kubernetes) parsed with the real CLI; the dashboard
//! and reports in a real browser.

mod architecture;
mod browser;
mod cli;
mod compose;
mod demo;
mod durable;
mod kubernetes;
mod load;
mod load_fulfilment;
mod load_rate;
mod report_html;
mod support;
