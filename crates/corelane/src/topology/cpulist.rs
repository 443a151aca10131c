//! The kernel's CPU list format (`0,2-3`), used by sysfs, taskset and corelane's `--pin`.

use std::fmt;
use std::str::FromStr;

/// An ordered, duplicate-free list of CPU numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<usize>);

/// Why a CPU list did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("empty CPU list: give CPUs like `0`, `0,2` or `0-3`")]
    Empty,
    #[error("`{0}` is not a CPU number or range: use forms like `0`, `0,2` or `0-3`")]
    Malformed(String),
    #[error("range `{0}` runs backwards: write the lower CPU first, e.g. `2-5`")]
    Backwards(String),
    #[error("CPU {0} is beyond the {max} CPUs Linux supports", max = CpuList::MAX_CPU)]
    TooLarge(usize),
    #[error("CPU {0} is named twice: name each CPU once")]
    Repeated(usize),
}

impl CpuList {
    /// Matches CPU_SETSIZE, the largest set sched_setaffinity takes through glibc's cpu_set_t.
    pub const MAX_CPU: usize = 1024;

    pub fn new(mut cpus: Vec<usize>) -> Self {
        cpus.sort_unstable();
        cpus.dedup();
        Self(cpus)
    }

    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }

    /// The hexadecimal mask that /sys/class/net/*/queues/rx-*/rps_cpus expects, in the
    /// comma-separated 32-bit groups of the kernel's bitmap format.
    pub fn to_mask(&self) -> String {
        let Some(&max) = self.0.last() else { return "0".into() };
        let mut words = vec![0u32; max / 32 + 1];
        for &cpu in &self.0 {
            words[cpu / 32] |= 1 << (cpu % 32);
        }
        let mut out = format!("{:x}", words[words.len() - 1]);
        for word in words.iter().rev().skip(1) {
            out.push_str(&format!(",{word:08x}"));
        }
        out
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s, false)
    }
}

impl CpuList {
    /// Parses a list a user wrote, where a CPU named twice (`1,1`, `0-2,1`) is a mistake
    /// (one syscall thread per CPU named), refused as [`CpuListError::Repeated`].
    pub fn parse_distinct(s: &str) -> Result<Self, CpuListError> {
        Self::parse(s, true)
    }

    fn parse(s: &str, distinct: bool) -> Result<Self, CpuListError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(CpuListError::Empty);
        }
        let number = |t: &str| -> Result<usize, CpuListError> {
            let cpu: usize = t.trim().parse().map_err(|_| CpuListError::Malformed(t.into()))?;
            if cpu >= Self::MAX_CPU {
                return Err(CpuListError::TooLarge(cpu));
            }
            Ok(cpu)
        };
        // One flag per CPU: a list repeating `0-1023` a million times (a remote host's
        // reply can) costs 1024 flags, not a billion entries.
        let mut set = vec![false; Self::MAX_CPU];
        for part in s.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (number(lo)?, number(hi)?);
                    if lo > hi {
                        return Err(CpuListError::Backwards(part.into()));
                    }
                    if let Some(cpu) = (lo..=hi).find(|&c| distinct && set[c]) {
                        return Err(CpuListError::Repeated(cpu));
                    }
                    set[lo..=hi].fill(true);
                }
                None => {
                    let cpu = number(part)?;
                    if distinct && set[cpu] {
                        return Err(CpuListError::Repeated(cpu));
                    }
                    set[cpu] = true;
                }
            }
        }
        Ok(Self((0..Self::MAX_CPU).filter(|&cpu| set[cpu]).collect()))
    }
}

impl fmt::Display for CpuList {
    /// Prints the compact kernel form: consecutive CPUs become ranges.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_lists_and_ranges() {
        let list: CpuList = "0,2-3, 7".parse().unwrap();
        assert_eq!(list.cpus(), &[0, 2, 3, 7]);
        assert_eq!(list.to_string(), "0,2-3,7");
    }

    #[test]
    fn a_user_list_naming_a_cpu_twice_is_refused() {
        assert_eq!(CpuList::parse_distinct("1,1"), Err(CpuListError::Repeated(1)));
        assert_eq!(CpuList::parse_distinct("0-2,1"), Err(CpuListError::Repeated(1)));
        assert_eq!(CpuList::parse_distinct("3,0-4"), Err(CpuListError::Repeated(3)));
        assert_eq!(CpuList::parse_distinct("0-1,3").unwrap().cpus(), &[0, 1, 3]);
        // The kernel's and remote hosts' lists are read as sets, as before.
        assert_eq!("1,1".parse::<CpuList>().unwrap().cpus(), &[1]);
    }

    #[test]
    fn rejects_bad_forms_with_the_offending_part() {
        assert_eq!("".parse::<CpuList>(), Err(CpuListError::Empty));
        assert_eq!("a".parse::<CpuList>(), Err(CpuListError::Malformed("a".into())));
        assert_eq!("3-1".parse::<CpuList>(), Err(CpuListError::Backwards("3-1".into())));
        assert_eq!("5000".parse::<CpuList>(), Err(CpuListError::TooLarge(5000)));
        assert!("1,,2".parse::<CpuList>().is_err());
    }

    #[test]
    fn masks_follow_the_kernel_bitmap_format() {
        assert_eq!(CpuList::new(vec![1]).to_mask(), "2");
        assert_eq!(CpuList::new(vec![0, 1]).to_mask(), "3");
        assert_eq!(CpuList::new(vec![33]).to_mask(), "2,00000000");
        assert_eq!(CpuList::default().to_mask(), "0");
    }

    /// A list repeating the widest range a million times (a hostile host's
    /// /sys/devices/system/cpu/online) parses into 1024 CPUs, no more memory than that.
    #[test]
    fn a_repeated_range_costs_no_more_than_the_cpus_it_names() {
        let text = vec!["0-1023"; 1 << 20].join(",");
        let list: CpuList = text.parse().unwrap();
        assert_eq!(list.len(), CpuList::MAX_CPU);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any text: a list or an error, never a panic.
        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in "[-0-9, a\u{80}]{0,40}") {
            let _ = text.parse::<CpuList>();
        }

        #[test]
        fn display_parses_back(cpus in proptest::collection::vec(0usize..200, 1..40)) {
            let list = CpuList::new(cpus);
            prop_assert_eq!(list.to_string().parse::<CpuList>().unwrap(), list);
        }
    }
}
