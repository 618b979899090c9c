//! What LongMemEval prompts hold, per arm, and what the team answers: of the benign agents'
//! last-round prompts, how many hold the evidence round (the user's own statement of the
//! answer) and how many a confuser round (another speaker naming another candidate, or, with
//! `confusers: Unnamed`, naming none), and each arm's MDSR at the last round. The tables in
//! docs/calibration.md ("Qwen's LongMemEval gap: the confusers").
//!
//! Run: `cargo run --release --example confusers -- <scenario.ron> [--seeds 3,4,5] [--reported-weight W]`
//! (a few seconds per seed). `--reported-weight` sets the profile's `reported_weight` (the
//! pull of a candidate named in someone else's words, relative to the user's own statement;
//! 1 in every committed profile) before the runs.

use memlink::scenario::Attackers;
use memlink::world::World;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let usage = "usage: confusers <longmemeval scenario.ron> [--seeds 3,4,5] [--reported-weight W]";
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or(usage)?;
    let mut ls = memlink::scenario::load(Path::new(&path)).map_err(|e| e.to_string())?;
    let mut seeds = vec![ls.scenario.seed];
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(usage)?;
        match flag.as_str() {
            "--seeds" => {
                seeds = value
                    .split(',')
                    .map(|s| s.trim().parse::<u64>().map_err(|_| format!("--seeds: `{s}` is not a whole number")))
                    .collect::<Result<_, _>>()?;
            }
            "--reported-weight" => {
                let w = value.parse::<f64>().map_err(|_| format!("--reported-weight: `{value}` is not a number"))?;
                ls.profile.model.reported_weight = w;
                ls.profile.check().map_err(|(f, e)| format!("--reported-weight: `{f}`: {e}"))?;
            }
            _ => return Err(usage.into()),
        }
    }
    let Attackers::Ids(attackers) = &ls.scenario.attackers else {
        return Err(format!("{path}: expected `attackers: Ids([...])`, so that the benign agents are known"));
    };
    let last = ls.scenario.protocol.rounds.saturating_sub(1);
    println!(
        "{path}, {}, reported_weight {}, seeds {seeds:?}: the benign agents' round-{} prompts",
        ls.profile.name,
        ls.profile.model.reported_weight,
        last + 1
    );
    println!();
    println!(
        "| arm | prompts | with the evidence round | with a confuser round | MDSR@{} (mean over seeds) |",
        last + 1
    );
    println!("|---|---|---|---|---|");
    for arm in &ls.scenario.arms {
        let (mut prompts, mut evidence, mut confuser, mut mdsr) = (0, 0, 0, 0.0);
        for &seed in &seeds {
            let (run, insp) = World::new(&ls.scenario, &ls.profile, arm, seed, false).run_inspected();
            let (mut p, mut e, mut c) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
            for (task, round, reader, id, _, _) in &insp.evidence {
                if *round != last || attackers.contains(reader) {
                    continue;
                }
                p.insert((*task, *reader));
                let text = &insp.bank.get(*id).experience;
                // The two templates of `workload::longmemeval::build_haystack`.
                if text.contains("Thanks for sharing, I will remember that.") {
                    e.insert((*task, *reader));
                }
                if text.contains("My cousin mentioned") {
                    c.insert((*task, *reader));
                }
            }
            (prompts, evidence, confuser) = (prompts + p.len(), evidence + e.len(), confuser + c.len());
            mdsr += run.summary.rounds.get(last as usize).map_or(0.0, |r| r.mdsr_strict);
        }
        let share = |n: usize| 100.0 * n as f64 / prompts.max(1) as f64;
        println!(
            "| {} | {prompts} | {evidence} ({:.0}%) | {confuser} ({:.0}%) | {:.1} |",
            arm.name,
            share(evidence),
            share(confuser),
            100.0 * mdsr / seeds.len() as f64
        );
    }
    Ok(())
}
