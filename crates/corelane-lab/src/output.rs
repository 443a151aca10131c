//! What corelane children print with `--json`, read into the library's own types: one JSON
//! object a line, `{"type":"ready",…}`, `{"type":"interval","interval":{…}}` and
//! `{"type":"summary","summary":{…}}`. A line that does not parse as the type the library
//! prints — a renamed or missing field — is an error naming the child, the field and the
//! line, never a silent zero in a results table.

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::LabError;

/// One line of a corelane child's JSON output.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[serde(bound(deserialize = "I: DeserializeOwned, S: DeserializeOwned"))]
pub enum Line<I, S> {
    /// Bound and about to start (the rest of the line describes what was bound).
    Ready {},
    Interval {
        interval: I,
    },
    Summary {
        summary: S,
    },
}

/// Parses one line of `child`'s output.
pub fn parse<I: DeserializeOwned, S: DeserializeOwned>(
    child: &str,
    line: &str,
) -> Result<Line<I, S>, LabError> {
    serde_json::from_str(line).map_err(|source| LabError::ChildJson {
        child: child.to_string(),
        line: corelane::child_output::printable(line, 300),
        source,
    })
}

/// The summary among every line `child` printed; every line must parse.
pub fn summary<I: DeserializeOwned, S: DeserializeOwned>(
    child: &str,
    lines: &[String],
) -> Result<S, LabError> {
    let mut found = None;
    for line in lines {
        if let Line::Summary { summary } = parse::<I, S>(child, line)? {
            found = Some(summary);
        }
    }
    found.ok_or_else(|| LabError::ChildOutput {
        child: child.to_string(),
        problem: "printed no summary line".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use corelane::tcp::load::{LoadInterval, LoadSummary};
    use corelane::udp::{RecvInterval, RecvSummary};

    #[test]
    fn reads_the_library_types() {
        let line = r#"{"type":"interval","interval":{"index":2,"at_secs":2.0,"requests_per_sec":10.0,"responses":10,"errors":0}}"#;
        let Line::<LoadInterval, LoadSummary>::Interval { interval } =
            parse("corelane load", line).unwrap()
        else {
            panic!("not an interval");
        };
        assert_eq!(interval.index, 2);
        assert!(matches!(
            parse::<LoadInterval, LoadSummary>("x", r#"{"type":"ready","addr":"1.2.3.4:5"}"#),
            Ok(Line::Ready {})
        ));
    }

    /// A renamed field is an error that names it, not a zero.
    #[test]
    fn a_missing_field_is_named() {
        let line = r#"{"type":"interval","interval":{"index":2,"at_secs":2.0,"rps":10.0,"responses":10,"errors":0}}"#;
        let err = parse::<LoadInterval, LoadSummary>("corelane load", line).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("corelane load") && text.contains("requests_per_sec"), "{text}");
    }

    #[test]
    fn a_missing_summary_and_a_foreign_line_are_errors() {
        let none = summary::<RecvInterval, RecvSummary>("rx", &[]).unwrap_err().to_string();
        assert!(none.contains("no summary"), "{none}");
        let foreign = summary::<RecvInterval, RecvSummary>("rx", &["hello".to_string()]);
        assert!(matches!(foreign, Err(LabError::ChildJson { .. })));
    }
}
