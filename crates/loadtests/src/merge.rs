//! `fauxpay report merge`: finds the reports (files, or a directory holding one report
//! directory per generator), waits for `--expect` of them when generators are still
//! running, refuses reports that cannot be added up (another template, other gates, an
//! open model beside a closed one, one run id twice), then merges, writes and gates.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::args::MergeArgs;
use crate::error::LoadError;
use crate::report::Report;

/// How often `--expect` looks for reports again.
const POLL: Duration = Duration::from_secs(1);

/// Combines reports and gates on the merged numbers.
pub fn merge(args: MergeArgs) -> Result<Report, LoadError> {
    let paths = wait_for(&args)?;
    let reports = paths
        .iter()
        .map(|p| Ok((p.clone(), Report::read(p)?)))
        .collect::<Result<Vec<_>, LoadError>>()?;
    compatible(&reports)?;
    let reports: Vec<Report> = reports.into_iter().map(|(_, r)| r).collect();
    let merged = Report::merge(&reports).map_err(LoadError::Merge)?;
    crate::output::write_all(&merged, &args.out)?;
    print!("{}", merged.summary());
    println!(
        "  reports     {}/ (report.html, report.json, report.md, junit.xml), merged from {}",
        args.out.display(),
        reports.len()
    );
    Ok(merged)
}

/// The report files named or found, once `--expect` of them are there.
fn wait_for(args: &MergeArgs) -> Result<Vec<PathBuf>, LoadError> {
    let started = Instant::now();
    loop {
        let Some(expect) = args.expect else {
            return find(&args.reports, &args.out);
        };
        // Generators may not have created the folder, or written anything, yet.
        let found = match find(&args.reports, &args.out) {
            Ok(found) => found.into_iter().filter(|p| p.is_file()).collect(),
            Err(LoadError::Merge(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        if found.len() > expect {
            return Err(LoadError::Merge(format!(
                "found {} reports, expected {expect} (reports of an earlier run left in the directory?)",
                found.len()
            )));
        }
        if found.len() == expect {
            return Ok(found);
        }
        if started.elapsed() >= args.wait {
            return Err(LoadError::Merge(format!(
                "found {} of {expect} reports after waiting {}",
                found.len(),
                humantime::format_duration(args.wait)
            )));
        }
        std::thread::sleep(POLL.min(args.wait.saturating_sub(started.elapsed())));
    }
}

/// Files as given; for a directory, every `DIR/*/report.json` (sorted), skipping `out`.
pub fn find(paths: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let out = std::fs::canonicalize(out).ok();
    let mut found = Vec::new();
    for path in paths {
        if !path.is_dir() {
            found.push(path.clone());
            continue;
        }
        let mut inside = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| LoadError::io(path, e))? {
            let dir = entry.map_err(|e| LoadError::io(path, e))?.path();
            let report = dir.join("report.json");
            if report.is_file() && (out.is_none() || std::fs::canonicalize(&dir).ok() != out) {
                inside.push(report);
            }
        }
        inside.sort();
        found.extend(inside);
    }
    if found.is_empty() {
        return Err(LoadError::Merge(format!(
            "no report found in {} (expected report.json files or DIR/*/report.json)",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(found)
}

/// Reports add up only when they ran the same template against the same gates, all open
/// or all closed, each its own run.
pub fn compatible(reports: &[(PathBuf, Report)]) -> Result<(), LoadError> {
    let Some((first_path, first)) = reports.first() else {
        return Ok(());
    };
    let a = first_path.display();
    let template = |r: &Report| {
        let mut t: Vec<&str> = r.runs.iter().map(|run| run.template.as_str()).collect();
        t.dedup();
        t.join("+")
    };
    let mut seen: Vec<(&str, &Path)> = Vec::new();
    for (path, r) in reports {
        let b = path.display();
        if template(r) != template(first) {
            return Err(LoadError::Merge(format!(
                "{b} ran template {}, {a} ran {}",
                template(r),
                template(first)
            )));
        }
        if r.thresholds != first.thresholds {
            return Err(LoadError::Merge(format!(
                "{b} gates differently from {a} ({})",
                differences(&r.thresholds, &first.thresholds)
            )));
        }
        if r.open.is_some() != first.open.is_some() {
            let (open, closed) = if r.open.is_some() { (&b, &a) } else { (&a, &b) };
            return Err(LoadError::Merge(format!(
                "{open} ran at a --rate (open model), {closed} did not"
            )));
        }
        for run in &r.runs {
            if let Some((_, other)) = seen.iter().find(|(id, _)| *id == run.run_id) {
                return Err(LoadError::Merge(format!(
                    "run id {} is in both {} and {b} (each generator needs its own --run-id)",
                    run.run_id,
                    other.display()
                )));
            }
            seen.push((&run.run_id, path));
        }
    }
    Ok(())
}

/// `field X vs Y` for every threshold that differs.
fn differences<T: serde::Serialize>(a: &T, b: &T) -> String {
    let (a, b) = (serde_json::to_value(a), serde_json::to_value(b));
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) = (a, b) else {
        return String::new();
    };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| format!("{k} {v} vs {}", b.get(k).unwrap_or(&serde_json::Value::Null)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::latency::Latency;
    use crate::reconcile::{Anomalies, Outcomes};
    use crate::report::{Measured, RunInfo, Thresholds};

    fn report(run_id: &str, template: &str, max_double: u64) -> Report {
        let mut l = Latency::default();
        l.record(1000);
        Report::new(
            Measured {
                run: RunInfo {
                    scenario: None,
                    run_id: run_id.into(),
                    target: "http://t".into(),
                    provider: "http://p".into(),
                    template: template.into(),
                    mix: "retry-same-key=1".into(),
                    seed: 1,
                    started_ms: 0,
                    duration_secs: 1.0,
                    payments: 1,
                    stopped_by: None,
                },
                attempts: 1,
                outcomes: Outcomes {
                    ok: 1,
                    fail: 0,
                    info: 0,
                },
                anomalies: Anomalies::default(),
                by_behaviour: BTreeMap::new(),
                unknown_orders: 0,
                answers_cut: 0,
                attempt_latency: l.clone(),
                payment_latency: l,
                step_latency: Default::default(),
                scenarios: Vec::new(),
                fulfillment: None,
            },
            Thresholds {
                max_double_charges: max_double,
                max_lost: 0,
                max_phantom: 0,
                max_amount_mismatch: 0,
                max_inconsistent_replays: 0,
                max_unresolved: None,
                max_p99_ms: None,
                max_dropped: None,
                max_double_fulfillments: None,
                max_missed_fulfillments: None,
                max_unexpected_charges: None,
                slo: Vec::new(),
            },
        )
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fauxpay-merge-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn error(reports: Vec<(&str, Report)>) -> String {
        let reports: Vec<(PathBuf, Report)> = reports.into_iter().map(|(p, r)| (PathBuf::from(p), r)).collect();
        compatible(&reports).unwrap_err().to_string()
    }

    #[test]
    fn refuses_reports_that_do_not_add_up_in_one_line() {
        let ok = vec![
            (PathBuf::from("a"), report("a", "stripe", 0)),
            (PathBuf::from("b"), report("b", "stripe", 0)),
        ];
        assert!(compatible(&ok).is_ok());
        let e = error(vec![
            ("a/report.json", report("a", "stripe", 0)),
            ("b/report.json", report("b", "checkout-json", 0)),
        ]);
        assert_eq!(
            e,
            "cannot merge: b/report.json ran template checkout-json, a/report.json ran stripe"
        );
        let e = error(vec![("a", report("a", "stripe", 0)), ("b", report("b", "stripe", 2))]);
        assert_eq!(
            e,
            "cannot merge: b gates differently from a (max_double_charges 2 vs 0)"
        );
        let e = error(vec![("a", report("x", "stripe", 0)), ("b", report("x", "stripe", 0))]);
        assert!(e.contains("run id x is in both a and b"), "{e}");
        assert_eq!(e.lines().count(), 1);
    }

    #[test]
    fn a_directory_means_every_report_one_level_down_but_the_output() {
        let d = dir("find");
        for name in ["load-1", "load-0", "merged", "empty"] {
            std::fs::create_dir_all(d.join(name)).unwrap();
        }
        for (name, id) in [("load-1", "l1"), ("load-0", "l0"), ("merged", "m")] {
            crate::output::write_all(&report(id, "stripe", 0), &d.join(name)).unwrap();
        }
        std::fs::write(d.join("report.json"), "not one level down").unwrap();
        let found = find(std::slice::from_ref(&d), &d.join("merged")).unwrap();
        assert_eq!(found, vec![d.join("load-0/report.json"), d.join("load-1/report.json")]);
        assert!(
            !d.join("load-0/.report.json.tmp").exists(),
            "written aside, then renamed"
        );
        let none = find(&[d.join("empty")], &d.join("merged")).unwrap_err().to_string();
        assert!(none.starts_with("cannot merge: no report found in"), "{none}");

        let args = |expect: usize| MergeArgs {
            reports: vec![d.clone()],
            expect: Some(expect),
            wait: Duration::ZERO,
            out: d.join("merged"),
        };
        for not_yet in [d.join("not-yet"), d.join("empty")] {
            let waiting = MergeArgs {
                reports: vec![not_yet],
                expect: Some(1),
                wait: Duration::ZERO,
                out: d.join("merged"),
            };
            let e = merge(waiting).unwrap_err().to_string();
            assert_eq!(
                e, "cannot merge: found 0 of 1 reports after waiting 0s",
                "waits, then says so"
            );
        }
        let short = merge(args(3)).unwrap_err().to_string();
        assert_eq!(short, "cannot merge: found 2 of 3 reports after waiting 0s");
        let many = merge(args(1)).unwrap_err().to_string();
        assert!(many.starts_with("cannot merge: found 2 reports, expected 1"), "{many}");
        let merged = merge(args(2)).unwrap();
        assert_eq!(merged.payments, 2);
        assert_eq!(Report::read(&d.join("merged/report.json")).unwrap(), merged);
    }
}
