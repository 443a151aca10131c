//! The per-datagram work a receiver lane adds on top of recvmmsg: checking the header and
//! recording the sequence. Run with `cargo bench -p corelane`.

use corelane::udp::payload;
use corelane::udp::SequenceTracker;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

fn per_datagram(c: &mut Criterion) {
    let mut datagrams = vec![vec![0u8; 32]; 1024];
    for (i, d) in datagrams.iter_mut().enumerate() {
        payload::prefill(d);
        payload::write_header(d, (i % 8) as u32, (i / 8) as u64);
    }
    let mut group = c.benchmark_group("receiver");
    group.throughput(Throughput::Elements(datagrams.len() as u64));
    group.bench_function("check header, 1024 datagrams", |b| {
        b.iter(|| datagrams.iter().filter(|d| payload::read(black_box(d)).is_ok()).count())
    });
    group.bench_function("check + track sequence, 1024 datagrams", |b| {
        let mut tracker = SequenceTracker::new();
        b.iter(|| {
            for d in &datagrams {
                if let Ok(h) = payload::read(black_box(d)) {
                    tracker.record(h.flow, h.seq);
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, per_datagram);
criterion_main!(benches);
