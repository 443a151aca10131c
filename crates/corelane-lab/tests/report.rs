//! The report's pieces without a browser: a chart's SVG against its snapshot, runs refused
//! (foreign JSON, another format version, numbers given as strings, deep nesting, too much),
//! hostile text escaped, two runs compared, and no input that makes drawing panic.

use corelane_lab::report::chart;
use corelane_lab::report::figure::{
    Bar, Bars, Figure, Lines, Point, Role, Scale, Scatter, Series, Stacked, StackedBar,
};
use corelane_lab::report::page;
use corelane_lab::report::run::{self, RunInfo, Table, FORMAT, VERSION};

/// True when the charts' font is here; otherwise says why the test skips.
fn font() -> bool {
    match chart::load_font() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// The text of every `<text>` element of an SVG.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split("</text>").next()?.trim().to_string()))
        .collect()
}

fn info(figures: Vec<Figure>) -> RunInfo {
    RunInfo {
        format: FORMAT.into(),
        version: VERSION,
        experiment: "udp".into(),
        seed: "000".into(),
        corelane_version: "0.1.0".into(),
        started: "Mon, 23 Nov 2026 13:00:00 GMT".into(),
        finished: "Mon, 23 Nov 2026 13:01:00 GMT".into(),
        command: vec!["corelane".into(), "lab".into(), "udp".into(), "--quick".into()],
        hostname: "host".into(),
        machine: "2 CPUs (test)".into(),
        kernel: "6.18".into(),
        table: Table {
            columns: vec!["config".into(), "median_pps".into()],
            rows: vec![vec!["default".into(), "100".into()]],
        },
        findings: vec!["a finding".into()],
        skipped: vec![],
        figures,
    }
}

fn rate(scale: f64) -> Figure {
    Figure::Bars(Bars {
        id: "rate".into(),
        title: "Datagrams/s".into(),
        unit: "datagrams/s".into(),
        bars: vec![
            Bar::new(
                "default",
                Role::Default,
                1.0e6 * scale,
                &[0.9e6 * scale, 1.0e6 * scale, 1.1e6 * scale],
            ),
            Bar::new(
                "reuseport",
                Role::Config,
                1.5e6 * scale,
                &[1.4e6 * scale, 1.5e6 * scale, 1.6e6 * scale],
            ),
            Bar::new("iperf3 -s ← iperf3 -c", Role::Peer, 0.5e6 * scale, &[0.5e6 * scale]),
        ],
        ceiling: None,
    })
}

/// The JSON a lab run writes: the `corelane_run` section beside the experiment's fields.
fn file_of(info: &RunInfo) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"corelane_run": info, "rows": [], "machine": "x"}))
        .unwrap()
}

#[test]
fn a_bar_chart_matches_its_snapshot() {
    if !font() {
        return;
    }
    let figure = rate(1.0);
    let svg = chart::svg(&[("run.json", &figure)]).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/bars.svg");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(path, &svg).unwrap();
    }
    let expected = std::fs::read_to_string(path).expect("snapshot (UPDATE_SNAPSHOTS=1 writes it)");
    assert_eq!(svg, expected, "the chart changed; look at it, then UPDATE_SNAPSHOTS=1 to accept");
    // What the snapshot must show: every label, the gap against the default, the whiskers' caps.
    let texts = texts(&svg);
    for text in [
        "default",
        "reuseport",
        "iperf3 -s ← iperf3 -c",
        "1.50M  +50.0%",
        "500.0k  -50.0%",
        "datagrams/s",
        "Datagrams/s",
    ] {
        assert!(texts.iter().any(|t| t == text), "{text} missing from {texts:?}");
    }
    // A background, three bars and three legend swatches; the whiskers of the two rows that
    // ran more than once (three strokes each: the span and its caps).
    assert_eq!(svg.matches("<rect").count(), 7);
    assert!(svg.contains("points=\"483,46 562,46 \""), "default's whisker: 0.9M to 1.1M");
}

#[test]
fn a_run_reads_back_as_written() {
    let written = info(vec![rate(1.0)]);
    let run = run::parse("run.json", &file_of(&written)).unwrap();
    assert_eq!(run.info, written);
}

#[test]
fn foreign_json_and_other_versions_are_refused_in_one_line() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json at all".to_vec(), "not JSON"),
        (br#"{"hello": "world"}"#.to_vec(), "no `corelane_run` section"),
        (br#"[1, 2, 3]"#.to_vec(), "no `corelane_run` section"),
        (br#"{"machine": "m", "rows": [], "findings": []}"#.to_vec(), "from before runs carried a `corelane_run` section"),
        (br#"{"corelane_run": {"format": "iperf3"}}"#.to_vec(), "is not \"corelane-lab-run\""),
        (br#"{"corelane_run": {"format": "corelane-lab-run", "version": 99, "corelane_version": "9.0"}}"#.to_vec(), "format version 99 (written by corelane 9.0)"),
        (br#"{"corelane_run": {"format": "corelane-lab-run", "version": "1"}}"#.to_vec(), "format version no number"),
        (br#"{"corelane_run": {"format": "corelane-lab-run", "version": 1}}"#.to_vec(), "cannot be read (missing field"),
    ];
    for (bytes, expected) in cases {
        let err = run::parse("x.json", &bytes).unwrap_err().to_string();
        assert!(err.starts_with("x.json: "), "{err}");
        assert!(err.contains(expected), "{expected}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn numbers_as_strings_deep_nesting_and_oversize_are_refused() {
    let mut v: serde_json::Value =
        serde_json::from_slice(&file_of(&info(vec![rate(1.0)]))).unwrap();
    v["corelane_run"]["figures"][0]["bars"][0]["median"] = "NaN".into();
    let err = run::parse("x.json", &serde_json::to_vec(&v).unwrap()).unwrap_err().to_string();
    assert!(
        err.contains("cannot be read") && err.contains("invalid type: string \"NaN\""),
        "{err}"
    );

    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let err = run::parse("deep.json", deep.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("not JSON") && err.contains("recursion limit"), "{err}");

    let many = Figure::Bars(Bars {
        bars: (0..6000).map(|i| Bar::new(format!("b{i}"), Role::Config, 1.0, &[])).collect(),
        ..match rate(1.0) {
            Figure::Bars(b) => b,
            _ => unreachable!(),
        }
    });
    let err = run::parse("big.json", &file_of(&info(vec![many]))).unwrap_err().to_string();
    assert!(err.contains("figure `rate` has 6000 values (at most 5000)"), "{err}");

    let bad = Figure::Stacked(Stacked {
        id: "s".into(),
        title: "t".into(),
        unit: "%".into(),
        parts: vec!["a".into(), "b".into()],
        bars: vec![StackedBar { label: "x".into(), values: vec![1.0] }],
    });
    let err = run::parse("s.json", &file_of(&info(vec![bad]))).unwrap_err().to_string();
    assert!(err.contains("bar `x` has 1 values for 2 parts"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(run::MAX_FILE_BYTES + 1).unwrap();
    let err = run::load(&huge).unwrap_err().to_string();
    assert!(err.contains("larger than 16 MiB"), "{err}");
}

const HOSTILE: &str =
    "<script>alert(1)</script>\"><img src=x onerror=alert(2)>&amp;'\u{0}\u{1b}[31m";

#[test]
fn hostile_text_and_numbers_are_drawn_escaped() {
    if !font() {
        return;
    }
    let bars = Figure::Bars(Bars {
        id: HOSTILE.into(),
        title: HOSTILE.into(),
        unit: HOSTILE.into(),
        bars: vec![
            Bar::new(HOSTILE, Role::Default, 1e300, &[1e308, -1e308, 5e-324, 0.0]),
            Bar::new("zero", Role::Config, 0.0, &[]),
            Bar::new(
                "x".repeat(10_000),
                Role::Peer,
                -1.7976931348623157e308,
                &[1.7976931348623157e308],
            ),
        ],
        ceiling: Some(corelane_lab::report::figure::Mark { label: HOSTILE.into(), value: 1e308 }),
    });
    let lines = Figure::Lines(Lines {
        id: "l".into(),
        title: "t".into(),
        x_label: HOSTILE.into(),
        y_label: "y".into(),
        x_scale: Scale::Percentile,
        y_scale: Scale::Log,
        series: vec![Series {
            name: HOSTILE.into(),
            role: Role::Peer,
            points: vec![(100.0, 0.0), (-5.0, -1.0), (50.0, 1e308), (99.999999, 5e-324)],
        }],
    });
    let scatter = Figure::Scatter(Scatter {
        id: "s".into(),
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        points: vec![Point { group: HOSTILE.into(), label: HOSTILE.into(), x: 1e308, y: -1e308 }],
    });
    let mut hostile = info(vec![bars, lines, scatter]);
    hostile.command = vec!["corelane".into(), HOSTILE.into()];
    hostile.findings = vec![HOSTILE.into()];
    hostile.skipped = vec![HOSTILE.into()];
    hostile.table.rows = vec![vec![HOSTILE.into(), "NaN".into()]];
    hostile.machine = HOSTILE.into();
    let run = run::parse(HOSTILE, &file_of(&hostile)).unwrap();
    let html = page::render(&[run]).unwrap();
    for forbidden in ["<script", "<img", "\u{0}", "\u{1b}"] {
        assert!(!html.contains(forbidden), "{forbidden:?} reached the page");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // Long labels are cut before they reach a chart.
    assert!(!html.contains(&"x".repeat(200)));
}

#[test]
fn two_runs_of_one_experiment_are_compared_with_ratios() {
    if !font() {
        return;
    }
    let a = run::parse("before.json", &file_of(&info(vec![rate(1.0)]))).unwrap();
    let b = run::parse("after.json", &file_of(&info(vec![rate(0.5)]))).unwrap();
    let experiments = page::experiments(std::slice::from_ref(&a));
    assert_eq!(experiments[0].figures.len(), 1);
    let html = page::render(&[a, b]).unwrap();
    // One chart holding both runs, each of B's bars labelled with its ratio to A's.
    assert_eq!(html.matches("data-figure=\"rate\"").count(), 1);
    assert!(html.contains("data-runs=\"A B\""));
    assert_eq!(html.matches("×0.50").count(), 3, "every bar of B at half of A");
    assert!(
        html.contains("A before.json") && html.contains("B after.json"),
        "the legend names the runs"
    );
    assert_eq!(html.matches("<table class=\"results\"").count(), 2);
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            Just(0.0),
            Just(1e308),
            Just(-1e308),
            Just(f64::MIN_POSITIVE),
            -1e9..1e9f64
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Any finite numbers (JSON has no others), any labels: a chart, never a panic.
        #[test]
        fn any_values_draw(values in prop::collection::vec(value(), 0..12), label in ".{0,30}") {
            if chart::load_font().is_err() { return Ok(()); }
            let values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
            let bars = Figure::Bars(Bars { id: "b".into(), title: label.clone(), unit: label.clone(), bars: values.iter().map(|v| Bar::new(label.clone(), Role::Config, *v, &values)).collect(), ceiling: values.first().map(|v| corelane_lab::report::figure::Mark { label: "c".into(), value: *v }) });
            let lines = Figure::Lines(Lines { id: "l".into(), title: label.clone(), x_label: "x".into(), y_label: "y".into(), x_scale: Scale::Percentile, y_scale: Scale::Log, series: vec![Series { name: label.clone(), role: Role::Config, points: values.windows(2).map(|w| (w[0], w[1])).collect() }] });
            let linear = Figure::Lines(Lines { x_scale: Scale::Linear, y_scale: Scale::Linear, ..match &lines { Figure::Lines(l) => l.clone(), _ => unreachable!() } });
            let stacked = Figure::Stacked(Stacked { id: "s".into(), title: "t".into(), unit: "%".into(), parts: vec!["a".into()], bars: values.iter().map(|v| StackedBar { label: label.clone(), values: vec![*v] }).collect() });
            let scatter = Figure::Scatter(Scatter { id: "p".into(), title: "t".into(), x_label: "x".into(), y_label: "y".into(), points: values.windows(2).map(|w| Point { group: label.clone(), label: label.clone(), x: w[0], y: w[1] }).collect() });
            for figure in [&bars, &lines, &linear, &stacked, &scatter] {
                chart::svg(&[("a", figure), ("b", figure)]).unwrap();
            }
        }
    }
}
