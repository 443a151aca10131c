//! A deterministic cost model of seed 003's package-level cases, for machines that have only
//! one processor package (where they cannot be measured). It is arithmetic, not a
//! measurement: a request costs what this machine measured for it on one package, plus the
//! cache lines that must cross packages in each placement times the cost of a crossing.
//! Every constant is printed beside the result.

use serde::Serialize;

/// What a placement moves between contexts, per request.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Assumptions {
    /// Server CPU per request measured here with everything on one package, in ns.
    pub base_ns: f64,
    /// A cache line from another core of the same package (LLC hit), in ns.
    pub llc_ns: f64,
    /// A cache line from the other package (cross-socket snoop), in ns.
    pub remote_ns: f64,
    /// Lines the NIC's DMA and the interrupt handler write per request (descriptors, packet
    /// headers, sk_buff) that the softirq then reads.
    pub dma_lines: f64,
    /// Lines the softirq leaves for the system call that reads the request (socket, sk_buff,
    /// data, wake-up).
    pub socket_lines: f64,
    /// Lines of one message between an application thread and a syscall thread (the request
    /// slot and its completion).
    pub message_lines: f64,
    /// System calls (or messages to a syscall thread) per request.
    pub syscalls: f64,
    /// Lines of the application's working set that the kernel's work in its system calls
    /// evicts from the core's private caches, refetched from the LLC afterwards (the
    /// pollution a syscall thread keeps off the application core).
    pub pollution_lines: f64,
}

impl Assumptions {
    /// Typical two-socket Xeon figures (LLC ≈ 40 ns, remote ≈ 130 ns; Intel's and others'
    /// published latency measurements) and line counts of a small request/response.
    pub fn typical(base_ns: f64) -> Self {
        Self {
            base_ns,
            llc_ns: 40.0,
            remote_ns: 130.0,
            dma_lines: 8.0,
            socket_lines: 16.0,
            message_lines: 2.0,
            syscalls: 2.0,
            pollution_lines: 12.0,
        }
    }
}

/// One modelled placement on a two-package machine whose NIC hangs off package 0.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRow {
    pub case: String,
    pub label: String,
    pub cost_ns: f64,
    /// Requests/s relative to the seed's partition (first row), from 1 / cost.
    pub relative_throughput: f64,
}

/// The seed's package-level cases, cheapest first by construction of the partition.
pub fn two_packages(a: &Assumptions) -> Vec<ModelRow> {
    let local_dma = a.dma_lines * a.llc_ns;
    let remote_dma = a.dma_lines * a.remote_ns;
    let pollution = a.pollution_lines * a.llc_ns;
    let cases: [(&str, &str, f64); 5] = [
        (
            "partition",
            "IRQ on the NIC's package, syscall thread sharing its LLC, app on the same package",
            local_dma + a.socket_lines * a.llc_ns + a.syscalls * a.message_lines * a.llc_ns,
        ),
        (
            "irq-near",
            "IRQ on the NIC's package, app on the same package, no syscall thread",
            local_dma + a.socket_lines * a.llc_ns + pollution,
        ),
        (
            "irq-far",
            "IRQ on the other package (DMA and handler lines cross), app beside the IRQ",
            remote_dma + a.socket_lines * a.llc_ns + pollution,
        ),
        (
            "app-far",
            "IRQ near the NIC, app on the other package, its syscalls read remote lines",
            local_dma + a.socket_lines * a.remote_ns + pollution,
        ),
        (
            "app-far+syscall-lane",
            "IRQ near the NIC, app on the other package, syscall thread beside the IRQ",
            local_dma + a.socket_lines * a.llc_ns + a.syscalls * a.message_lines * a.remote_ns,
        ),
    ];
    let first = a.base_ns + cases[0].2;
    cases
        .iter()
        .map(|(case, label, extra)| {
            let cost = a.base_ns + extra;
            ModelRow {
                case: case.to_string(),
                label: label.to_string(),
                cost_ns: cost,
                relative_throughput: first / cost,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_orders_the_cases_as_the_seed_reports() {
        let rows = two_packages(&Assumptions::typical(7000.0));
        let by = |c: &str| rows.iter().find(|r| r.case == c).unwrap().relative_throughput;
        // A far interrupt and a far application cost; the syscall lane wins most of it back.
        assert!(by("irq-far") < by("irq-near"));
        assert!(by("app-far") < by("app-far+syscall-lane"));
        assert!(by("app-far+syscall-lane") < by("irq-near"));
        assert!((by("partition") - 1.0).abs() < 1e-12);
        assert!(rows.iter().all(|r| r.relative_throughput <= 1.0), "the partition is cheapest");
        // Deterministic: the same inputs give the same figures.
        let again = two_packages(&Assumptions::typical(7000.0));
        assert_eq!(format!("{rows:?}"), format!("{again:?}"));
    }
}
