//! Sizes, counts and durations as people type them on a command line (`4K`, `1MiB`, `500ms`,
//! `2m`), for the CLI and the lab's options alike.

use std::time::Duration;

/// Parses `64`, `4K`, `4KiB`, `1M`, `2MiB`, `1G` (binary multiples).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size: use forms like 512, 4K or 1MiB"))?;
    let mult: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("`{unit}` is not a size unit: use K, M or G")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("`{s}` is too large"))
}

/// Parses a count that must be at least 1 (trials, connections).
pub fn parse_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

/// Parses `10` (seconds), `500ms`, `50us`, `300ns`, `2s`, `1m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("`{s}` is not a duration: use forms like 10, 10s, 500ms or 2m");
    let (num, unit) =
        t.split_at(t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len()));
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" | "µs" => n / 1e6,
        "ns" => n / 1e9,
        "m" | "min" => n * 60.0,
        _ => return Err(bad()),
    };
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("`{s}` is out of range: use 0 to 24 hours"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("4X").unwrap_err().contains("not a size unit"));
        assert!(parse_size("K").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("3"), Ok(3));
        assert!(parse_count("0").unwrap_err().contains("at least 1"));
        assert!(parse_count("two").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_duration("300ns"), Ok(Duration::from_nanos(300)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1").is_err());
    }
}
