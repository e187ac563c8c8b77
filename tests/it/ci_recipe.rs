//! The CI recipes of docs/deployment.md work when copied into a user's repository: each
//! installs fauxpay itself (from `$FAUXPAY_GIT` at `$FAUXPAY_REV`, the `fauxpay`
//! package), and its shell steps, run in order in a scratch directory (the `fauxpay`
//! just built on the `PATH` in place of the install, free ports in place of 12111 and
//! 8080, the idempotent reference merchant as the user's checkout service), pass and
//! leave the report where the job publishes it.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use serde_yaml_ng::Value;

use crate::markdown::{code_blocks, root};

/// The YAML block that follows the paragraph ending in `label` (`GitHub Actions:`).
fn recipe(label: &str) -> Value {
    let docs = std::fs::read_to_string(root().join("docs/deployment.md")).unwrap();
    let block = code_blocks(&docs)
        .into_iter()
        .find(|b| b.info == "yaml" && b.before.trim_end().ends_with(label))
        .unwrap_or_else(|| panic!("docs/deployment.md has no yaml block after {label:?}"));
    serde_yaml_ng::from_str(&block.text).unwrap_or_else(|e| panic!("{label} recipe is not YAML: {e}"))
}

fn github_steps() -> Vec<String> {
    let r = recipe("GitHub Actions:");
    let steps = r["jobs"]["double-charges"]["steps"].as_sequence().expect("steps");
    steps
        .iter()
        .filter_map(|s| s["run"].as_str().map(str::to_string))
        .collect()
}

fn gitlab_steps() -> Vec<String> {
    let r = recipe("GitLab CI:");
    let script = r["double-charges"]["script"].as_sequence().expect("script");
    script
        .iter()
        .map(|s| s.as_str().expect("a shell line").to_string())
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `steps` as a CI runner would, in a fresh directory; returns that directory.
fn run(name: &str, steps: &[String]) -> std::path::PathBuf {
    let (install, rest): (Vec<&String>, Vec<&String>) = steps.iter().partition(|s| s.starts_with("cargo install"));
    assert_eq!(install.len(), 1, "{name}: one install step: {steps:?}");
    assert!(
        install[0].contains(r#"--git "$FAUXPAY_GIT" --rev "$FAUXPAY_REV""#) && install[0].ends_with(" fauxpay"),
        "{name}: the install names fauxpay's repository, a pinned rev and the package: {}",
        install[0]
    );
    assert!(
        !install[0].contains("--path"),
        "{name}: `--path .` would install the user's repository"
    );

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ci-recipe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (provider, merchant) = (free_port(), free_port());
    let service = format!(
        "#!/usr/bin/env bash\nset -e\nfauxpay merchant --strategy idempotent --addr 127.0.0.1:{merchant} --provider http://127.0.0.1:{provider} > merchant.log 2>&1 &\necho $! > merchant.pid\ncurl -fsS --retry 30 --retry-connrefused --retry-delay 1 http://127.0.0.1:{merchant}/health > /dev/null\n"
    );
    let script_path = dir.join("start-my-checkout-service.sh");
    std::fs::write(&script_path, service).unwrap();
    Command::new("chmod").arg("+x").arg(&script_path).status().unwrap();
    let body: Vec<String> = rest
        .iter()
        .map(|s| {
            s.replace("127.0.0.1:12111", &format!("127.0.0.1:{provider}"))
                .replace("127.0.0.1:8080", &format!("127.0.0.1:{merchant}"))
        })
        .collect();
    let script = format!(
        "set -euo pipefail\ntrap 'kill $(jobs -p) $(cat merchant.pid 2>/dev/null) 2>/dev/null || true' EXIT\n{}\n",
        body.join("\n")
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_fauxpay")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("timeout")
        .args(["120", "bash", "-c", &script])
        .current_dir(&dir)
        .env("PATH", path)
        .env("FAUXPAY_GIT", "https://example.invalid/fauxpay")
        .env("FAUXPAY_REV", "0000000000000000000000000000000000000000")
        .env("GITHUB_STEP_SUMMARY", dir.join("summary.md"))
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{name}: the recipe failed ({:?}):\n{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("merchant.log")).unwrap_or_default()
    );
    for file in ["report.md", "junit.xml", "report.html"] {
        assert!(
            dir.join("fauxpay-report").join(file).exists(),
            "{name}: no fauxpay-report/{file}"
        );
    }
    dir
}

#[test]
fn the_github_actions_recipe_runs_as_written() {
    let dir = run("github", &github_steps());
    let summary = std::fs::read_to_string(dir.join("summary.md")).expect("the step summary was written");
    assert!(
        summary.contains("double charges"),
        "the job summary holds the report:\n{summary}"
    );
}

#[test]
fn the_gitlab_recipe_runs_as_written() {
    run("gitlab", &gitlab_steps());
}
