//! The docs' flag tables and clap's own definitions agree: every flag a command takes is
//! in its table (with its environment variable, if it has one, and its default), and every
//! flag a table names exists. `fauxpay load` is checked for its own flags (goose's are
//! flattened into it and documented by goose, listed in one row).

use std::collections::BTreeSet;

use clap::CommandFactory;
use fauxpay::cli::Cli;

use crate::markdown::root;

/// The rows of the first table headed `| flag | default |…` in `page`: (flags named in
/// the first cell, the default cell, the whole row).
fn table(page: &str) -> Vec<(Vec<String>, String, String)> {
    let text = std::fs::read_to_string(root().join(page)).unwrap();
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("| flag | default |") {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with('|') {
                break;
            }
            if line.starts_with("|---") {
                continue;
            }
            let cells = cells(line);
            if cells.len() < 3 {
                continue;
            }
            let flags = cells[0]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(str::to_string)
                .collect();
            rows.push((flags, cells[1].clone(), line.to_string()));
        }
    }
    assert!(!rows.is_empty(), "{page} has no flag table");
    rows
}

/// A table row's cells (a `\|` inside a cell is not a border).
fn cells(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut escaped = false;
    for c in line.trim().trim_start_matches('|').trim_end_matches('|').chars() {
        match c {
            '|' if !escaped => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
        escaped = c == '\\';
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

fn check(page: &str, command: &str, only_heading: Option<&str>) {
    let cli = Cli::command();
    let mut cmd = cli
        .find_subcommand(command)
        .unwrap_or_else(|| panic!("no {command}"))
        .clone();
    cmd.build();
    let rows = table(page);
    let documented: BTreeSet<String> = rows.iter().flat_map(|(f, _, _)| f.clone()).collect();
    let mut defined = BTreeSet::new();
    let mut problems = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if matches!(long, "help" | "version") {
            continue;
        }
        if let Some(heading) = only_heading {
            if arg.get_help_heading() != Some(heading) {
                continue;
            }
        }
        let flag = format!("--{long}");
        defined.insert(flag.clone());
        let Some((_, default, row)) = rows.iter().find(|(f, _, _)| f.contains(&flag)) else {
            problems.push(format!("the `fauxpay {command}` table lacks {flag}"));
            continue;
        };
        if let Some(env) = arg.get_env() {
            let env = env.to_string_lossy();
            if !row.contains(&*env) {
                problems.push(format!("the row of {flag} does not name its env {env}"));
            }
        }
        for value in arg.get_default_values() {
            let value = value.to_string_lossy();
            if !value.is_empty() && value != "false" && !default.contains(&*value) {
                problems.push(format!("{flag}'s default is {value}, the table says {default:?}"));
            }
        }
    }
    let unknown: Vec<&String> = documented.difference(&defined).collect();
    let goose_row = rows.iter().any(|(_, _, r)| r.starts_with("| goose's options"));
    let unknown: Vec<&&String> = unknown
        .iter()
        .filter(|f| !(goose_row && cmd.get_arguments().any(|a| a.get_long() == Some(&f[2..]))))
        .filter(|f| {
            !rows
                .iter()
                .any(|(_, _, r)| r.starts_with("| goose's options") && r.contains(f.as_str()))
        })
        .collect();
    if !unknown.is_empty() {
        problems.push(format!("it names flags `fauxpay {command}` does not take: {unknown:?}"));
    }
    assert!(problems.is_empty(), "{page}:\n{}", problems.join("\n"));
}

#[test]
fn the_serve_table_is_clap_s() {
    check("docs/serve.md", "serve", None);
}

#[test]
fn the_load_table_is_clap_s() {
    check("docs/load.md", "load", Some("fauxpay"));
}

#[test]
fn the_demo_table_is_clap_s() {
    check("docs/merchants.md", "demo", None);
}
