//! What a run will cost before it starts: the memory items it writes, the bytes they hold, and
//! its agent-decisions. `validate` prints the estimate and `run` (and `grid`) refuse a scenario
//! whose estimated memory exceeds the machine, naming the estimate and the knobs that move it,
//! instead of aborting on a failed allocation hours in.
//!
//! The model follows the protocol's writes (spec §5.2–§5.6): every directed edge carries one
//! handoff memory per round after the first; every benign agent writes one outcome memory per
//! task; the INFA harness writes one round memory per agent and round; LongMemEval commits its
//! haystack before every task; the attack writes a few payloads per attacker. Without a store
//! capacity items are never deleted within a run, so the live set is their sum; with one
//! (`protocol.capacity`) it is at most every store's bound plus one task's writes, and each
//! item ever written still costs its id's bookkeeping ([`BYTES_PER_ID`]). The bytes per item are measured (a
//! handoff memory with its texts, features, embedding and store entries: ~2.4 KiB on the
//! Barabási–Albert scale runs of the scale issue, 3.7–4.1 GB for 1.6 M handoffs).

use crate::scenario::{Scenario, Timing};
use crate::topology::Topology;
use crate::workload::WorkloadConfig;

/// Bytes one memory item costs, all its copies and indexes included (measured; see the module).
pub const BYTES_PER_ITEM: f64 = 2_560.0;
/// Bytes every id ever written keeps after its item is released under a capacity: its slot,
/// status and place and the evaluator's index (13 bytes, reserved once for the run's expected
/// ids), and the evaluator's 16-byte packed record when it is poison (48 before issue 42).
/// Measured at 10,000 agents × 200 tasks on BA(2) with 32 items per store
/// (`scenarios/scale/ba2-10000-capacity.ron`, 18.4 M ids): packing the records took No
/// Defense's peak from 2.02 to 1.50 GiB, 30 bytes per id (most of its handoffs are poison), to
/// about 37 bytes per id; MAPLE-Guard's is 39 or less.
pub const BYTES_PER_ID: f64 = 40.0;
/// Bytes per directed edge of the communication graph (adjacency in both directions, the
/// petgraph build, per-edge handoff state).
pub const BYTES_PER_EDGE: f64 = 96.0;
/// Bytes per task of the generated stream (question, options, truth, per-task state).
pub const BYTES_PER_TASK: f64 = 2_048.0;
/// Fixed cost of a run (workload, regexes, embedder tables, buffers).
pub const BASE_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// The estimate of one run of one arm (arms run one after another and free their state).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Expected directed edges of the communication graph.
    pub edges: f64,
    /// Memory items written over the run.
    pub items: f64,
    /// Memory items held at once at most (`items` without a capacity).
    pub live: f64,
    /// Peak bytes of one arm's run.
    pub bytes: f64,
    /// Agent-decisions (answers) of one arm.
    pub decisions: f64,
}

/// Expected directed edges of `topology` over `n` agents.
pub fn expected_edges(topology: &Topology, n: u32) -> f64 {
    let n = f64::from(n);
    match *topology {
        Topology::Wheel => 4.0 * (n - 1.0),
        Topology::Star | Topology::Chain | Topology::Tree => 2.0 * (n - 1.0),
        Topology::Random(p) => {
            let p = p.unwrap_or_else(|| (2.0 / (n - 1.0)).clamp(0.2, 0.6));
            n * (n - 1.0) * p
        }
        Topology::Complete => n * (n - 1.0),
        Topology::BarabasiAlbert(m) => 2.0 * f64::from(m) * n,
        Topology::WattsStrogatz(k, _) => f64::from(k) * n,
    }
}

impl Estimate {
    /// The estimate for `s`.
    pub fn of(s: &Scenario) -> Estimate {
        let n = f64::from(s.agents);
        let p = &s.protocol;
        let tasks = f64::from(s.workload.tasks());
        let rounds = f64::from(p.rounds);
        let edges = expected_edges(&s.topology, s.agents);
        let mut per_task = 0.0;
        if p.handoffs {
            per_task += edges * (rounds - 1.0).max(0.0);
        }
        if p.outcome_memories {
            per_task += n;
        }
        if p.round_memories || s.workload.infa_harness() {
            per_task += n * rounds;
        }
        if let WorkloadConfig::LongMemEval(c) = &s.workload {
            per_task += f64::from(c.haystack_units);
        }
        // Payloads: a private and a shared copy per attacker and task at most.
        per_task += 2.0 * n.min(attackers(s));
        let items = tasks * per_task;
        let live = match &p.capacity {
            Some(c) => {
                let stores = (n + 1.0) * c.items as f64 + c.shared_items.unwrap_or(c.items) as f64;
                items.min(stores + per_task)
            }
            None => items,
        };
        let ids = if p.capacity.is_some() { items * BYTES_PER_ID } else { 0.0 };
        let turns = if s.workload.infa_harness() { rounds.max(1.0) } else { rounds };
        let mut bytes = BASE_BYTES + live * BYTES_PER_ITEM + ids + edges * BYTES_PER_EDGE + tasks * BYTES_PER_TASK;
        if let Timing::Async { .. } = s.timing {
            // Pending events: at most one per edge and agent in flight.
            bytes += (edges + n) * 64.0;
        }
        Estimate { edges, items, live, bytes, decisions: tasks * turns * n }
    }

    /// One line for `validate`.
    pub fn describe(&self) -> String {
        let live = if self.live < self.items { format!(" ({} held at once)", si(self.live)) } else { String::new() };
        format!(
            "estimated per arm: {} memory items{live}, {} peak, {} agent-decisions",
            si(self.items),
            bytes(self.bytes),
            si(self.decisions)
        )
    }
}

fn attackers(s: &Scenario) -> f64 {
    match &s.attackers {
        crate::scenario::Attackers::Count(c) => f64::from(*c),
        crate::scenario::Attackers::Ids(ids) => ids.len() as f64,
    }
}

/// `x` with an SI suffix ("1.6 M").
pub fn si(x: f64) -> String {
    match x {
        x if x >= 1e12 => format!("{:.1} T", x / 1e12),
        x if x >= 1e9 => format!("{:.1} G", x / 1e9),
        x if x >= 1e6 => format!("{:.1} M", x / 1e6),
        x if x >= 1e4 => format!("{:.1} k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// Bytes in binary units ("3.8 GiB").
pub fn bytes(x: f64) -> String {
    match x {
        x if x >= 1024f64.powi(4) => format!("{:.1} TiB", x / 1024f64.powi(4)),
        x if x >= 1024f64.powi(3) => format!("{:.1} GiB", x / 1024f64.powi(3)),
        x => format!("{:.0} MiB", x / 1024f64.powi(2)),
    }
}

/// The memory a run may use: `MEMLINK_MAX_MEMORY` (bytes, or with a K/M/G/T suffix) when set,
/// else 80% of the machine's physical memory (Linux `/proc/meminfo`; 16 GiB where unknown).
/// An unparsable `MEMLINK_MAX_MEMORY` is an error naming it.
pub fn memory_limit() -> std::result::Result<f64, String> {
    if let Ok(v) = std::env::var("MEMLINK_MAX_MEMORY") {
        return parse_size(&v).ok_or_else(|| format!("MEMLINK_MAX_MEMORY: expected a size such as 4G, got `{v}`"));
    }
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb * 1024.0)
    });
    Ok(0.8 * total.unwrap_or(16.0 * 1024f64.powi(3)))
}

fn parse_size(v: &str) -> Option<f64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1024.0),
        'm' | 'M' => (&v[..v.len() - 1], 1024f64.powi(2)),
        'g' | 'G' => (&v[..v.len() - 1], 1024f64.powi(3)),
        't' | 'T' => (&v[..v.len() - 1], 1024f64.powi(4)),
        _ => (v, 1.0),
    };
    num.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0).map(|x| x * mult)
}

/// Admission of arms by their estimated memory, process-wide: rayon runs the arms of a run, and
/// the runs of a grid or sweep, side by side, so arms that each fit the machine could together
/// exceed it. An arm waits until its estimate fits beside the arms running; an arm alone is
/// always admitted (one that could never fit was refused when its scenario was loaded). Arms
/// never hold a reservation while waiting for another, so waiting cannot deadlock. Only when
/// and on which thread an arm runs depends on it, never its results.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: f64,
    state: std::sync::Mutex<BudgetState>,
    freed: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct BudgetState {
    in_use: f64,
    running: usize,
    peak: f64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: f64) -> Self {
        MemoryBudget { limit, state: Default::default(), freed: Default::default() }
    }

    /// The process's budget: [`memory_limit`] (unlimited where that is unreadable; `run` and
    /// `grid` have already refused it with a message).
    pub fn global() -> &'static MemoryBudget {
        static BUDGET: std::sync::OnceLock<MemoryBudget> = std::sync::OnceLock::new();
        BUDGET.get_or_init(|| MemoryBudget::new(memory_limit().unwrap_or(f64::INFINITY)))
    }

    /// Runs `f` once `bytes` fit beside the arms already admitted.
    pub fn run<T>(&self, bytes: f64, f: impl FnOnce() -> T) -> T {
        {
            // A poisoned lock only means another arm panicked; the counts are still whole.
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while st.running > 0 && st.in_use + bytes > self.limit {
                st = self.freed.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.in_use += bytes;
            st.running += 1;
            st.peak = st.peak.max(st.in_use);
        }
        struct Release<'a>(&'a MemoryBudget, f64);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                let mut st = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
                st.in_use -= self.1;
                st.running -= 1;
                if st.running == 0 {
                    st.in_use = 0.0;
                }
                self.0.freed.notify_all();
            }
        }
        let _release = Release(self, bytes);
        f()
    }

    /// The most bytes admitted at once so far.
    pub fn peak(&self) -> f64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).peak
    }
}

/// Checks that one arm of `s` fits in `limit` bytes; the error says the estimate and what to turn.
pub fn check_fits(s: &Scenario, limit: f64) -> std::result::Result<Estimate, String> {
    let e = Estimate::of(s);
    if e.bytes > limit {
        return Err(format!(
            "a run that fits in memory: this one needs an estimated {} per arm ({} memory items: {} edges' \
             handoffs over {} rounds, {} tasks, {} agents) and the limit is {} (80% of RAM, or MEMLINK_MAX_MEMORY). \
             Turn down `agents`, `tasks` or `rounds`, choose a sparser `topology`, set `protocol.handoffs: false`, \
             or bound the stores with `protocol.capacity`",
            bytes(e.bytes),
            si(e.items),
            si(e.edges),
            s.protocol.rounds,
            s.workload.tasks(),
            s.agents,
            bytes(limit)
        ));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4G"), Some(4.0 * 1024f64.powi(3)));
        assert_eq!(parse_size("512 M"), Some(512.0 * 1024f64.powi(2)));
        assert_eq!(parse_size("1000"), Some(1000.0));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-1G"), None);
    }

    #[test]
    fn edges_follow_the_topology() {
        assert_eq!(expected_edges(&Topology::Wheel, 8), 28.0);
        assert_eq!(expected_edges(&Topology::Chain, 8), 14.0);
        assert_eq!(expected_edges(&Topology::Complete, 4), 12.0);
        assert!((expected_edges(&Topology::Random(None), 1000) - 199_800.0).abs() < 1e-6);
    }
}
