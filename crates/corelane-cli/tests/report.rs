//! `corelane report` as a user runs it: saved runs of every experiment (small fixtures made
//! with `corelane lab NAME --quick --json`) drawn into one page that headless Chromium loads —
//! every table has its charts with the expected labels, the page logs nothing, its
//! screenshot is not blank — two runs compared, PNGs written, and foreign JSON refused.

#[path = "../../corelane/tests/common/chromium.rs"]
mod chromium;
mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use scraper::{Html, Selector};

use common::{corelane, fixture, stderr};

/// Every experiment of the lab's one list: a new one needs its fixture here.
fn experiments() -> Vec<&'static str> {
    corelane_lab::EXPERIMENTS.iter().map(|e| e.name).collect()
}

/// `corelane report RUNS… -o OUT [more]`.
fn report(runs: &[PathBuf], out: &Path, more: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = runs.iter().map(|p| p.as_os_str()).collect();
    args.insert(0, "report".as_ref());
    args.extend(["-o".as_ref(), out.as_os_str()]);
    args.extend(more.iter().map(std::ffi::OsStr::new));
    corelane(&args)
}

/// True when the charts' font is installed; otherwise says why the test skips.
fn have_font() -> bool {
    let here = Path::new(corelane_lab::report::chart::FONT_PATH).exists();
    if !here {
        eprintln!(
            "skipped: no {} (apt-get install fonts-dejavu-core)",
            corelane_lab::report::chart::FONT_PATH
        );
    }
    here
}

/// Runs headless Chromium on `page` with `what` (`--dump-dom`, `--screenshot=…`) and a
/// fresh profile, logging the page's console to stderr.
fn run_chromium(chromium: &Path, page: &Path, what: &str) -> Output {
    let flags = ["--disable-quic", "--enable-logging=stderr", "--v=0", "--window-size=1100,2400"];
    let out = chromium::run(chromium, &[&flags[..], &[what]].concat(), page);
    assert!(out.status.success(), "chromium failed: {}", stderr(&out));
    out
}

/// What the page logged to its console (CSP violations, errors): Chromium's `CONSOLE` lines.
fn console_lines(out: &Output) -> Vec<String> {
    stderr(out).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect()
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

/// The labels each figure of a run should show, by figure id.
fn expected_labels(run: &Path) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read(run).unwrap();
    let run = corelane_lab::report::run::parse("fixture", &text).unwrap();
    run.info
        .figures
        .iter()
        .map(|f| (f.id().to_string(), f.labels().iter().map(|l| l.to_string()).collect()))
        .collect()
}

#[test]
fn every_experiment_renders_in_chromium() {
    if !have_font() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let runs: Vec<PathBuf> = experiments().iter().map(|e| fixture(e)).collect();
    let out = report(&runs, &page, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(chromium) = chromium::find() else { return };

    let dumped = run_chromium(&chromium, &page, "--dump-dom");
    assert_eq!(console_lines(&dumped), Vec::<String>::new(), "the page logged to its console");
    let dom = Html::parse_document(&String::from_utf8_lossy(&dumped.stdout));
    assert_eq!(dom.select(&sel("script")).count(), 0);
    let sections: Vec<_> = dom.select(&sel("section.experiment")).collect();
    assert_eq!(sections.len(), experiments().len(), "a section per experiment");
    for (section, name) in sections.iter().zip(experiments()) {
        assert_eq!(section.value().attr("data-experiment"), Some(name));
        assert_eq!(section.select(&sel("table.results")).count(), 1, "{name}: its table");
        let rows = section.select(&sel("table.results tbody tr")).count();
        assert!(rows > 0, "{name}: an empty table");
        let expected = expected_labels(&fixture(name));
        assert!(!expected.is_empty(), "{name}: the fixture has no figures");
        for (id, labels) in expected {
            let figure = section
                .select(&sel("figure.chart"))
                .find(|f| f.value().attr("data-figure") == Some(id.as_str()))
                .unwrap_or_else(|| panic!("{name}: no chart `{id}` beside its table"));
            assert_eq!(figure.select(&sel("svg")).count(), 1, "{name} `{id}`: one inline SVG");
            let texts: Vec<String> = figure
                .select(&sel("svg text"))
                .map(|t| t.text().collect::<String>().trim().to_string())
                .collect();
            for label in labels {
                // Axis and legend labels may be cut; their first 20 characters are drawn.
                let start: String = label.chars().take(20).collect();
                assert!(
                    texts.iter().any(|t| t.starts_with(&start)),
                    "{name} `{id}`: label `{label}` not drawn in {texts:?}"
                );
            }
            assert!(
                figure.select(&sel("svg rect, svg circle")).count() > 1,
                "{name} `{id}`: nothing drawn"
            );
        }
    }

    let shot = dir.path().join("shot.png");
    let taken = run_chromium(&chromium, &page, &format!("--screenshot={}", shot.display()));
    assert_eq!(console_lines(&taken), Vec::<String>::new());
    let (colours, inked) = png_colours(&shot);
    assert!(colours > 16, "the screenshot is (nearly) one colour: {colours} colours");
    assert!(inked > 0.02, "the screenshot is (nearly) blank: {:.1}% not white", inked * 100.0);
}

/// The distinct colours of a PNG and the fraction of its pixels that are not white.
fn png_colours(path: &Path) -> (usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let mut distinct: Vec<&[u8]> = pixels.iter().take(2_000_000).copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let white = pixels.iter().filter(|p| p.iter().take(3).all(|c| *c >= 250)).count();
    (distinct.len(), 1.0 - white as f64 / pixels.len() as f64)
}

/// The console check can fail: a page that tries to load an image from the network is
/// blocked by the same policy the report carries, and Chromium logs it.
#[test]
fn a_page_that_reaches_for_the_network_is_caught() {
    let Some(chromium) = chromium::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(&page, "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"></head><body><p>x</p><img src=\"http://127.0.0.1:9/x.png\"></body></html>").unwrap();
    let out = run_chromium(&chromium, &page, "--dump-dom");
    let lines = console_lines(&out);
    assert!(lines.iter().any(|l| l.contains("Content Security Policy")), "{lines:?}");
}

/// A run file crafted to inject: script and markup in every text the page shows, huge and
/// tiny numbers. Chromium's DOM holds no element it did not expect, the text reads as written.
#[test]
fn a_hostile_run_reaches_the_browser_as_text() {
    if !have_font() {
        return;
    }
    const EVIL: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&amp;";
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("udp")).unwrap()).unwrap();
    let run = &mut v["corelane_run"];
    run["experiment"] = EVIL.into();
    run["command"] = serde_json::json!(["corelane", EVIL, "</code></td><script>alert(3)</script>"]);
    run["findings"] = serde_json::json!([EVIL]);
    run["table"]["rows"][0][1] = EVIL.into();
    let figure = &mut run["figures"][0];
    figure["title"] = EVIL.into();
    figure["bars"][0]["label"] = EVIL.into();
    figure["bars"][0]["median"] = 1e308.into();
    figure["bars"][1]["trials"] = serde_json::json!([5e-324, -1e308, 1.7976931348623157e308]);
    let hostile = dir.path().join("hostile.json");
    std::fs::write(&hostile, serde_json::to_vec(&v).unwrap()).unwrap();
    let page = dir.path().join("hostile.html");
    let out = report(&[hostile], &page, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(chromium) = chromium::find() else { return };
    let dumped = run_chromium(&chromium, &page, "--dump-dom");
    assert_eq!(console_lines(&dumped), Vec::<String>::new());
    let dom = Html::parse_document(&String::from_utf8_lossy(&dumped.stdout));
    for tag in ["script", "img", "iframe", "object"] {
        assert_eq!(dom.select(&sel(tag)).count(), 0, "a <{tag}> reached the DOM");
    }
    let cells: Vec<String> =
        dom.select(&sel("table.results td")).map(|t| t.text().collect()).collect();
    assert!(cells.iter().any(|c| c == EVIL), "the label is text, as written");
    let findings: String = dom.select(&sel("ul.findings li")).flat_map(|l| l.text()).collect();
    assert_eq!(findings, EVIL);
    let svg_text: Vec<String> = dom
        .select(&sel("figure.chart svg text"))
        .map(|t| t.text().collect::<String>().trim().to_string())
        .collect();
    assert!(svg_text.iter().any(|t| t == EVIL), "the bar's label drawn as text: {svg_text:?}");
}

#[test]
fn two_runs_are_compared_side_by_side() {
    if !have_font() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The same run on a "slower host": every figure value halved.
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("udp")).unwrap()).unwrap();
    for figure in v["corelane_run"]["figures"].as_array_mut().unwrap() {
        if figure["kind"] != "bars" {
            continue;
        }
        for bar in figure["bars"].as_array_mut().into_iter().flatten() {
            bar["median"] = (bar["median"].as_f64().unwrap() / 2.0).into();
            for t in bar["trials"].as_array_mut().unwrap() {
                *t = (t.as_f64().unwrap() / 2.0).into();
            }
        }
    }
    let slower = dir.path().join("slower.json");
    std::fs::write(&slower, serde_json::to_vec(&v).unwrap()).unwrap();
    let page = dir.path().join("cmp.html");
    let pngs = dir.path().join("png");
    std::fs::create_dir(&pngs).unwrap();
    let out = report(&[fixture("udp"), slower.clone()], &page, &["--png", pngs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let dom = Html::parse_document(&html);
    let rate = dom.select(&sel("figure.chart[data-figure=\"rate\"]")).collect::<Vec<_>>();
    assert_eq!(rate.len(), 1, "both runs in one chart");
    assert_eq!(rate[0].value().attr("data-runs"), Some("A B"));
    let texts: Vec<String> = rate[0].select(&sel("svg text")).map(|t| t.text().collect()).collect();
    let bars = expected_labels(&fixture("udp"))[0].1.len();
    assert_eq!(
        texts.iter().filter(|t| t.contains("×0.50")).count(),
        bars,
        "each of B's bars at half of A's: {texts:?}"
    );
    assert_eq!(dom.select(&sel("table.results")).count(), 2);
    assert_eq!(dom.select(&sel("table.runs tbody tr")).count(), 2);
    // The PNGs: one per bar chart (both runs), one per run for the per-CPU split.
    let mut names: Vec<String> = std::fs::read_dir(&pngs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["udp-cpu-split-A.png", "udp-cpu-split-B.png", "udp-cpu.png", "udp-rate.png"]
    );
    for name in names {
        let (colours, inked) = png_colours(&pngs.join(&name));
        assert!(colours > 4 && inked > 0.01, "{name}: blank");
    }
}

#[test]
fn foreign_json_is_refused_in_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("iperf3.json");
    std::fs::write(&foreign, br#"{"start": {"version": "iperf 3.12"}, "end": {}}"#).unwrap();
    let future = dir.path().join("future.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("tcp")).unwrap()).unwrap();
    v["corelane_run"]["version"] = 2.into();
    std::fs::write(&future, serde_json::to_vec(&v).unwrap()).unwrap();
    let page = dir.path().join("out.html");
    for (bad, says) in [
        (&foreign, "not a corelane run (no `corelane_run` section)"),
        (&future, "format version 2"),
    ] {
        let out = report(&[fixture("udp"), bad.clone()], &page, &[]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("corelane: ")
                && err.contains(bad.to_str().unwrap())
                && err.contains(says),
            "{err}"
        );
        assert!(!page.exists(), "nothing written");
    }
    let missing = report(&[fixture("udp")], Path::new("/nonexistent-corelane/x.html"), &[]);
    assert!(
        stderr(&missing).contains("/nonexistent-corelane does not exist"),
        "{}",
        stderr(&missing)
    );
}

/// The fixtures are what the lab writes now: each reads back, and names its experiment.
#[test]
fn the_fixtures_are_current_runs() {
    for name in experiments() {
        let run = corelane_lab::report::run::load(&fixture(name)).unwrap();
        assert_eq!(run.info.experiment, name);
        assert!(run.info.command.iter().any(|w| w == "--quick"));
    }
}
