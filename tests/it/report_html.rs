//! `report.html` as a program reads it: written by `fauxpay load` and by `fauxpay report
//! merge`, its charts drawn from the per-second time series of `report.json` (one point a
//! second), and each anomaly example told as a story.

use fauxpay_testkit::provider::{with_profile, Harness};

use crate::support::load_report;
use fauxpay_faults as faults;
use serde_json::Value;

fn read(dir: &std::path::Path) -> (Value, String) {
    let json = serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    (json, std::fs::read_to_string(dir.join("report.html")).unwrap())
}

/// The `points` of every polyline in `svg`, each as a count.
fn polylines(svg: &str) -> Vec<usize> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| p.split("points=\"").nth(1))
        .map(|p| p.split('"').next().unwrap_or("").split_whitespace().count())
        .collect()
}

fn figure<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<figure data-chart=\"{id}\">"))
        .unwrap_or_else(|| panic!("no {id} chart"));
    let end = html[start..].find("</figure>").unwrap();
    &html[start..start + end]
}

/// The numbers of the per-second table, row by row.
fn timeline_rows(html: &str) -> Vec<Vec<String>> {
    let table = html
        .split("<table id=\"timeline\">")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    let body = table.split("<tbody>").nth(1).unwrap();
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td>")
                .skip(1)
                .map(|c| c.split("</td>").next().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn check(json: &Value, html: &str) {
    let buckets = json["timeline"]["buckets"].as_array().unwrap();
    assert!(!buckets.is_empty());
    let points: u64 = buckets.iter().map(|b| b["payments"].as_u64().unwrap()).sum();
    assert_eq!(
        points,
        json["payments"].as_u64().unwrap(),
        "every payment is in one second"
    );
    let attempts: u64 = buckets.iter().map(|b| b["attempts"].as_u64().unwrap()).sum();
    assert_eq!(attempts, json["attempts"].as_u64().unwrap());
    for id in ["throughput", "latency", "distribution", "outcomes"] {
        assert!(figure(html, id).contains("<svg"), "{id} is an inline SVG");
    }
    // One point a second, for each line of the charts over time (plus 2-point legend keys).
    for (id, lines) in [("throughput", 2), ("latency", 4), ("outcomes", 4)] {
        let series = polylines(figure(html, id));
        let full = series.iter().filter(|&&n| n == buckets.len()).count();
        assert!(full >= lines, "{id}: {series:?} for {} seconds", buckets.len());
    }
    let rows = timeline_rows(html);
    assert_eq!(rows.len(), buckets.len());
    for (row, b) in rows.iter().zip(buckets) {
        assert_eq!(row[0], b["t"].to_string());
        assert_eq!(row[1], b["payments"].to_string());
        assert_eq!(row[2], b["attempts"].to_string());
        assert_eq!(row[6], b["anomalies"].to_string());
    }
    let examples = json["anomalies"]["double_charges"]["examples"].as_array().unwrap();
    assert!(!examples.is_empty(), "lost answers and new keys make double charges");
    for e in examples {
        let order = e["order_id"].as_str().unwrap();
        assert!(
            html.contains(&format!("<section class=\"story\" data-order=\"{order}\">")),
            "{order}"
        );
    }
    assert!(html.contains("the client&#39;s attempts") || html.contains("the client's attempts"));
    assert!(html.contains("the provider&#39;s requests") || html.contains("the provider's requests"));
    assert!(
        html.contains("<code>lost-responses</code>"),
        "the provider's profile is among the settings"
    );
    assert!(!html.contains("<script"), "no script");
    assert!(
        !html.contains("http://") || !html.contains("src=\"http"),
        "no external asset"
    );
}

#[tokio::test]
async fn load_and_merge_write_a_report_html_whose_charts_are_the_time_series() {
    let h = Harness::start(with_profile(faults::bundled::load("lost-responses").unwrap())).await;
    let a = load_report(&h, "ha").await;
    let b = load_report(&h, "hb").await;
    let (ja, ha) = read(&a);
    check(&ja, &ha);
    let (jb, _) = read(&b);

    let merged = a.with_file_name(format!("fauxpay-html-{}-merged", std::process::id()));
    let run = tokio::task::spawn_blocking({
        let (a, b, merged) = (a.clone(), b.clone(), merged.clone());
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_fauxpay"))
                .args(["report", "merge"])
                .arg(a.join("report.json"))
                .arg(b.join("report.json"))
                .arg("--out")
                .arg(&merged)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", String::from_utf8_lossy(&run.stdout));
    let (jm, hm) = read(&merged);
    check(&jm, &hm);
    let total = |j: &Value| -> u64 {
        j["timeline"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["payments"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(total(&jm), total(&ja) + total(&jb), "merged series add up");
    for d in [a, b, merged] {
        std::fs::remove_dir_all(d).ok();
    }
}
