//! Rates and the seed's per-second line: `1.114M pps 34.007MiB / 285.271Mb`.

use std::time::Duration;

/// Datagrams and payload bytes over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rate {
    pub pps: f64,
    /// Payload bytes per second.
    pub bytes_per_sec: f64,
}

impl Rate {
    pub fn over(datagrams: u64, bytes: u64, elapsed: Duration) -> Self {
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            return Self::default();
        }
        Self { pps: datagrams as f64 / secs, bytes_per_sec: bytes as f64 / secs }
    }

    pub fn mib_per_sec(&self) -> f64 {
        self.bytes_per_sec / (1024.0 * 1024.0)
    }

    /// Megabits per second (10^6 bits), as the UDP study's receiver prints.
    pub fn mbit_per_sec(&self) -> f64 {
        self.bytes_per_sec * 8.0 / 1e6
    }
}

/// The UDP study's receiver line: millions of packets, MiB and megabits per second.
pub fn format_rate_line(rate: Rate) -> String {
    format!(
        "{:.3}M pps {:.3}MiB / {:.3}Mb",
        rate.pps / 1e6,
        rate.mib_per_sec(),
        rate.mbit_per_sec()
    )
}

/// Median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 0 { (v[mid - 1] + v[mid]) / 2.0 } else { v[mid] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_the_seed_line() {
        // Seed 000, Gambar 15, first line: 1,114,340 datagrams of 32 bytes in one second.
        let rate = Rate::over(1_114_340, 1_114_340 * 32, Duration::from_secs(1));
        assert_eq!(format_rate_line(rate), "1.114M pps 34.007MiB / 285.271Mb");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn zero_interval_is_zero_rate() {
        assert_eq!(Rate::over(5, 5, Duration::ZERO), Rate::default());
    }
}
