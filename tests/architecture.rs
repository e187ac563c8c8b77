//! The crate's boundaries, checked over its source: no module imports a module that
//! imports it back (directly or around a loop), only the provider's HTTP edge knows
//! axum and hyper, the fault engine imports nothing else of the crate, and domain types
//! do not know the CLI.
//!
//! A module is a file (`src/provider/http/routes.rs` is `crate::provider::http::routes`;
//! an inline `mod tests { … }` is a module of its own). Every `crate::…`, `super::…` and
//! `self::…` path in code (not in comments), in `use` lines or inline, is an edge to the
//! longest module it names: `crate::provider::Config` is an edge to `crate::provider`
//! (whose `mod.rs` re-exports it), so a re-export can close a loop too.

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

fn crate_sources() -> Vec<Source> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let g = graph(&crate_sources());
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
            format!("a cycle among {} modules:\n{}", c.len(), edges.join("\n"))
        })
        .collect();
    assert!(report.is_empty(), "{}", report.join("\n"));
    // The checker sees the edges it should: a sanity check that it can fail.
    let provider = |m: &str| m.split("::").map(String::from).collect::<Vec<_>>();
    assert!(g[&provider("crate::provider::http::routes")].contains(&provider("crate::provider::pipeline")));
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

/// Lines of `sources` under `prefix` (a module path) that mention `needle` in code.
fn mentions(sources: &[Source], prefix: &str, needle: &str) -> Vec<String> {
    sources
        .iter()
        .filter(|s| name(&s.module).starts_with(prefix))
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
    let sources = crate_sources();
    let core: Vec<Source> = sources
        .into_iter()
        .filter(|s| {
            name(&s.module).starts_with("crate::provider") && !name(&s.module).starts_with("crate::provider::http")
        })
        .collect();
    for needle in ["axum", "hyper", "StatusCode", "tower"] {
        let found = mentions(&core, "crate::provider", needle);
        assert!(
            found.is_empty(),
            "the provider's core mentions {needle}:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn the_fault_engine_imports_nothing_else_of_the_crate() {
    let sources = crate_sources();
    let found: Vec<String> = mentions(&sources, "crate::faults", "crate::")
        .into_iter()
        .filter(|line| line.split("crate::").skip(1).any(|rest| !rest.starts_with("faults")))
        .collect();
    assert!(found.is_empty(), "faults imports other modules:\n{}", found.join("\n"));
}

#[test]
fn domain_types_do_not_know_the_cli() {
    let sources = crate_sources();
    for prefix in ["crate::provider", "crate::faults", "crate::merchant"] {
        let found = mentions(&sources, prefix, "clap");
        assert!(found.is_empty(), "{prefix} uses clap:\n{}", found.join("\n"));
    }
}
