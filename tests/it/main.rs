//! The `fauxpay` command's integration tests, in one binary: the built binary for
//! `serve`, `load`, `demo`, `report` and exit codes; the crates' layering; the
//! deployment files (docker-compose, Kubernetes) parsed with the real CLI; the CI
//! recipes run as written; the docs' links; the dashboard and reports in a real browser.

mod architecture;
mod browser;
mod ci_recipe;
mod cli;
mod compose;
mod demo;
mod doc_blocks;
mod docs;
mod durable;
mod flag_tables;
mod kubernetes;
mod load;
mod load_fulfillment;
mod load_rate;
mod markdown;
mod nemesis;
mod report_html;
mod storefront;
mod support;
