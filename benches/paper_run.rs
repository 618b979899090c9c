//! One full paper run per topology and arm: MMLU / MINJA (200 tasks, 8 agents, 3 rounds) on
//! the three topologies (`paper_run`), and the wheel cell of every other setting
//! (`paper_settings`). Throughput is reported in agent-decisions (tasks × agents × rounds).
//!
//! Run: `cargo bench --bench paper_run` (one group: `cargo bench --bench paper_run -- paper_settings`)

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memlink::scenario::load;
use memlink::world::run_arm;
use std::hint::black_box;
use std::path::Path;

// The same allocator as the `memlink` binary, so the bench measures what users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn paper_runs(c: &mut Criterion) {
    // And its allocator setting.
    memlink::allocator::keep_freed_pages();
    let mut group = c.benchmark_group("paper_run");
    group.sample_size(20);
    for topo in ["wheel", "chain", "tree"] {
        let path = format!("{}/scenarios/paper/mmlu-minja-{topo}.ron", env!("CARGO_MANIFEST_DIR"));
        let ls = load(Path::new(&path)).expect("bundled scenario loads");
        let s = &ls.scenario;
        let decisions = u64::from(s.agents) * u64::from(s.protocol.rounds) * u64::from(s.workload.tasks());
        group.throughput(Throughput::Elements(decisions));
        for arm in &s.arms {
            let id = format!("{topo}/{}", arm.name.replace(' ', "_"));
            group.bench_function(id, |b| {
                b.iter(|| black_box(run_arm(s, &ls.profile, arm, s.seed, false).summary.trace_hash))
            });
        }
    }
    group.finish();
}

fn paper_settings(c: &mut Criterion) {
    memlink::allocator::keep_freed_pages();
    let mut group = c.benchmark_group("paper_settings");
    group.sample_size(10);
    for setting in ["longmemeval-memorygraft", "appworld-agentpoison", "csqa-promptinject", "injectagent-toolattack"] {
        let path = format!("{}/scenarios/paper/{setting}-wheel.ron", env!("CARGO_MANIFEST_DIR"));
        let ls = load(Path::new(&path)).expect("bundled scenario loads");
        let s = &ls.scenario;
        let decisions = u64::from(s.agents) * u64::from(s.protocol.rounds) * u64::from(s.workload.tasks());
        group.throughput(Throughput::Elements(decisions));
        for arm in &s.arms {
            let id = format!("{setting}/{}", arm.name.replace(' ', "_"));
            group.bench_function(id, |b| {
                b.iter(|| black_box(run_arm(s, &ls.profile, arm, s.seed, false).summary.trace_hash))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, paper_runs, paper_settings);
criterion_main!(benches);
