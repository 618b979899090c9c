//! Long fuzz campaigns over every input memlink reads (see `memlink::testkit::fuzz`):
//!
//! ```sh
//! cargo run --release --example fuzz -- --cases 100000 [--seed S] [--deadline SECONDS]
//! ```
//!
//! First checks concurrent writers (two at once on one folder, 200 times). Prints progress and
//! the tallies (ran, accepted, refused with a positioned error, cases with a hostile mutation), writes each
//! rule breach to `target/fuzz/failures/case-N.txt` (its seed, what broke, the input) and exits
//! non-zero if there was any. A case that takes longer than the deadline (default 60 s) is a
//! hang: it is written to `target/fuzz/failures/hang-N.txt` and the campaign stops with exit 3.

use memlink::testkit::fuzz::{Config, Corpus, run};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    memlink::allocator::keep_freed_pages();
    let args: Vec<String> = std::env::args().collect();
    let num = |name: &str, default: u64| -> u64 {
        match arg(&args, name) {
            None => default,
            Some(v) => v.parse().unwrap_or_else(|_| {
                eprintln!("error: {name} takes a whole number, got {v:?}");
                std::process::exit(2)
            }),
        }
    };
    let cfg = Config { cases: num("--cases", 10_000), seed: num("--seed", 1), ..Config::default() };
    let deadline = Duration::from_secs(num("--deadline", 60));
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target/fuzz/failures");
    let corpus = Corpus::load(&root).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    eprintln!("fuzz: {} seeds, {} cases, mutation seed {}", corpus.seeds.len(), cfg.cases, cfg.seed);

    // The watchdog: the case in flight, when it started, and its input.
    let current = Arc::new(AtomicU64::new(u64::MAX));
    let started = Arc::new(Mutex::new((Instant::now(), String::new())));
    {
        let (current, started, out) = (current.clone(), started.clone(), out.clone());
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(500));
                let case = current.load(Ordering::SeqCst);
                let Ok(s) = started.lock() else { continue };
                if case != u64::MAX && s.0.elapsed() > deadline {
                    let _ = std::fs::create_dir_all(&out);
                    let file = out.join(format!("hang-{case}.txt"));
                    let _ = std::fs::write(&file, &s.1);
                    eprintln!(
                        "\nfuzz: case {case} still running after {deadline:?}: a hang; input in {}",
                        file.display()
                    );
                    std::process::exit(3);
                }
            }
        });
    }
    let t0 = Instant::now();
    // Concurrent writers, a class of its own: two writers on one folder, 200 times.
    let writers = memlink::testkit::fuzz::concurrent_writers(&root.join("target/fuzz/concurrent"), 200);
    eprintln!("  concurrent writers: 200 pairs on one folder, {} problems", writers.len());
    for w in &writers {
        eprintln!("FAIL concurrent writers: {w}");
    }
    let report = run(
        &corpus,
        &cfg,
        &mut |case, seed, input| {
            if let Ok(mut s) = started.lock() {
                *s = (Instant::now(), format!("seed: {}\n\n{input}", seed.path.display()));
            }
            current.store(case, Ordering::SeqCst);
        },
        &mut |case, r| {
            if (case + 1) % 1000 == 0 || case + 1 == cfg.cases {
                let rate = r.cases as f64 / t0.elapsed().as_secs_f64();
                eprint!(
                    "\r  {:>7}/{} cases · {:.0}/s · ran {} · accepted {} · refused {} · failures {}   ",
                    r.cases,
                    cfg.cases,
                    rate,
                    r.ran,
                    r.accepted,
                    r.refused,
                    r.failures.len()
                );
            }
        },
    );
    current.store(u64::MAX, Ordering::SeqCst);
    eprintln!();
    for f in &report.failures {
        let _ = std::fs::create_dir_all(&out);
        let file = out.join(format!("case-{}.txt", f.case));
        let _ =
            std::fs::write(&file, format!("seed: {}\nkind: {:?}\n{}\n\n{}", f.path.display(), f.kind, f.what, f.input));
        eprintln!("FAIL case {} ({:?} {}): {} — input in {}", f.case, f.kind, f.path.display(), f.what, file.display());
    }
    for (kind, n, secs) in &report.per_kind {
        eprintln!("  {:<24} {n:>7} cases  {:>8.1} s  {:>7.1} ms/case", kind.name(), secs, 1000.0 * secs / *n as f64);
    }
    println!(
        "{} cases in {:.1} s ({} with a hostile mutation): {} ran, {} accepted without a run, {} refused with a positioned error, {} failures",
        report.cases,
        t0.elapsed().as_secs_f64(),
        report.hostile,
        report.ran,
        report.accepted,
        report.refused,
        report.failures.len() + writers.len()
    );
    if !report.failures.is_empty() || !writers.is_empty() {
        std::process::exit(1);
    }
}
