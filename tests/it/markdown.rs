//! The project's Markdown, read with pulldown-cmark (not by hand): every file, its code
//! blocks with the text before them, its links, and its headings' anchors as GitHub
//! makes them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// The repository's root (this package's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file a person reads in the repository (not build output, not
/// installed packages), relative to the root.
pub fn files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    walk(&path, out);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out.sort();
    out.into_iter()
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect()
}

/// A fenced code block: its info string (`sh`, `yaml`…), its text, the prose of the
/// paragraph before it, and the `<!-- docs-test: … -->` comment right before it, if any
/// (what the docs test is told about the block), and the line it starts on.
pub struct CodeBlock {
    pub info: String,
    pub text: String,
    pub before: String,
    pub annotation: Option<String>,
    pub line: usize,
}

pub fn code_blocks(markdown: &str) -> Vec<CodeBlock> {
    let mut out = Vec::new();
    let mut prose = String::new();
    let mut annotation: Option<String> = None;
    let mut current: Option<CodeBlock> = None;
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => {
                if let Some(rest) = html.trim().strip_prefix("<!-- docs-test:") {
                    annotation = Some(rest.trim_end_matches("-->").trim().to_string());
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                current = Some(CodeBlock {
                    info,
                    text: String::new(),
                    before: std::mem::take(&mut prose),
                    annotation: annotation.take(),
                    line: markdown[..range.start].lines().count() + 1,
                });
            }
            Event::End(TagEnd::CodeBlock) => out.extend(current.take()),
            Event::Text(t) => match current.as_mut() {
                Some(block) => block.text.push_str(&t),
                None => prose.push_str(&t),
            },
            Event::Code(t) => prose.push_str(&t),
            Event::Start(Tag::Paragraph) => {
                prose.clear();
                annotation = None;
            }
            _ => {}
        }
    }
    out
}

/// Every link and image destination.
pub fn links(markdown: &str) -> Vec<String> {
    Parser::new(markdown)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

/// The anchors of a file's headings, as GitHub makes them: the heading's text in lower
/// case, without punctuation, spaces as hyphens; a repeated one gets `-1`, `-2`…
pub fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = heading.take().unwrap_or_default();
                let slug = slug(&text);
                let mut unique = slug.clone();
                let mut n = 0;
                while out.contains(&unique) {
                    n += 1;
                    unique = format!("{slug}-{n}");
                }
                out.insert(unique);
            }
            _ => {}
        }
    }
    out
}

fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn anchors_are_githubs() {
    let md = "# fauxpay\n## `fauxpay serve`\n## Dashboard (`GET /__fauxpay/`)\n## Long runs (`--retain`)\n## A\n## A\n";
    let a = anchors(md);
    for want in [
        "fauxpay",
        "fauxpay-serve",
        "dashboard-get-__fauxpay",
        "long-runs---retain",
        "a",
        "a-1",
    ] {
        assert!(a.contains(want), "{want} in {a:?}");
    }
}
