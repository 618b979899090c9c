//! Replay speed against the stand-in on a paper run, and the size of a recorded paper run.
//!
//! ```sh
//! cargo run --release --example replay_speed [scenario.ron] [repeats]
//! ```
//!
//! For each arm of the scenario (default: the paper's MMLU / MINJA cell on the wheel, 200 tasks,
//! 8 agents, 3 rounds): the fastest of `repeats` (default 5) stand-in runs, the recording run,
//! the trace's size on disk, reading it back, and the fastest of `repeats` strict replays, in
//! agent-decisions per second (tasks × agents × rounds). Times are wall clock on a shared
//! machine: compare the rows of one run.

use memlink::study::trace::Trace;
use memlink::study::trace::replay::{ArmChoice, ReplayOptions, record_arm, replay};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn fastest<T>(repeats: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        let x = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(x);
    }
    (best, out.expect("ran"))
}

fn main() {
    memlink::allocator::keep_freed_pages();
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).map_or("scenarios/paper/mmlu-minja-wheel.ron", String::as_str);
    let repeats: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let ls = match memlink::scenario::load(std::path::Path::new(path)) {
        Ok(ls) => ls,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let scn = &ls.scenario;
    let decisions = f64::from(scn.workload.tasks() * scn.agents * scn.protocol.rounds);
    let dir = std::path::PathBuf::from("target/replay-speed");
    std::fs::create_dir_all(&dir).expect("output folder");
    println!("{path}: {decisions} agent-decisions per arm, fastest of {repeats}");
    println!(
        "{:<14} {:>12} {:>12} {:>10} {:>10} {:>12} {:>12} {:>9}",
        "arm", "stand-in ms", "record ms", "calls", "trace MB", "read ms", "replay ms", "replay/s"
    );
    for arm in &scn.arms {
        let (run, _) = fastest(repeats, || memlink::world::run_arm(scn, &ls.profile, arm, scn.seed, false));
        let (rec, (_, trace)) = fastest(1, || record_arm(&ls, arm, scn.seed));
        let file = dir.join(format!("{}.jsonl", memlink::study::trace::replay::slug(&arm.name)));
        trace.write(&file).expect("trace written");
        let size = std::fs::metadata(&file).expect("trace file").len() as f64 / 1e6;
        let (read, t) = fastest(repeats, || Trace::read(&file).expect("trace reads"));
        let opts = ReplayOptions { arm: ArmChoice::Recorded, mode: None, fallback: None };
        let (rep, out) = fastest(repeats, || replay(&t, &opts).expect("strict replay"));
        assert!(out.arms[0].divergences.is_empty());
        println!(
            "{:<14} {:>12.1} {:>12.1} {:>10} {:>10.2} {:>12.1} {:>12.1} {:>8.0}k",
            arm.name,
            1e3 * run,
            1e3 * rec,
            t.calls.len(),
            size,
            1e3 * read,
            1e3 * rep,
            decisions / rep / 1e3
        );
        println!(
            "{:<14} stand-in {:.0}k decisions/s; replay {:.2}× its time, {:.2}× with reading the trace",
            "",
            decisions / run / 1e3,
            rep / run,
            (rep + read) / run
        );
    }
}
