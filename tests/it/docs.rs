//! The docs hold together: every relative link in every Markdown file (README, docs/,
//! ARCHITECTURE.md, CONTRIBUTING.md, the folders' READMEs) names a file or folder that
//! exists, and a `#fragment` names a heading of that file. README stays a front door.

use std::path::Path;

use crate::markdown::{anchors, files, links, root};

#[test]
fn every_relative_link_in_the_markdown_resolves() {
    let files = files();
    assert!(files.len() >= 10, "the Markdown files were found: {files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match link.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                root().join(file)
            } else {
                root().join(file.parent().unwrap_or(Path::new(""))).join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", file.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                if target.extension().is_some_and(|e| e == "md") {
                    let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                    if !headings.contains(fragment) {
                        broken.push(format!("{}: {link}: no heading #{fragment}", file.display()));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 50, "only {checked} relative links were checked");
}

#[test]
fn nothing_links_outside_the_repository() {
    for file in files() {
        let text = std::fs::read_to_string(root().join(&file)).unwrap();
        assert!(
            !text.contains("../shared/"),
            "{} names ../shared/, which users' clones lack",
            file.display()
        );
    }
}

#[test]
fn readme_is_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: the detail belongs in docs/");
    for command in ["cargo run --release -- demo", "cargo test"] {
        assert!(readme.contains(command), "README lacks {command}");
    }
    for doc in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = doc.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            assert!(
                readme.contains(&format!("(docs/{name})")),
                "README's map lacks docs/{name}"
            );
        }
    }
}
