//! Every command block of README.md, CONTRIBUTING.md and docs/ runs as written, in a
//! test, the way a new user pastes them: one shell per file, its blocks in order (so a
//! server a block starts serves the blocks after it, and `kill %1` stops it), in a
//! scratch directory, with the `fauxpay` just built on the `PATH` (and `cargo run
//! --release --` meaning it). A block fails the test when a command in it fails, when it
//! exits otherwise than its page says, or when its output lacks what the page quotes.
//!
//! What the test is told about a block is an HTML comment right before it, which a reader
//! on the forge does not see: `<!-- docs-test: … -->`, with `;`-separated items:
//! - `skip: REASON`: not run here (Docker, Kubernetes, the test suite itself, a benchmark
//!   of minutes); counted and named in the test's output;
//! - `background URL`: a server the page starts in the foreground ("in another
//!   terminal"): run in the background, then URL must answer before the next block;
//! - `exit N`: the block's last command exits N (the page says so);
//! - `expect "TEXT"`: the block's output holds TEXT (what the page quotes).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::markdown::{code_blocks, root};

/// What a block's annotation asks.
#[derive(Default)]
struct Plan {
    skip: Option<String>,
    background: Option<String>,
    exit: i32,
    expect: Vec<String>,
}

fn plan(annotation: Option<&str>) -> Plan {
    let mut p = Plan::default();
    for item in annotation
        .unwrap_or_default()
        .split(';')
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        if let Some(reason) = item.strip_prefix("skip:") {
            p.skip = Some(reason.trim().to_string());
        } else if let Some(url) = item.strip_prefix("background") {
            p.background = Some(url.trim().to_string());
        } else if let Some(n) = item.strip_prefix("exit") {
            p.exit = n.trim().parse().unwrap_or_else(|_| panic!("docs-test: exit {n}?"));
        } else if let Some(text) = item.strip_prefix("expect") {
            let text = text.trim();
            let quoted = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
            let text = quoted.unwrap_or_else(|| panic!("docs-test: expect takes a quoted text, not {text}"));
            p.expect.push(text.replace("\\\"", "\""));
        } else {
            panic!("docs-test: unknown item {item:?}");
        }
    }
    p
}

/// The files whose blocks are run, in the order a reader meets them.
fn pages() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    let mut out = vec!["README.md".to_string()];
    out.extend(docs);
    out.push("CONTRIBUTING.md".to_string());
    out
}

struct Block {
    page: String,
    line: usize,
    plan: Plan,
}

/// Runs one page's blocks in one shell; returns the blocks run and those skipped.
fn run_page(page: &str, scratch: &Path) -> (Vec<Block>, Vec<(String, String)>) {
    let text = std::fs::read_to_string(root().join(page)).unwrap();
    let mut script =
        String::from("set -o pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null' EXIT\nexec 2>&1\n");
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    for block in code_blocks(&text) {
        if !matches!(block.info.as_str(), "sh" | "bash" | "shell") {
            continue;
        }
        let plan = plan(block.annotation.as_deref());
        let at = format!("{page}:{}", block.line);
        if let Some(reason) = plan.skip {
            skipped.push((at, reason));
            continue;
        }
        let i = ran.len();
        let body = block.text.replace("cargo run --release -- ", "fauxpay ");
        script.push_str(&format!("echo '@@docs-block {i}'\n"));
        if let Some(url) = &plan.background {
            script.push_str(&format!(
                "{{\n{body}\n}} > background-{i}.log 2>&1 &\n\
                 curl -fsS --retry 60 --retry-connrefused --retry-delay 1 --retry-max-time 60 '{url}' > /dev/null \
                 || {{ echo '@@docs-failed {i} not ready'; cat background-{i}.log; exit 99; }}\n"
            ));
        } else if plan.exit == 0 {
            script.push_str(&format!(
                "trap 'echo \"@@docs-failed {i} $?\"; exit 99' ERR\n{{\n{body}\n}}\ntrap - ERR\n"
            ));
        } else {
            script.push_str(&format!(
                "{{\n{body}\n}}\nrc=$?\n[ $rc -eq {} ] || {{ echo \"@@docs-failed {i} exit $rc\"; exit 99; }}\n",
                plan.exit
            ));
        }
        ran.push(Block {
            page: page.to_string(),
            line: block.line,
            plan,
        });
    }
    if ran.is_empty() {
        return (ran, skipped);
    }
    script.push_str("echo '@@docs-done'\n");
    let dir = scratch.join(page.replace('/', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::os::unix::fs::symlink(root().join("fault-profiles"), dir.join("fault-profiles"));
    let _ = std::os::unix::fs::symlink(root().join("examples"), dir.join("examples"));
    std::fs::write(dir.join("blocks.sh"), &script).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_fauxpay")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    // The shell and all it starts form one process group, ended as a whole afterwards
    // (a server a block starts in the background outlives its shell otherwise); its
    // output goes to a file, which no leftover process can hold open.
    let log = std::fs::File::create(dir.join("output.log")).unwrap();
    let mut child = Command::new("timeout")
        .args(["300", "bash", "blocks.sh"])
        .current_dir(&dir)
        .env("PATH", path)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let status = child.wait().unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{}", child.id())])
        .stderr(std::process::Stdio::null())
        .status();
    let output = std::fs::read_to_string(dir.join("output.log")).unwrap_or_default();
    let failed = output
        .lines()
        .find_map(|l| l.strip_prefix("@@docs-failed "))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or("")
                .parse::<usize>()
                .unwrap_or(usize::MAX)
        });
    if let Some(i) = failed {
        let at = ran.get(i).map(|b| format!("{}:{}", b.page, b.line)).unwrap_or_default();
        panic!("the block at {at} failed as written:\n{output}");
    }
    assert!(
        status.success() && output.contains("@@docs-done"),
        "{page}'s blocks did not all run ({status:?}):\n{output}"
    );
    // Each block's output: between its marker and the next.
    for (i, block) in ran.iter().enumerate() {
        let start = output.find(&format!("@@docs-block {i}\n")).unwrap();
        let end = output[start + 1..]
            .find("@@docs-")
            .map_or(output.len(), |e| start + 1 + e);
        let own = &output[start..end];
        for want in &block.plan.expect {
            assert!(
                own.contains(want.as_str()),
                "the block at {}:{} no longer prints {want:?}, as the page says:\n{own}",
                block.page,
                block.line
            );
        }
    }
    (ran, skipped)
}

#[test]
fn every_command_block_in_the_docs_runs_as_written() {
    for tool in ["curl", "jq", "bash", "timeout"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            fauxpay_testkit::provider::missing_tool("the docs' command blocks", &format!("{tool} is not installed"));
            return;
        }
    }
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("doc-blocks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let (mut ran, mut skipped) = (0, Vec::new());
    for page in pages() {
        let (r, s) = run_page(&page, &scratch);
        ran += r.len();
        skipped.extend(s);
    }
    assert!(ran >= 15, "only {ran} blocks ran");
    use std::io::Write;
    let mut line = format!("\ndocs' command blocks: {ran} run, {} skipped:\n", skipped.len());
    for (at, why) in &skipped {
        line.push_str(&format!("  {at}: {why}\n"));
    }
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[test]
fn annotations_read_as_documented() {
    let p = plan(Some(
        r#"exit 1; expect "FAIL double charges"; expect "\"param\":\"x\"""#,
    ));
    assert_eq!((p.exit, p.expect.len(), p.skip.is_none()), (1, 2, true));
    assert_eq!(p.expect[1], r#""param":"x""#);
    assert_eq!(plan(Some("skip: needs Docker")).skip.as_deref(), Some("needs Docker"));
    assert_eq!(
        plan(Some("background http://127.0.0.1:12111/__fauxpay/health"))
            .background
            .as_deref(),
        Some("http://127.0.0.1:12111/__fauxpay/health")
    );
}
