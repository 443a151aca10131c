//! What one source address may draw from an echo lane: a token bucket per address (GCRA, one
//! time stamp per address), in a table of fixed size allocated once per lane.
//!
//! The table holds [`SOURCES`] addresses in windows of [`WINDOW`] slots, found by a hash keyed
//! at random per lane (a sender cannot aim many addresses at one window). An address not in
//! its window takes the slot of the window whose bucket has been full the longest; a full
//! bucket is exactly a new one, so forgetting it grants nothing. When every slot of the window
//! belongs to an address still spending (its bucket not yet refilled), the newcomer is
//! refused until one refills: the bound below then holds for every address, always. To keep
//! eight addresses from refilling, a sender must keep each drawing at the full rate.
//!
//! Bound: over any stretch of `t` seconds, one address is granted at most
//! `burst + rate × t` answers by one lane (the rate is rounded down to a whole number of
//! nanoseconds between tokens, so never above the one asked).

use std::net::IpAddr;

/// Addresses one lane tracks.
pub const SOURCES: usize = 4096;
/// Slots an address may occupy (a linear probe of this length from its hash).
pub const WINDOW: usize = 8;

/// The defaults of `udp echo`: enough for the lab's open-loop sweeps from one client (up to
/// 320,000 messages/s) with room for a client catching up after a stall.
pub const DEFAULT_RATE: u64 = 500_000;
pub const DEFAULT_BURST: u64 = 50_000;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The address (IPv4 as IPv4-mapped IPv6).
    key: u128,
    /// When the bucket is next full (GCRA's theoretical arrival time), ns on the lane's clock;
    /// 0 for a slot never used.
    full_at: u64,
}

/// One lane's table.
#[derive(Debug)]
pub struct SourceBudget {
    slots: Box<[Slot]>,
    /// Nanoseconds per token.
    interval: u64,
    /// How far ahead of now `full_at` may be and still grant a token: `(burst - 1) × interval`.
    tolerance: u64,
    seed: [u64; 2],
}

impl SourceBudget {
    /// `rate` tokens per second (1 to 10^9), at most `burst` (at least 1) at once.
    pub fn new(rate: u64, burst: u64) -> Self {
        let interval = 1_000_000_000u64.div_ceil(rate.clamp(1, 1_000_000_000));
        Self {
            slots: vec![Slot::default(); SOURCES].into_boxed_slice(),
            interval,
            tolerance: burst.max(1).saturating_sub(1).saturating_mul(interval),
            seed: [fastrand::u64(..) | 1, fastrand::u64(..) | 1],
        }
    }

    /// Grants `source` up to `want` answers at `now` (ns on the lane's clock, never
    /// decreasing, above 0); returns how many it may have.
    pub fn take(&mut self, source: IpAddr, want: u64, now: u64) -> u64 {
        let key = match source {
            IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
            IpAddr::V6(v6) => u128::from(v6),
        };
        let Some(i) = self.slot_of(key, now) else { return 0 };
        let slot = &mut self.slots[i];
        let start = slot.full_at.max(now);
        let ahead = start - now;
        if ahead > self.tolerance {
            return 0;
        }
        let granted = want.min((self.tolerance - ahead) / self.interval + 1);
        slot.full_at = start.saturating_add(granted.saturating_mul(self.interval));
        granted
    }

    /// The slot holding `key`, or the one it may take over (the window's longest full
    /// bucket), or `None` when every slot of its window is still spending.
    fn slot_of(&mut self, key: u128, now: u64) -> Option<usize> {
        let start = self.hash(key);
        let mut oldest: Option<usize> = None;
        for probe in 0..WINDOW {
            let i = (start + probe) % SOURCES;
            let slot = self.slots[i];
            if slot.key == key && slot.full_at != 0 {
                return Some(i);
            }
            if slot.full_at <= now && oldest.is_none_or(|o| slot.full_at < self.slots[o].full_at) {
                oldest = Some(i);
            }
        }
        let i = oldest?;
        self.slots[i] = Slot { key, full_at: 0 };
        Some(i)
    }

    /// A multiply-xor hash keyed per lane: a few cycles (SipHash would be tens of ns per
    /// datagram), and the random key keeps senders from choosing a window.
    fn hash(&self, key: u128) -> usize {
        let (hi, lo) = ((key >> 64) as u64, key as u64);
        let x = (lo ^ self.seed[0]).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (hi ^ self.seed[1]).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        (x ^ (x >> 29)) as usize % SOURCES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    const MS: u64 = 1_000_000;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(n))
    }

    #[test]
    fn the_table_is_128_kib_per_lane() {
        assert_eq!(std::mem::size_of::<Slot>() * SOURCES, 128 << 10, "as SECURITY.md says");
    }

    #[test]
    fn a_burst_then_the_rate() {
        let mut b = SourceBudget::new(1000, 10); // a token per ms
        assert_eq!(b.take(ip(1), 25, 1), 10);
        assert_eq!(b.take(ip(1), 1, 2), 0);
        assert_eq!(b.take(ip(1), 5, 1 + 3 * MS), 3);
        assert_eq!(b.take(ip(2), 4, 1 + 3 * MS), 4, "another address has its own bucket");
        assert_eq!(b.take(ip(1), 100, 1 + 1000 * MS), 10, "refilled to the burst, no more");
    }

    /// Many more addresses than slots: each still gets at most its bucket, and an address
    /// whose bucket is spending is never forgotten (which would hand it a new burst).
    #[test]
    fn a_spray_of_addresses_cannot_reset_a_spending_one() {
        let mut b = SourceBudget::new(1, 5);
        assert_eq!(b.take(ip(7), 5, 1), 5);
        for n in 100..100_000u32 {
            b.take(ip(n), 5, 2);
        }
        assert_eq!(b.take(ip(7), 5, 3), 0, "still spent");
        let held = b.slots.iter().filter(|s| s.full_at > 0).count();
        assert_eq!(held, SOURCES, "the table stays at its size");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever arrives, from however many addresses, no address gets more than
        /// `burst + rate × t` over the run.
        #[test]
        fn no_address_exceeds_its_bucket(
            rate in 1u64..5000,
            burst in 1u64..50,
            arrivals in proptest::collection::vec((0u32..20_000, 1u64..70, 0u64..3 * MS), 1..400),
        ) {
            let mut b = SourceBudget::new(rate, burst);
            let mut now = 1u64;
            let mut granted = std::collections::HashMap::<u32, u64>::new();
            for (who, want, gap) in arrivals {
                now += gap;
                let who = who % 64 + if who > 10_000 { who } else { 0 };
                let got = b.take(ip(who), want, now);
                prop_assert!(got <= want);
                *granted.entry(who).or_default() += got;
            }
            let interval = 1_000_000_000u64.div_ceil(rate);
            for (who, total) in granted {
                prop_assert!(total <= burst + now / interval, "{who}: {total}");
            }
        }
    }
}
