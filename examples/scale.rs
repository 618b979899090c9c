//! Scale: time, peak memory and the growth of both with team size (issue 20's instrument).
//!
//! ```sh
//! cargo run --release --example scale                 # 100, 1,000, 10,000 agents, 20 tasks
//! cargo run --release --example scale -- 20 100,1000  # tasks, sizes
//! cargo run --release --example scale -- 200 10000 32:lru  # and a store capacity
//! ```
//!
//! For each topology (Barabási–Albert m = 2, and a sparse Erdős–Rényi graph of mean degree 4),
//! size and arm (No Defense, MAPLE-Guard), it runs one arm of MMLU / MINJA with 10% attackers
//! (hub-placed), 3 rounds and handoffs, in a child process of its own, so each row's peak RSS is
//! that arm's alone (`VmHWM`). It prints a row per run — agent-decisions (tasks × agents ×
//! rounds), wall seconds, µs per decision, peak RSS — and, per topology and arm, the log-log
//! slope of wall time against agent-decisions over the sizes (1.0: linear). Wall clock on a
//! shared machine: compare rows of one run, not across days. A third argument `N:policy`
//! (`fifo`, `lru` or `lowestq`) bounds every store at N items (`protocol.capacity`, off in the
//! paper's runs). Each run plans a large team's calls on rayon's threads (`RAYON_NUM_THREADS`,
//! inherited by the children); the same bytes for any count.

use std::process::Command;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TOPOLOGIES: [(&str, &str); 2] = [("ba2", "BarabasiAlbert(2)"), ("sparse", "RANDOM")];
const ARMS: [(&str, &str); 2] = [("No Defense", "NoDefense"), ("MAPLE-Guard", "Maple(())")];

/// The scenario text of one run (the sparse graph's p gives a mean degree of 4).
fn scenario(topology: &str, agents: u32, tasks: u32, arm: usize, capacity: &str) -> String {
    let topo = if topology == "RANDOM" {
        format!("Random(Some({:.6}))", (4.0 / f64::from(agents - 1)).min(1.0))
    } else {
        topology.to_string()
    };
    let (name, guard) = ARMS[arm];
    let capacity = match capacity.split_once(':') {
        Some((n, policy)) => {
            let policy = match policy {
                "fifo" => "Fifo",
                "lru" => "Lru",
                _ => "LowestQ",
            };
            format!(", capacity: Some((items: {n}, policy: {policy}))")
        }
        None => String::new(),
    };
    format!(
        r#"(
    name: "scale",
    seed: 42,
    agents: {agents},
    attackers: Count({attackers}),
    placement: HighestDegree,
    topology: {topo},
    workload: Mmlu((tasks: {tasks}, pool: 500)),
    attack: Minja(()),
    protocol: (rounds: 3, top_k: 3, handoffs: true{capacity}),
    backbone: "qwen3.5-122b-a10b",
    arms: [(name: "{name}", guard: {guard})],
)"#,
        attackers = (agents / 10).max(1)
    )
}

/// Peak resident set of this process in bytes (`VmHWM`), if the kernel says.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Child: one run; prints `wall_seconds peak_rss_bytes decisions`.
fn child(topology: &str, agents: u32, tasks: u32, arm: usize, capacity: &str) -> Result<(), String> {
    let text = scenario(topology, agents, tasks, arm, capacity);
    let path = std::path::Path::new("scenarios/scale/generated.ron");
    let ls = memlink::scenario::load_str(&text, path).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let r = memlink::run::run_scenario(&ls, 42);
    let wall = t.elapsed().as_secs_f64();
    let decisions = u64::from(tasks) * u64::from(agents) * 3;
    assert_eq!(r.arms.len(), 1);
    println!("{wall} {} {decisions}", peak_rss().unwrap_or(0));
    Ok(())
}

/// Least-squares slope of log y on log x.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let (lx, ly): (Vec<f64>, Vec<f64>) = points.iter().map(|(x, y)| (x.ln(), y.ln())).unzip();
    let (mx, my) = (lx.iter().sum::<f64>() / n, ly.iter().sum::<f64>() / n);
    let sxy: f64 = lx.iter().zip(&ly).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = lx.iter().map(|x| (x - mx) * (x - mx)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

fn main() {
    memlink::allocator::keep_freed_pages();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let parse = |i: usize| args.get(i).and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
        let capacity = args.get(6).map_or("", String::as_str);
        if let Err(e) = child(&args[2], parse(3), parse(4), parse(5) as usize, capacity) {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
        return;
    }
    let tasks: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let sizes: Vec<u32> = args
        .get(2)
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1_000, 10_000]);
    let capacity = args.get(3).cloned().unwrap_or_default();
    if !capacity.is_empty() {
        let ok = capacity
            .split_once(':')
            .is_some_and(|(n, p)| n.parse::<usize>().is_ok_and(|n| n > 0) && ["fifo", "lru", "lowestq"].contains(&p));
        if !ok {
            eprintln!("error: capacity: expected N:fifo, N:lru or N:lowestq with N >= 1, got `{capacity}`");
            std::process::exit(2);
        }
        println!("store capacity {capacity}\n");
    }
    let exe = std::env::current_exe().expect("own path");
    // A large team's calls within a round run on rayon's threads; the children inherit
    // `RAYON_NUM_THREADS`.
    println!("threads per run: {} (set RAYON_NUM_THREADS to change)\n", rayon::current_num_threads());
    println!("| topology | arm | agents | tasks | agent-decisions | wall (s) | µs/decision | peak RSS (MB) |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut slopes = Vec::new();
    for (label, topology) in TOPOLOGIES {
        for (arm, (arm_name, _)) in ARMS.iter().enumerate() {
            let mut points = Vec::new();
            for &n in &sizes {
                let out = Command::new(&exe)
                    .args(["--child", topology, &n.to_string(), &tasks.to_string(), &arm.to_string(), &capacity])
                    .output()
                    .expect("child runs");
                let text = String::from_utf8_lossy(&out.stdout);
                let f: Vec<f64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                if !out.status.success() || f.len() != 3 {
                    println!(
                        "| {label} | {arm_name} | {n} | {tasks} | – | refused or failed: {} |  |  |",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                    continue;
                }
                let (wall, rss, decisions) = (f[0], f[1], f[2]);
                points.push((decisions, wall));
                println!(
                    "| {label} | {arm_name} | {n} | {tasks} | {decisions:.0} | {wall:.2} | {:.1} | {:.0} |",
                    1e6 * wall / decisions,
                    rss / 1e6
                );
            }
            slopes.push((label, *arm_name, slope(&points)));
        }
    }
    println!();
    for (label, arm, s) in slopes {
        match s {
            Some(s) => println!("log-log slope of wall time against agent-decisions, {label}, {arm}: {s:.2}"),
            None => println!("log-log slope, {label}, {arm}: fewer than two sizes ran"),
        }
    }
}
