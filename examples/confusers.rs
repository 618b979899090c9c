//! What LongMemEval prompts hold, per arm: of the benign agents' last-round prompts, how many
//! hold the evidence round (the user's own statement of the answer) and how many a confuser
//! round (another speaker naming another candidate, or, with `confusers: Unnamed`, naming
//! none). The table in docs/calibration.md ("Qwen's LongMemEval gap: the confusers").
//!
//! Run: `cargo run --release --example confusers -- scenarios/ablations/confusers-longmemeval-named.ron [seed]`
//! (a few seconds; the seed defaults to the scenario's).

use memlink::scenario::Attackers;
use memlink::world::World;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: confusers <longmemeval scenario.ron> [seed]");
        return ExitCode::from(2);
    };
    let ls = match memlink::scenario::load(Path::new(&path)) {
        Ok(ls) => ls,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let seed = match args.next().map(|s| s.parse::<u64>()) {
        None => ls.scenario.seed,
        Some(Ok(s)) => s,
        Some(Err(_)) => {
            eprintln!("error: the seed must be a whole number");
            return ExitCode::from(2);
        }
    };
    let Attackers::Ids(attackers) = &ls.scenario.attackers else {
        eprintln!("error: {path}: expected `attackers: Ids([...])`, so that the benign agents are known");
        return ExitCode::from(2);
    };
    let last = ls.scenario.protocol.rounds.saturating_sub(1);
    println!("{path}, seed {seed}: the benign agents' round-{} prompts", last + 1);
    println!();
    println!("| arm | prompts | with the evidence round | with a confuser round |");
    println!("|---|---|---|---|");
    for arm in &ls.scenario.arms {
        let (_, insp) = World::new(&ls.scenario, &ls.profile, arm, seed, false).run_inspected();
        let (mut prompts, mut evidence, mut confuser) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for (task, round, reader, id, _, _) in &insp.evidence {
            if *round != last || attackers.contains(reader) {
                continue;
            }
            prompts.insert((*task, *reader));
            let text = &insp.bank.get(*id).experience;
            // The two templates of `workload::longmemeval::build_haystack`.
            if text.contains("Thanks for sharing, I will remember that.") {
                evidence.insert((*task, *reader));
            }
            if text.contains("My cousin mentioned") {
                confuser.insert((*task, *reader));
            }
        }
        let share = |n: usize| 100.0 * n as f64 / prompts.len().max(1) as f64;
        println!(
            "| {} | {} | {} ({:.0}%) | {} ({:.0}%) |",
            arm.name,
            prompts.len(),
            evidence.len(),
            share(evidence.len()),
            confuser.len(),
            share(confuser.len())
        );
    }
    ExitCode::SUCCESS
}
