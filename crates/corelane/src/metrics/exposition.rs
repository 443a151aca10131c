//! The registry as text, in the format the scraper asked for, and the helpers every
//! collector writes its families with (a family is one name, help, unit and type, and one
//! sample per label set).

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (the default).
    Prometheus,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` with a quality at least that of `text/plain` (or of a
    /// wildcard), else the Prometheus text format.
    pub fn from_accept(accept: Option<&str>) -> Self {
        let (mut open, mut text) = (0.0f32, 0.0f32);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => open = open.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if open > 0.0 && open >= text {
            Self::OpenMetrics
        } else {
            Self::Prometheus
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The registry encoded in `format` (its collectors read their sources now).
pub fn encode(registry: &Registry, format: Format) -> String {
    let mut text = String::with_capacity(4096);
    // Writing into a String fails only if a collector fails, and ours do not: an error
    // leaves what was written, which the scraper sees as a short exposition.
    let _ = match format {
        Format::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut text, registry)
        }
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, registry),
    };
    text
}

/// A sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Value {
    Count(u64),
    Real(f64),
}

/// One histogram as read: each bucket's upper bound and what fell in it (not cumulative;
/// the last bound `f64::INFINITY`), and the sum of what was observed. Its count is the
/// buckets' sum, so the two always agree.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Histogram {
    pub sum: f64,
    pub buckets: Vec<(f64, u64)>,
}

/// What one family is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Family<'a> {
    /// Without the `corelane_` prefix, the unit or `_total` (the encoder adds them).
    pub name: &'a str,
    pub help: &'a str,
    pub unit: Option<&'a Unit>,
    pub kind: MetricType,
}

impl<'a> Family<'a> {
    pub fn counter(name: &'a str, help: &'a str) -> Self {
        Self { name, help, unit: None, kind: MetricType::Counter }
    }

    pub fn gauge(name: &'a str, help: &'a str) -> Self {
        Self { name, help, unit: None, kind: MetricType::Gauge }
    }

    pub fn histogram(name: &'a str, help: &'a str) -> Self {
        Self { name, help, unit: None, kind: MetricType::Histogram }
    }

    pub fn unit(mut self, unit: &'a Unit) -> Self {
        self.unit = Some(unit);
        self
    }

    /// Writes the family with one sample per label set of `rows`.
    pub fn write<L: EncodeLabelSet>(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        rows: impl IntoIterator<Item = (L, Value)>,
    ) -> fmt::Result {
        let mut family = encoder.encode_descriptor(self.name, self.help, self.unit, self.kind)?;
        for (labels, value) in rows {
            let mut sample = family.encode_family(&labels)?;
            match (self.kind, value) {
                (MetricType::Counter, Value::Count(v)) => {
                    sample.encode_counter::<NoLabelSet, _, u64>(&v, None)?;
                }
                (MetricType::Counter, Value::Real(v)) => {
                    sample.encode_counter::<NoLabelSet, _, u64>(&v, None)?;
                }
                (_, Value::Count(v)) => sample.encode_gauge(&v)?,
                (_, Value::Real(v)) => sample.encode_gauge(&v)?,
            }
        }
        Ok(())
    }

    /// Writes the family (a histogram) with one histogram per lane (label `lane`, its index).
    pub fn histogram_per_lane(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        lanes: impl IntoIterator<Item = Histogram>,
    ) -> fmt::Result {
        let mut family = encoder.encode_descriptor(self.name, self.help, self.unit, self.kind)?;
        for (lane, histogram) in lanes.into_iter().enumerate() {
            let labels = [("lane", lane.to_string())];
            let count = histogram.buckets.iter().map(|&(_, n)| n).sum();
            family.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                histogram.sum,
                count,
                &histogram.buckets,
                None,
            )?;
        }
        Ok(())
    }

    /// Writes the family with one sample per lane (label `lane`, its index).
    pub fn per_lane(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        values: impl IntoIterator<Item = Value>,
    ) -> fmt::Result {
        let rows = values.into_iter().enumerate().map(|(i, v)| ([("lane", i.to_string())], v));
        self.write(encoder, rows)
    }

    /// Writes the family with one sample and no label.
    pub fn single(&self, encoder: &mut DescriptorEncoder<'_>, value: Value) -> fmt::Result {
        self.write(encoder, [(Vec::<(&str, &str)>::new(), value)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One lane's histogram: 2 at most 1, none in (1, 2], 1 beyond; their sum 7.
    #[derive(Debug)]
    struct OneHistogram;

    impl prometheus_client::collector::Collector for OneHistogram {
        fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
            let buckets = vec![(1.0, 2), (2.0, 0), (f64::INFINITY, 1)];
            Family::histogram("sizes", "Sizes")
                .histogram_per_lane(&mut encoder, [Histogram { sum: 7.0, buckets }])
        }
    }

    #[test]
    fn a_histogram_is_cumulative_and_counts_its_buckets() {
        let mut registry = super::super::registry();
        registry.register_collector(Box::new(OneHistogram));
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let text = encode(&registry, format);
            assert!(text.contains("# TYPE corelane_sizes histogram\n"), "{text}");
            // (series, le, value): the labels in either order, the numbers in either form.
            let expected = [
                ("corelane_sizes_bucket", Some(1.0), 2.0),
                ("corelane_sizes_bucket", Some(2.0), 2.0),
                ("corelane_sizes_bucket", Some(f64::INFINITY), 3.0),
                ("corelane_sizes_count", None, 3.0),
                ("corelane_sizes_sum", None, 7.0),
            ];
            for (series, le, value) in expected {
                let found = text.lines().any(|l| {
                    let Some((head, v)) = l.rsplit_once(' ') else { return false };
                    let Some((name, labels)) = head.split_once('{') else { return false };
                    let le_of = labels.split(',').find_map(|p| p.strip_prefix("le=\""));
                    let le_of =
                        le_of.map(|v| v.trim_end_matches(['"', '}']).replace("+Inf", "inf"));
                    name == series
                        && labels.contains("lane=\"0\"")
                        && le_of.and_then(|v| v.parse::<f64>().ok()) == le
                        && v.parse::<f64>().ok() == Some(value)
                });
                assert!(found, "{format:?}: no {series} le {le:?} = {value} in\n{text}");
            }
        }
    }

    #[test]
    fn the_format_follows_the_accept_header() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::from_accept(None), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("*/*")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
        let prefers_text = "application/openmetrics-text;q=0.2, text/plain";
        assert_eq!(Format::from_accept(Some(prefers_text)), Format::Prometheus);
        assert_eq!(
            Format::from_accept(Some("application/openmetrics-text;q=0")),
            Format::Prometheus
        );
        assert_eq!(Format::from_accept(Some("APPLICATION/OpenMetrics-Text")), Format::OpenMetrics);
    }
}
