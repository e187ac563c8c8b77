//! What only this binary's tests need beside `fauxpay-testkit`: the built `fauxpay`
//! binary, started as a server or run as a load test.

use fauxpay_testkit::provider::Harness;

/// Starts the `fauxpay` binary with `args` (a `serve` or `merchant` command line) and
/// reads its stderr up to the start-up line: the child, the URL it listens on, the rest
/// of its stderr, and everything it printed until then (the start-up line last). The
/// caller waits for the child.
#[allow(clippy::zombie_processes)]
pub fn spawn_listening<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> (
    std::process::Child,
    String,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args(args)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("fauxpay starts");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut printed = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "fauxpay exited before listening:\n{printed}"
        );
        printed.push_str(&line);
        if let Some(rest) = line.split("listening on ").nth(1) {
            let url = rest.split_whitespace().next().unwrap().to_string();
            return (child, url, stderr, printed);
        }
    }
}

/// Runs `fauxpay load` (the built binary, off the runtime's threads) with a client that
/// mints a new key per retry, straight at `h`'s provider under whatever profile it has;
/// returns its output folder.
pub async fn load_report(h: &Harness, name: &str) -> std::path::PathBuf {
    let out = std::env::temp_dir().join(format!("fauxpay-html-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let url = h.provider.url();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_fauxpay"));
    cmd.args([
        "load",
        "--target",
        &url,
        "--provider",
        &url,
        "--template",
        "stripe",
        "--mix",
        "retry-new-key=1",
        "--run-id",
        name,
        "--seed",
        "7",
        "--users",
        "4",
        "--iterations",
        "15",
        "--increase-rate",
        "1000",
        "--client-timeout",
        "1s",
        "--backoff",
        "10ms..50ms",
        "--out",
    ])
    .arg(&out);
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !stdout.contains("users launched"),
        "goose's prints stay out of the output:\n{stdout}"
    );
    out
}
