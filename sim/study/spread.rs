//! `memlink plot <scenario> --kind spread`: how poison spread in one run of a scenario. Every arm
//! runs on the seed with a [`crate::eval::spread::SpreadTracer`], and the figure shows, per arm,
//! the communication graph with each agent coloured by when poison first reached its prompt and
//! the edges poison crossed ([`crate::report::spread`]). Teams of more than 60 agents get the
//! aggregated view instead: the share of benign agents exposed by hop distance from the nearest
//! attacker, a bar per arm.

use crate::engine::Streams;
use crate::error::Result;
use crate::report::spread::{Layout, SpreadPanel};
use crate::scenario::LoadedScenario;
use crate::topology::{CommGraph, Topology};
use std::path::{Path, PathBuf};

/// Teams larger than this get the aggregated view.
pub const MAX_DRAWN_AGENTS: u32 = 60;

/// Runs the scenario's arms on `seed` and draws the spread figure into `out` (default:
/// `runs/<name>/seed-<seed>/spread.svg`); returns its path.
pub fn draw(ls: &LoadedScenario, seed: u64, out: Option<&Path>) -> Result<PathBuf> {
    let scn = &ls.scenario;
    let file = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("runs").join(&scn.name).join(format!("seed-{seed}")).join("spread.svg"));
    let (result, spreads) = crate::run::run_spread(ls, seed);
    // The run's own graph: the topology stream of this seed, as the world builds it.
    let graph = CommGraph::build(&scn.topology, scn.agents, &Streams::new(seed));
    let n = scn.agents;
    let edges: Vec<(u32, u32)> = (0..n).flat_map(|a| graph.out(a).iter().map(move |&b| (a, b))).collect();
    let tasks = result.arms.first().map_or(1, |a| a.tasks.max(1));
    let rounds = scn.protocol.rounds.max(1);
    let title = if n > MAX_DRAWN_AGENTS {
        format!("{}, seed {seed}", scn.name)
    } else {
        format!("{}: where poison reached the agents' prompts (seed {seed})", scn.name)
    };
    if n > MAX_DRAWN_AGENTS {
        return aggregated(&file, &title, &graph, &result, &spreads).map(|_| file);
    }
    let panels: Vec<SpreadPanel> = spreads
        .iter()
        .zip(&result.arms)
        .map(|((arm, t), s)| {
            let mut attackers = vec![false; n as usize];
            s.attackers.iter().for_each(|a| attackers[*a as usize] = true);
            let exposure: Vec<Option<f64>> = t
                .first_exposure
                .iter()
                .map(|e| e.map(|(task, round)| (f64::from(task) + f64::from(round) / f64::from(rounds)) / tasks as f64))
                .collect();
            let exposed = (0..n as usize).filter(|&i| !attackers[i] && exposure[i].is_some()).count();
            let benign = attackers.iter().filter(|a| !**a).count();
            SpreadPanel {
                title: format!("{arm}: {exposed} of {benign} benign agents exposed"),
                exposure,
                attackers,
                poison_edges: t.edges.iter().map(|(&(a, b), &c)| (a, b, c)).collect(),
            }
        })
        .collect();
    let layout = match scn.topology {
        Topology::Wheel | Topology::Star => Layout::Hub,
        Topology::Chain => Layout::Line,
        Topology::Tree => Layout::Tree,
        _ => Layout::Circle,
    };
    crate::report::spread::spread(&file, &title, layout, &edges, &panels, ("task 1", &format!("task {tasks}")))?;
    Ok(file)
}

/// Hop distance from the nearest attacker along the graph's edges (`None`: unreachable).
pub fn hops_from(graph: &CommGraph, sources: &[u32]) -> Vec<Option<u32>> {
    let mut dist = vec![None; graph.len()];
    let mut queue = std::collections::VecDeque::new();
    for &s in sources {
        dist[s as usize] = Some(0);
        queue.push_back(s);
    }
    while let Some(a) = queue.pop_front() {
        let d = dist[a as usize].expect("queued with a distance");
        for &b in graph.out(a) {
            if dist[b as usize].is_none() {
                dist[b as usize] = Some(d + 1);
                queue.push_back(b);
            }
        }
    }
    dist
}

fn aggregated(
    file: &Path,
    title: &str,
    graph: &CommGraph,
    result: &crate::run::ScenarioResult,
    spreads: &[(String, crate::eval::spread::SpreadTrace)],
) -> Result<()> {
    let attackers = result.arms.first().map(|a| a.attackers.clone()).unwrap_or_default();
    let hops = hops_from(graph, &attackers);
    let far = hops.iter().flatten().copied().max().unwrap_or(0) as usize;
    // Buckets 1..=far hops, then the unreachable; each labelled with its benign agents.
    let bucket = |h: Option<u32>| h.map_or(far, |h| (h as usize).saturating_sub(1));
    let mut benign = vec![0usize; far + 1];
    for (i, h) in hops.iter().enumerate() {
        if !attackers.contains(&(i as u32)) {
            benign[bucket(*h)] += 1;
        }
    }
    let keep: Vec<usize> = (0..=far).filter(|&g| benign[g] > 0).collect();
    let groups: Vec<String> = keep
        .iter()
        .map(|&g| {
            let name = if g == far {
                "unreachable".to_string()
            } else {
                format!("{} hop{}", g + 1, if g == 0 { "" } else { "s" })
            };
            format!("{name} ({} agents)", benign[g])
        })
        .collect();
    let series: Vec<(String, Vec<(f64, f64)>)> = spreads
        .iter()
        .map(|(arm, t)| {
            let mut exposed = vec![0usize; far + 1];
            for (i, h) in hops.iter().enumerate() {
                if !attackers.contains(&(i as u32)) && t.first_exposure[i].is_some() {
                    exposed[bucket(*h)] += 1;
                }
            }
            (arm.clone(), keep.iter().map(|&g| (100.0 * exposed[g] as f64 / benign[g] as f64, 0.0)).collect())
        })
        .collect();
    crate::report::plot::grouped_bars(
        file,
        &format!("{title}: benign agents exposed, by hops from an attacker"),
        "exposed (%)",
        &groups,
        &series,
    )
}
