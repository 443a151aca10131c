//! One task's procfs lines as text — read on this machine, or a remote host's reply — parsed
//! into numbers or refused: nothing here indexes or slices by a position the text chose, so
//! no text (a comm holding `)` and spaces, a cut line, a huge number, invalid UTF-8 made
//! lossy) can panic.

/// The runtime (ns on a CPU, the first field) of a `/proc/PID/task/TID/schedstat` line.
pub fn schedstat_runtime(line: &str) -> Option<u64> {
    line.split_ascii_whitespace().next()?.parse().ok()
}

/// User and system time, in clock ticks (fields 14 and 15), of a `/proc/PID/stat` line. The
/// command name is in parentheses and may itself hold `)` and spaces: the fields start after
/// the last `)`.
pub fn stat_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    let mut fields = after_comm.split_ascii_whitespace();
    // After the comm: state is the first field, utime the 12th, stime the 13th.
    let utime = fields.nth(11)?.parse().ok()?;
    let stime = fields.next()?.parse().ok()?;
    Some((utime, stime))
}

/// The state letter (`R`, `S`, `Z`…, the first field after the comm) and the start time (in
/// clock ticks after boot, the 20th) of a `/proc/PID/stat` line: together they tell a process
/// from a later one with its PID, and whether it has ended.
pub fn stat_state_and_start(stat: &str) -> Option<(char, u64)> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    let mut fields = after_comm.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_real_lines_and_refuses_others() {
        let line = "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 5 0 0";
        assert_eq!(stat_cpu_ticks(line), Some((7, 3)));
        for bad in
            ["", ")", "1 (x)", "1 (x)\u{e9}", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 -1 2"]
        {
            assert_eq!(stat_cpu_ticks(bad), None, "{bad:?}");
        }
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(stat_cpu_ticks(&own).is_some(), "{own}");
        assert!(matches!(stat_state_and_start(&own), Some((_, s)) if s > 0), "{own}");
        assert_eq!(stat_state_and_start(line), Some(('S', 5)));
        assert_eq!(stat_state_and_start(")"), None);
        assert_eq!(stat_state_and_start("1 (x)\u{e9}"), None);
        assert_eq!(schedstat_runtime("123 4 5\n"), Some(123));
        assert_eq!(schedstat_runtime("99999999999999999999 1 1"), None);
        assert_eq!(schedstat_runtime(""), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn any_text_parses_or_is_refused_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = stat_cpu_ticks(&text);
            let _ = schedstat_runtime(&text);
        }
    }
}
