//! The boundaries Cargo cannot check, and the ones it does, asserted.
//!
//! Cargo's dependency graph is the layering (`cargo tree`): [`the_crates_are_the_layers`]
//! reads it with `cargo metadata` and fails if a crate gains a dependency its layer must
//! not have (the provider on goose or clap, the load generator on the provider, the fault
//! engine on anything of fauxpay). Inside a crate, Cargo allows modules that import each
//! other in a loop and does not know which modules are the HTTP edge, so this file parses
//! the library crates' sources for that: no module imports a module that imports it back
//! (directly or around a loop), and only the provider's `http/` knows axum and hyper.
//!
//! A module is a file (`crates/provider/src/http/routes.rs` is `crate::http::routes`; an
//! inline `mod tests { … }` is a module of its own). Every `crate::…`, `super::…` and
//! `self::…` path in code (not in comments), in `use` lines or inline, is an edge to the
//! longest module it names: `crate::Config` is an edge to `crate` (whose `lib.rs`
//! re-exports it), so a re-export can close a loop too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file: its module path, and its code lines, each with the module it is in.
struct Source {
    file: PathBuf,
    module: Vec<String>,
    lines: Vec<(Vec<String>, String)>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    let mut module = vec!["crate".to_string()];
    module.extend(parts);
    module
}

/// The code of a line: without `//` comments (doc comments included).
fn code(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    match line.find(" //") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn load(root: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| !f.ends_with("main.rs"))
        .map(|file| {
            let module = module_of(root, &file);
            let text = std::fs::read_to_string(&file).unwrap();
            let mut current = module.clone();
            let mut lines = Vec::new();
            for line in text.lines() {
                let code = code(line);
                // An inline module (`mod tests {`): by convention the rest of the file.
                if let Some(name) = code
                    .trim_start()
                    .strip_prefix("mod ")
                    .and_then(|r| r.strip_suffix(" {"))
                {
                    current = module.iter().cloned().chain([name.trim().to_string()]).collect();
                }
                lines.push((current.clone(), code.to_string()));
            }
            Source { file, module, lines }
        })
        .collect()
}

/// Every path starting with `crate`, `super` or `self` in `code`, with `{…}` groups
/// expanded one item at a time.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':') {
                continue;
            }
            expand(&code[at..], String::new(), &mut out);
        }
    }
    out
}

/// Expands `a::b::{c, d::e}` into `a::b::c`, `a::b::d::e`.
fn expand(text: &str, prefix: String, out: &mut Vec<String>) {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    let head = format!("{prefix}{}", &text[..end]);
    if text[end..].starts_with('{') && head.ends_with("::") {
        let inner = &text[end + 1..];
        let mut depth = 0;
        let mut item_start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(inner[item_start..i].trim(), head.clone(), out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(inner[item_start..i].trim(), head.clone(), out);
                    item_start = i + 1;
                }
                _ => {}
            }
        }
    } else {
        out.push(head.trim_end_matches("::").to_string());
    }
}

/// The module a path names (the longest known module it starts with), seen from `from`.
fn target(path: &str, from: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut segments = path.split("::");
    let mut resolved: Vec<String> = match segments.next()? {
        "crate" => vec!["crate".into()],
        "self" => from.to_vec(),
        "super" => from[..from.len().saturating_sub(1)].to_vec(),
        _ => return None,
    };
    let mut rest: Vec<&str> = segments.collect();
    while rest.first() == Some(&"super") {
        resolved.pop();
        rest.remove(0);
    }
    let mut best = modules.contains(&resolved).then(|| resolved.clone());
    for seg in rest {
        resolved.push(seg.to_string());
        if modules.contains(&resolved) {
            best = Some(resolved.clone());
        }
    }
    best
}

type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

fn graph(sources: &[Source]) -> Graph {
    let mut modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    for s in sources {
        modules.extend(s.lines.iter().map(|(m, _)| m.clone()));
    }
    let mut g: Graph = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for s in sources {
        for (from, code) in &s.lines {
            for path in paths(code) {
                if let Some(to) = target(&path, from, &modules) {
                    if &to != from {
                        g.entry(from.clone()).or_default().insert(to);
                    }
                }
            }
        }
    }
    g
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.g[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn name(m: &[String]) -> String {
    m.join("::")
}

/// The library crates whose modules must not form a loop.
const LIBRARIES: &[&str] = &[
    "crates/faults",
    "crates/provider",
    "crates/merchant",
    "crates/loadtests",
];

fn crate_sources(dir: &str) -> Vec<Source> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join("src"))
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    for dir in LIBRARIES {
        let g = graph(&crate_sources(dir));
        let found = cycles(&g);
        let report: Vec<String> = found
            .iter()
            .map(|c| {
                let members: BTreeSet<&Vec<String>> = c.iter().collect();
                let edges: Vec<String> = c
                    .iter()
                    .flat_map(|m| {
                        g[m].iter()
                            .filter(|t| members.contains(t))
                            .map(move |t| format!("  {} -> {}", name(m), name(t)))
                    })
                    .collect();
                format!("{dir}: a cycle among {} modules:\n{}", c.len(), edges.join("\n"))
            })
            .collect();
        assert!(report.is_empty(), "{}", report.join("\n"));
    }
    // The checker sees the edges it should: a sanity check that it can fail.
    let g = graph(&crate_sources("crates/provider"));
    let m = |m: &str| m.split("::").map(String::from).collect::<Vec<_>>();
    assert!(g[&m("crate::http::routes")].contains(&m("crate::pipeline")));
}

#[test]
fn the_checker_finds_a_cycle() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    let mut g = Graph::new();
    g.insert(m("crate::a"), [m("crate::b")].into());
    g.insert(m("crate::b"), [m("crate::c")].into());
    g.insert(m("crate::c"), [m("crate::a")].into());
    g.insert(m("crate::d"), [m("crate::a")].into());
    assert_eq!(cycles(&g), vec![vec![m("crate::a"), m("crate::b"), m("crate::c")]]);
    assert_eq!(
        paths("use super::{ids::{A, B}, table::Keyed};"),
        vec!["super::ids::A", "super::ids::B", "super::table::Keyed"]
    );
}

/// Lines of `sources` that mention `needle` in code.
fn mentions(sources: &[Source], needle: &str) -> Vec<String> {
    sources
        .iter()
        .flat_map(|s| {
            s.lines
                .iter()
                .enumerate()
                .filter(|(_, (_, code))| code.contains(needle))
                .map(move |(i, (_, code))| format!("{}:{}: {}", s.file.display(), i + 1, code.trim()))
        })
        .collect()
}

#[test]
fn only_the_provider_http_edge_knows_axum_and_hyper() {
    let core: Vec<Source> = crate_sources("crates/provider")
        .into_iter()
        .filter(|s| !name(&s.module).starts_with("crate::http"))
        .collect();
    assert!(core.len() > 50, "the provider's core was read");
    for needle in ["axum", "hyper", "StatusCode", "tower"] {
        let found = mentions(&core, needle);
        assert!(
            found.is_empty(),
            "the provider's core mentions {needle}:\n{}",
            found.join("\n")
        );
    }
}

/// Each workspace crate's direct dependencies, by package name (`cargo metadata`).
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let normal = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            (p["name"].as_str().unwrap().to_string(), normal)
        })
        .collect()
}

#[test]
fn the_crates_are_the_layers() {
    let deps = dependencies();
    let fauxpay = |name: &str| -> BTreeSet<String> {
        deps[name]
            .iter()
            .filter(|d| d.starts_with("fauxpay"))
            .cloned()
            .collect()
    };
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    // Who may build on whom: the binary wires the four; nothing else knows another layer
    // beyond these edges (the load generator knows the provider only through HTTP).
    assert_eq!(fauxpay("fauxpay-faults"), set(&[]));
    assert_eq!(fauxpay("fauxpay-error-chain"), set(&[]));
    assert_eq!(
        fauxpay("fauxpay-provider"),
        set(&["fauxpay-error-chain", "fauxpay-faults"])
    );
    assert_eq!(fauxpay("fauxpay-merchant"), set(&["fauxpay-error-chain"]));
    assert_eq!(fauxpay("fauxpay-loadtests"), set(&[]));
    assert_eq!(
        fauxpay("fauxpay"),
        set(&[
            "fauxpay-faults",
            "fauxpay-loadtests",
            "fauxpay-merchant",
            "fauxpay-provider"
        ])
    );
    // What a layer must not drag in: the provider embeds without goose, the stores or the
    // CLI; the domain knows no clap; the fault engine no I/O.
    for (krate, forbidden) in [
        ("fauxpay-provider", &["goose", "redis", "tokio-postgres", "clap"][..]),
        ("fauxpay-merchant", &["goose", "clap", "hyper"][..]),
        ("fauxpay-faults", &["tokio", "hyper", "axum", "reqwest", "clap"][..]),
    ] {
        for name in forbidden {
            assert!(!deps[krate].contains(*name), "{krate} depends on {name}");
        }
    }
}
