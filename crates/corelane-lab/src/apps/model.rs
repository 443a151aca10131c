//! What two CPUs can and cannot show of the syscall lane, and a per-core model of a machine
//! that has what this one lacks: a spare core near the NIC for the syscall threads, and the
//! load generator on another machine. The model is arithmetic on the exact per-request CPU
//! measured here (no cache or coherence effect is modelled: this VM has no PMU counters),
//! and says so wherever it is printed.

use serde::Serialize;

use super::placement::{CoreKind, Cpus, Lane};
use super::programs::App;
use super::rows::{AppRow, PingRow};

/// One program's lane on a machine with one core for the program and one spare core near
/// the NIC for its syscall threads.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRow {
    pub app: App,
    /// The placement whose rows it is computed from (NC, the seed's partition, when measured).
    pub placement: CoreKind,
    pub lane: Lane,
    /// One core doing everything without a lane: 1 / (CPU per request without it).
    pub one_core_rps: f64,
    /// The program's core with the lane: 1 / (its own threads' CPU per request).
    pub app_core_rps: f64,
    /// The spare core: 1 / (the lane threads' CPU per request).
    pub syscall_core_rps: f64,
    /// The slower of the two cores.
    pub predicted_rps: f64,
    /// `predicted_rps` against `one_core_rps`, in %.
    pub gain_pct: f64,
}

/// For every program: each lane row of one placement (NC if measured) against its no-lane
/// row.
pub fn spare_core(rows: &[AppRow]) -> Vec<ModelRow> {
    let mut out = Vec::new();
    // A batch job has no request rate to model per core (its findings say what it shows).
    let served = |r: &&AppRow| r.job.is_none();
    for base in
        rows.iter().filter(served).filter(|r| r.lane == Lane::None && r.cpu_us_per_request > 0.0)
    {
        let nc_measured = rows.iter().any(|r| r.app == base.app && r.placement == CoreKind::Nc);
        if nc_measured && base.placement != CoreKind::Nc {
            continue;
        }
        if !nc_measured
            && rows.iter().find(|r| r.app == base.app).map(|r| &r.placement)
                != Some(&base.placement)
        {
            continue;
        }
        let lanes = rows
            .iter()
            .filter(|r| r.app == base.app && r.placement == base.placement && r.lane != Lane::None);
        for lane in lanes.filter(|r| r.program_us_per_request > 0.0 && r.lane_us_per_request > 0.0)
        {
            let one_core_rps = 1e6 / base.cpu_us_per_request;
            let app_core_rps = 1e6 / lane.program_us_per_request;
            let syscall_core_rps = 1e6 / lane.lane_us_per_request;
            let predicted_rps = app_core_rps.min(syscall_core_rps);
            out.push(ModelRow {
                app: base.app,
                placement: base.placement,
                lane: lane.lane,
                one_core_rps,
                app_core_rps,
                syscall_core_rps,
                predicted_rps,
                gain_pct: (predicted_rps / one_core_rps - 1.0) * 100.0,
            });
        }
    }
    out
}

/// Sentences computed from the rows.
pub fn findings(rows: &[AppRow], ping: &[PingRow], model: &[ModelRow], cpus: &Cpus) -> Vec<String> {
    let mut out = Vec::new();
    let mut apps: Vec<App> = rows.iter().map(|r| r.app).collect();
    apps.dedup();
    for app in &apps {
        let of_app: Vec<&AppRow> = rows.iter().filter(|r| r.app == *app).collect();
        out.push(format!(
            "{app}: every row's answers checked ({}).",
            of_app
                .iter()
                .flat_map(|r| r.checked.iter().map(String::as_str))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join("; ")
        ));
        if of_app.iter().any(|r| r.job.is_some()) {
            out.extend(job_sentences(&of_app));
            continue;
        }
        let plain: Vec<&&AppRow> = of_app.iter().filter(|r| r.lane == Lane::None).collect();
        if plain.len() > 1 {
            let best = plain.iter().max_by(|a, b| a.rps.median.total_cmp(&b.rps.median));
            let cheapest =
                plain.iter().min_by(|a, b| a.cpu_us_per_request.total_cmp(&b.cpu_us_per_request));
            if let (Some(best), Some(cheapest)) = (best, cheapest) {
                out.push(format!(
                    "{app} without a lane: most requests/s placed {} ({:.0}), least server CPU per request placed {} ({:.2} us); the core-partitioning study found NC best and NS worst.",
                    best.placement, best.rps.median, cheapest.placement, cheapest.cpu_us_per_request
                ));
            }
        }
        for r in of_app.iter().filter(|r| r.lane != Lane::None) {
            out.push(lane_sentence(r));
        }
    }
    if let Some(p) = ping_sentence(ping) {
        out.push(p);
    }
    if rows.iter().any(|r| r.job.is_some()) {
        out.push(format!(
            "What 2 CPUs cannot show of MapReduce: the job is CPU-bound, and placed NS or NC the cluster's JVMs (master, workers, executors) share one CPU (in NC with the driver too), where NZ gives them both CPUs; so its job time mostly says how many CPUs a placement leaves the executors. With a lane every JVM process has its own syscall thread on the softirq CPU {}; the exact CPU per record, split between the JVMs' threads and those carriers, is what carries over to a machine where each executor has cores of its own and the shuffle crosses a real NIC.",
            cpus.softirq
        ));
    }
    if rows.iter().any(|r| r.lane != Lane::None) || ping.iter().any(|p| p.lane != Lane::None) {
        out.push(format!(
            "What 2 CPUs cannot show: there is no spare core near the NIC. The syscall threads run on the softirq CPU {} — beside the bottom halves in NC and NZ, beside the application itself in NS — and the load generator takes CPU {}, so requests/s here measures who shares a CPU with whom; the exact CPU per request, split between the program's threads and the lane's, is what carries over to a larger machine.",
            cpus.softirq, cpus.other
        ));
    }
    for m in model {
        out.push(format!(
            "model (not measured; per-core arithmetic on this run's CPU per request, no cache effects): {} with the {} lane on a machine with a spare core near the NIC and the load generator elsewhere: the program's core would sustain {:.0} req/s and the syscall core {:.0}, so ≈{:.0} req/s, {:+.0}% against one core doing everything without a lane ({:.0} req/s); the same two cores running the program alone would give up to ≈{:.0}.",
            m.app, m.lane, m.app_core_rps, m.syscall_core_rps, m.predicted_rps, m.gain_pct, m.one_core_rps, 2.0 * m.one_core_rps
        ));
    }
    out
}

/// The MapReduce rows of one program: each placement without a lane, then each lane row
/// against its no-lane row (job time, CPU per record, where the CPU went, calls carried).
fn job_sentences(rows: &[&AppRow]) -> Vec<String> {
    let mut out = Vec::new();
    let secs = |r: &AppRow| r.job.as_ref().map_or(0.0, |j| j.job_secs.median);
    let plain: Vec<String> = rows
        .iter()
        .filter(|r| r.lane == Lane::None)
        .map(|r| {
            format!(
                "{} {:.1} s ({:.2} us CPU per record)",
                r.placement,
                secs(r),
                r.cpu_us_per_request
            )
        })
        .collect();
    if !plain.is_empty() {
        out.push(format!(
            "{} without a lane, job time by placement: {}.",
            rows[0].app,
            plain.join(", ")
        ));
    }
    for r in rows.iter().filter(|r| r.lane != Lane::None) {
        let time_change = r.job.as_ref().and_then(|j| j.median_secs_change_pct);
        let calls: u64 = r.delegated.as_ref().map_or(0, |d| d.values().sum());
        let (jvms, shuffled) =
            r.job.as_ref().map_or((0, 0.0), |j| (j.jvms, j.shuffle_write_bytes / 1e6));
        out.push(format!(
            "{} {} with the {} lane: job {:.1} s ({} against no lane), {:.2} us CPU per record ({}), {:.2} us of it on {} syscall thread(s) of {jvms} JVMs on CPU {}; {calls} calls carried; {shuffled:.0} MB shuffled over TCP.",
            r.app,
            r.placement,
            r.lane,
            secs(r),
            crate::report::pct(time_change),
            r.cpu_us_per_request,
            crate::report::pct(r.cpu_change_pct),
            r.lane_us_per_request,
            r.lane_threads,
            r.syscall_cpus.as_deref().unwrap_or("-")
        ));
    }
    out
}

/// One lane row against its no-lane row: rate, CPU, where the CPU went, what was delegated.
fn lane_sentence(r: &AppRow) -> String {
    let calls: u64 = r.delegated.as_ref().map_or(0, |d| d.values().sum());
    let fell_back = match &r.lane_ran {
        Some(ran) if ran != r.lane.id() => {
            format!(" (corelane run ran lane {ran}: {})", r.lane_notes.join("; "))
        }
        _ => String::new(),
    };
    format!(
        "{} {} with the {} lane{fell_back}: {} req/s, {} server CPU per request against no lane ({:.2} us, {:.2} of it on {} syscall thread(s) on CPU {}); {calls} calls delegated.",
        r.app,
        r.placement,
        r.lane,
        crate::report::pct(r.rps_change_pct),
        crate::report::pct(r.cpu_change_pct),
        r.cpu_us_per_request,
        r.lane_us_per_request,
        r.lane_threads,
        r.syscall_cpus.as_deref().unwrap_or("-")
    ) + &in_place_clause(r.in_place_calls)
}

/// What the threads lane left to the program on a contended syscall CPU, if anything.
fn in_place_clause(calls: u64) -> String {
    if calls == 0 {
        return String::new();
    }
    format!(
        " {calls} calls made in the program's own threads: several processes' syscall threads contended for the syscall CPU, where a carried call costs the program's CPU more than the call."
    )
}

/// The side-effect check against the seed's ≤ 4 %.
fn ping_sentence(ping: &[PingRow]) -> Option<String> {
    let base = ping.iter().find(|p| p.lane == Lane::None)?;
    let lanes: Vec<String> = ping
        .iter()
        .filter(|p| p.lane != Lane::None)
        .map(|p| {
            format!(
                "{}: p50 {:.1} us ({}), CPU per round trip {:.2} us ({})",
                p.lane,
                p.p50_us.median,
                crate::report::pct(p.p50_change_pct),
                p.cpu_us_per_round_trip,
                crate::report::pct(p.cpu_change_pct)
            )
        })
        .collect();
    if lanes.is_empty() {
        return None;
    }
    Some(format!(
        "side-effect check (UDP ping-pong, 64 B, the C echo placed NC): without a lane p50 {:.1} us and {:.2} us of echo CPU per round trip; {}. The core-partitioning study measured at most ~4 % loss from the messaging with a syscall thread on its own core; here every call also crosses to the softirq CPU and back, and the lane's threads count in the CPU.",
        base.p50_us.median,
        base.cpu_us_per_round_trip,
        lanes.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(placement: CoreKind, lane: Lane, cpu: f64, program: f64, lane_us: f64) -> AppRow {
        AppRow {
            app: App::Redis,
            placement,
            lane,
            lane_ran: Some(lane.id().into()),
            lane_notes: Vec::new(),
            app_cpus: "0".into(),
            syscall_cpus: Some("1".into()),
            load_cpu: 0,
            load_generator: String::new(),
            rps: crate::summary::Trials::of([1.0]),
            p99_us: None,
            cpu_us_per_request: cpu,
            program_us_per_request: program,
            lane_us_per_request: lane_us,
            rps_change_pct: None,
            cpu_change_pct: None,
            lane_threads: 1,
            checked: vec!["ok".into()],
            delegated: None,
            in_place_calls: 0,
            job: None,
        }
    }

    #[test]
    fn the_spare_core_model_takes_the_slower_core_of_the_nc_rows() {
        let rows = [
            row(CoreKind::Ns, Lane::None, 5.0, 5.0, 0.0),
            row(CoreKind::Ns, Lane::Threads, 9.0, 3.0, 6.0),
            row(CoreKind::Nc, Lane::None, 10.0, 10.0, 0.0),
            row(CoreKind::Nc, Lane::Threads, 12.0, 4.0, 8.0),
        ];
        let m = spare_core(&rows);
        assert_eq!(m.len(), 1, "NC only, when it was measured");
        assert_eq!(m[0].placement, CoreKind::Nc);
        assert!((m[0].one_core_rps - 1e5).abs() < 1e-6);
        assert!((m[0].predicted_rps - 1e6 / 8.0).abs() < 1e-6, "the syscall core is the slower");
        assert!((m[0].gain_pct - 25.0).abs() < 1e-9);
        let ns_only = [
            row(CoreKind::Ns, Lane::None, 5.0, 5.0, 0.0),
            row(CoreKind::Ns, Lane::Uring, 6.0, 2.0, 4.0),
        ];
        let m = spare_core(&ns_only);
        assert_eq!((m.len(), m[0].placement), (1, CoreKind::Ns));
        assert!(
            spare_core(&[row(CoreKind::Nc, Lane::Threads, 9.0, 3.0, 0.0)]).is_empty(),
            "no base, no lane CPU"
        );
    }

    #[test]
    fn a_lane_row_says_what_it_left_in_place_only_when_it_did() {
        let mut r = row(CoreKind::Nc, Lane::Threads, 12.0, 4.0, 8.0);
        assert!(!lane_sentence(&r).contains("own threads"), "{}", lane_sentence(&r));
        r.in_place_calls = 1871;
        let said = lane_sentence(&r);
        assert!(said.contains("1871 calls made in the program's own threads"), "{said}");
        assert!(said.contains("contended for the syscall CPU"), "{said}");
    }
}
