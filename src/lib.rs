//! The `fauxpay` command: its flags ([`cli`]) and the one-command demo ([`demo`]). The
//! binary (`main.rs`) parses the flags and calls into the crates that do the work:
//! `fauxpay-provider` (`serve`), `fauxpay-merchant` (`merchant`), `fauxpay-loadtests`
//! (`load`, `report`) and `fauxpay-faults` (`profiles`). The CLI is a library target so
//! that the tests parse the commands that docker-compose.yml and the Kubernetes manifests
//! run with the very same [`cli::Cli`].

#![deny(unsafe_code)]

pub mod cli;
pub mod demo;
