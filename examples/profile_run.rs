//! Runs one arm of a scenario N times in one process and prints the fastest and the median run:
//! for A/B timing on a noisy machine (compare two builds' minima), and for callgrind (run it with
//! N = 1 and N = 3: the difference is two steady-state runs, without one-off start-up costs).
//!
//! ```sh
//! cargo build --release --example profile_run
//! target/release/examples/profile_run scenarios/paper/mmlu-minja-wheel.ron 30 1   # arm 1: MAPLE-Guard
//! ```
//!
//! Set `EACH=1` to print every run's time.

use memlink::scenario::load;
use memlink::world::run_arm;
use std::path::Path;
use std::process::ExitCode;

// The same allocator as the `memlink` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    memlink::allocator::keep_freed_pages();
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: profile_run <scenario.ron> <runs> [arm index]";
    let (Some(path), Some(runs)) = (args.get(1), args.get(2).and_then(|n| n.parse::<usize>().ok())) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let ls = match load(Path::new(path)) {
        Ok(ls) => ls,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let arm_index = args.get(3).and_then(|a| a.parse::<usize>().ok()).unwrap_or(0);
    let Some(arm) = ls.scenario.arms.get(arm_index) else {
        eprintln!("error: {path} has {} arms, no arm {arm_index}", ls.scenario.arms.len());
        return ExitCode::from(2);
    };
    let each = std::env::var_os("EACH").is_some();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = std::time::Instant::now();
        std::hint::black_box(run_arm(&ls.scenario, &ls.profile, arm, ls.scenario.seed, false).summary.trace_hash);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if each {
            eprintln!("run {:.2} ms", times[times.len() - 1]);
        }
    }
    times.sort_by(f64::total_cmp);
    eprintln!(
        "{}: min {:.2} ms, median {:.2} ms over {} runs",
        arm.name,
        times[0],
        times[times.len() / 2],
        times.len()
    );
    ExitCode::SUCCESS
}
