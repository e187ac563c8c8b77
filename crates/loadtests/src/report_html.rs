//! `report.html`: one self-contained page (inline SVG charts and style, no script, no
//! external asset) that a person opens after a load run: the verdict and the gates, the
//! run's settings (enough to reproduce it), payments and attempts per second, latency
//! over time (p50, p99) and as a distribution, outcomes and anomalies over time, and each
//! anomaly example as a story, the client's attempts beside the provider's requests and
//! ledger records.
//!
//! Charts are drawn by `plotters` (its SVG backend only: no font, bitmap or image
//! crates), from the report's [`Timeline`](crate::timeline::Timeline); the page is a
//! maud template, so every value (order ids, stories, URLs) is HTML-escaped.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use plotters::prelude::*;

use crate::latency::Latency;
use crate::report::Report;
use crate::timeline::Bucket;

const WIDTH: u32 = 880;
const HEIGHT: u32 = 300;

const BLUE: RGBColor = RGBColor(70, 86, 216);
const TEAL: RGBColor = RGBColor(20, 150, 140);
const ORANGE: RGBColor = RGBColor(222, 120, 20);
const RED_: RGBColor = RGBColor(192, 38, 45);
const GREEN_: RGBColor = RGBColor(23, 128, 61);
const GREY: RGBColor = RGBColor(120, 126, 140);

const STYLE: &str = "
body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2330;background:#f6f7f9}
main{max-width:960px;margin:0 auto;padding:1rem}
h1{font-size:1.4rem;margin:.3rem 0}h2{font-size:1.1rem;margin:1.6rem 0 .5rem}h3{font-size:1rem;margin:.2rem 0 .4rem}
.verdict{display:inline-block;padding:.2rem .6rem;border-radius:6px;font-weight:650}
.pass{background:#e7f6ec;color:#17803d}.fail{background:#fdecec;color:#c0262d}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #dde1e8}
th,td{text-align:left;padding:.3rem .55rem;border-bottom:1px solid #dde1e8;vertical-align:top}
th{font-size:12px;color:#5b6475;background:#fafbfc}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;word-break:break-all}
figure{margin:.6rem 0;background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:.3rem;overflow-x:auto}
figure svg{max-width:100%;height:auto}
.story{background:#fff;border:1px solid #dde1e8;border-left:4px solid #c0262d;border-radius:8px;padding:.7rem .9rem;margin:.7rem 0}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:.7rem}
.cols ol{margin:.2rem 0;padding-left:1.2rem}.cols h4{margin:.2rem 0;font-size:12px;color:#5b6475;text-transform:uppercase}
.muted{color:#5b6475}pre{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:.6rem;overflow-x:auto}
";

/// One line of a chart.
struct Series<'a> {
    name: &'a str,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

/// A line chart as an SVG string (empty on a drawing error, which only a bug causes).
fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series<'_>],
    x_label: &dyn Fn(&f64) -> String,
) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = draw(&root, title, x_desc, y_desc, series, x_label);
    }
    svg
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series<'_>],
    x_label: &dyn Fn(&f64) -> String,
) -> Result<(), Box<dyn std::error::Error>> {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_max) = all.fold((0f64, 0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let (x_max, y_max) = (x_max.max(1.0), (y_max * 1.1).max(1.0));
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(x_label)
        .light_line_style(RGBColor(238, 240, 244))
        .draw()?;
    for s in series {
        let color = s.color;
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
            .label(s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 204, 212))
        .draw()?;
    root.present()?;
    Ok(())
}

fn over_time<'a>(buckets: &[Bucket], name: &'a str, color: RGBColor, y: impl Fn(&Bucket) -> f64) -> Series<'a> {
    let t0 = buckets.first().map_or(0, |b| b.t);
    Series {
        name,
        color,
        points: buckets.iter().map(|b| ((b.t - t0) as f64, y(b))).collect(),
    }
}

/// The quantiles of the distribution chart, as "nines" (x = -log10(1 - q)): 0 is the
/// minimum, 1 the 90th percentile, 2 the 99th, 3 the 99.9th.
fn nines() -> impl Iterator<Item = f64> {
    (0..=60).map(|i| i as f64 * 0.05)
}

fn nines_label(x: &f64) -> String {
    let q = 100.0 * (1.0 - 10f64.powf(-x));
    if *x >= 2.5 {
        format!("{q:.1}%")
    } else {
        format!("{q:.0}%")
    }
}

fn distribution<'a>(h: &Latency, name: &'a str, color: RGBColor) -> Series<'a> {
    Series {
        name,
        color,
        points: nines().map(|x| (x, h.quantile_ms(1.0 - 10f64.powf(-x)))).collect(),
    }
}

/// The charts, each an `(id, svg)`: `throughput`, `latency`, `distribution`, `outcomes`.
pub fn charts(report: &Report) -> Vec<(&'static str, String)> {
    let b = &report.timeline.buckets;
    let secs = |x: &f64| match x.fract() == 0.0 {
        true => format!("{x:.0}"),
        false => format!("{x:.1}"),
    };
    let mut out = vec![
        (
            "throughput",
            line_chart(
                "Payments and attempts per second",
                "seconds into the run",
                "per second",
                &[
                    over_time(b, "payments/s", BLUE, |b| b.payments as f64),
                    over_time(b, "attempts/s", ORANGE, |b| b.attempts as f64),
                ],
                &secs,
            ),
        ),
        (
            "latency",
            line_chart(
                "Latency over time",
                "seconds into the run",
                "ms",
                &[
                    over_time(b, "payment p50", BLUE, |b| b.payment_p50_ms),
                    over_time(b, "payment p99", RED_, |b| b.payment_p99_ms),
                    over_time(b, "attempt p50", TEAL, |b| b.attempt_p50_ms),
                    over_time(b, "attempt p99", ORANGE, |b| b.attempt_p99_ms),
                ],
                &secs,
            ),
        ),
    ];
    let hist = |s: &str| Latency::from_base64(s).unwrap_or_default();
    out.push((
        "distribution",
        line_chart(
            "Latency distribution (whole run)",
            "percentile",
            "ms",
            &[
                distribution(&hist(&report.latency.payment_histogram), "payment (end to end)", BLUE),
                distribution(&hist(&report.latency.attempt_histogram), "attempt", ORANGE),
            ],
            &nines_label,
        ),
    ));
    out.push((
        "outcomes",
        line_chart(
            "Outcomes and anomalies per second",
            "seconds into the run",
            "payments",
            &[
                over_time(b, "ok", GREEN_, |b| b.ok as f64),
                over_time(b, "fail", GREY, |b| b.fail as f64),
                over_time(b, "info", ORANGE, |b| b.info as f64),
                over_time(b, "anomalies", RED_, |b| b.anomalies as f64),
            ],
            &secs,
        ),
    ));
    out
}

/// A UTC time of day from Unix milliseconds.
fn utc(ms: u64) -> String {
    let d = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02} UTC", d / 3600, d / 60 % 60, d % 60)
}

/// A story's parts: the client's attempts, the provider's requests, the ledger
/// (`reconcile::story` joins them with ` | `).
fn story_columns(story: &str) -> (String, Vec<String>, Vec<String>, String) {
    let mut parts = story.split(" | ");
    let client = parts.next().unwrap_or_default();
    let (head, attempts) = client.split_once(": ").unwrap_or(("", client));
    let mut provider = Vec::new();
    let mut ledger = String::new();
    for p in parts {
        if let Some(r) = p.strip_prefix("provider: ") {
            provider = r.split("; ").map(str::to_string).collect();
        } else if let Some(l) = p.strip_prefix("ledger: ") {
            ledger = l.to_string();
        }
    }
    (
        head.to_string(),
        attempts.split("; ").map(str::to_string).collect(),
        provider,
        ledger,
    )
}

fn list(items: &[String]) -> Markup {
    html! { ol { @for i in items { li.mono { (i) } } } }
}

pub fn render(report: &Report) -> String {
    let verdict = report.verdict();
    let passed = verdict == crate::report::RunVerdict::Held;
    let o = &report.outcomes;
    let a = &report.anomalies;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "fauxpay load report" }
                style { (PreEscaped(STYLE)) }
            }
            body { main {
                h1 { "fauxpay load report " span class={ "verdict " (if passed { "pass" } else { "fail" }) } {
                    (verdict.words())
                } }
                @for line in report.stopped_early() {
                    p.muted { "Stopped early: " (line) "." }
                }
                p.muted {
                    (report.payments) " payments (ok " (o.ok) ", fail " (o.fail) ", info " (o.info) "), "
                    (report.attempts) " attempts in " (format!("{:.1}", report.duration_secs)) " s; "
                    (a.extra_charges) " extra charges."
                }
                h2 { "Gates" }
                table #gates {
                    thead { tr { th { "gate" } th { "value" } th { "threshold" } th { "result" } } }
                    tbody { @for g in &report.gates { tr {
                        td { (g.name.as_str()) } td { (g.value) } td { (g.threshold) }
                        td { span class={ "verdict " (if g.passed { "pass" } else { "fail" }) } { (if g.passed { "pass" } else { "FAIL" }) } }
                    } } }
                }
                @if !report.latency.steps.is_empty() {
                    h2 { "Latency by step" }
                    table #steps {
                        thead { tr { th { "step" } th { "sends" } th { "p50" } th { "p90" } th { "p99" } th { "p99.9" } th { "max" } } }
                        tbody { @for (name, step) in &report.latency.steps { tr {
                            @let p = &step.latency;
                            td.mono { (name) } td { (p.count) }
                            td { (format!("{:.1} ms", p.p50_ms)) } td { (format!("{:.1} ms", p.p90_ms)) }
                            td { (format!("{:.1} ms", p.p99_ms)) } td { (format!("{:.1} ms", p.p999_ms)) }
                            td { (format!("{:.1} ms", p.max_ms)) }
                        } } }
                    }
                }
                @if !report.latency.scenarios.is_empty() {
                    h2 { "Scenarios" }
                    table #scenarios {
                        thead { tr { th { "scenario" } th { "weight" } th { "runs" } th { "went through" } th { "steps" } th { "p50" } th { "p90" } th { "p99" } th { "p99.9" } th { "max" } } }
                        tbody { @for sc in &report.latency.scenarios { tr {
                            @let p = &sc.latency;
                            td.mono { (sc.name) @if sc.pays { " (pays)" } } td { (sc.weight) } td { (sc.runs) } td { (sc.ok) }
                            td.mono { (sc.steps.join(", ")) }
                            td { (format!("{:.1} ms", p.p50_ms)) } td { (format!("{:.1} ms", p.p90_ms)) }
                            td { (format!("{:.1} ms", p.p99_ms)) } td { (format!("{:.1} ms", p.p999_ms)) }
                            td { (format!("{:.1} ms", p.max_ms)) }
                        } } }
                    }
                }
                h2 { "Run settings" }
                table #settings {
                    thead { tr { th { "run" } th { "target" } th { "provider" } th { "template" } th { "mix" } th { "seed" } th { "started" } th { "duration" } th { "payments" } } }
                    tbody { @for r in &report.runs { tr {
                        td.mono { (r.run_id) } td.mono { (r.target) } td.mono { (r.provider) } td { (r.template) }
                        td.mono { (r.mix) } td.mono { (r.seed) } td { (utc(r.started_ms)) }
                        td { (format!("{:.1} s", r.duration_secs)) } td { (r.payments) }
                    } } }
                }
                p { "Provider fault profile: "
                    @if report.timeline.profiles.is_empty() { span.muted { "unknown" } }
                    @for (i, p) in report.timeline.profiles.iter().enumerate() { @if i > 0 { ", " } code { (p) } }
                }
                @if let Some(r) = report.runs.first() {
                    p { "Reproduce (same seed, same choices):" }
                    pre { "fauxpay load --target " (r.target) " --provider " (r.provider)
                          @match &r.scenario { Some(s) => { " --scenario " (s) } None => { " --template " (r.template) } }
                          " --mix " (r.mix) " --seed " (r.seed) " --run-id " (r.run_id) "-again" }
                }
                h2 { "Over time" }
                @if report.timeline.buckets.is_empty() { p.muted { "No time series in this report (written by an older fauxpay)." } }
                @for (id, svg) in charts(report) {
                    figure data-chart=(id) { (PreEscaped(svg)) }
                }
                h2 { "Anomalies" }
                @let with_examples: Vec<_> = report.gates.iter().filter(|g| !g.examples.is_empty()).collect();
                @if with_examples.is_empty() { p.muted { "No anomaly: no order was charged twice, lost or charged in secret." } }
                @for g in with_examples {
                    h3 { (g.name.as_str()) ": " (g.value) }
                    @for e in &g.examples {
                        @let (head, client, provider, ledger) = story_columns(&e.story);
                        section.story data-order=(e.order_id) {
                            h3 { (head) }
                            div.cols {
                                div { h4 { "the client's attempts" } (list(&client)) }
                                div { h4 { "the provider's requests" }
                                    @if provider.is_empty() { p.muted { "not in the provider's request log" } } @else { (list(&provider)) } }
                                div { h4 { "the ledger" } p.mono { (ledger) } }
                            }
                        }
                    }
                }
                h2 { "Per second" }
                details {
                    summary { "The time series behind the charts (" (report.timeline.buckets.len()) " seconds)" }
                    table #timeline {
                        thead { tr { th { "t (Unix s)" } th { "payments" } th { "attempts" } th { "ok" } th { "fail" } th { "info" } th { "anomalies" }
                            th { "attempt p50" } th { "attempt p99" } th { "payment p50" } th { "payment p99" } } }
                        tbody { @for b in &report.timeline.buckets { tr {
                            td { (b.t) } td { (b.payments) } td { (b.attempts) } td { (b.ok) } td { (b.fail) } td { (b.info) } td { (b.anomalies) }
                            td { (format!("{:.1}", b.attempt_p50_ms)) } td { (format!("{:.1}", b.attempt_p99_ms)) }
                            td { (format!("{:.1}", b.payment_p50_ms)) } td { (format!("{:.1}", b.payment_p99_ms)) }
                        } } }
                    }
                }
                p.muted { "fauxpay " (report.fauxpay_version) " · report.json schema " (report.schema_version) }
            } }
        }
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stories_split_into_client_provider_and_ledger() {
        let (head, client, provider, ledger) = story_columns(
            "order r-1 (retry-new-key, ok): attempt 1 timed out after 2.0 s; attempt 2 → 200 pi_b (new key) | provider: attempt 1 drop_response after_commit → dropped (committed 200) pi_a; attempt 1 → 200 pi_b | ledger: 2 captured charges pi_a pi_b",
        );
        assert_eq!(head, "order r-1 (retry-new-key, ok)");
        assert_eq!(
            client,
            ["attempt 1 timed out after 2.0 s", "attempt 2 → 200 pi_b (new key)"]
        );
        assert_eq!(provider.len(), 2);
        assert_eq!(ledger, "2 captured charges pi_a pi_b");
    }

    #[test]
    fn nines_read_as_percentiles() {
        assert_eq!(nines_label(&0.0), "0%");
        assert_eq!(nines_label(&1.0), "90%");
        assert_eq!(nines_label(&2.0), "99%");
        assert_eq!(nines_label(&3.0), "99.9%");
    }
}
