//! Communication graphs (spec §5.1). `out(a)` are the agents that a's handoffs and messages
//! reach; `incoming(a)` the agents a hears from. Graphs are built with petgraph and then frozen
//! into sorted adjacency lists, so iteration order never depends on hashing.

use crate::engine::{SimRng, StreamKind, Streams};
use petgraph::graph::DiGraph;
use serde::{Deserialize, Serialize};

/// A communication topology as a scenario names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Topology {
    /// The paper's "star": hub 0 linked to every agent plus a ring over the leaves.
    Wheel,
    /// A pure star: hub 0 linked to every other agent.
    Star,
    /// Path 0–1–…–(n−1).
    Chain,
    /// Binary heap tree, parent(c) = (c−1)/2.
    Tree,
    /// Directed G(n,p); `None` uses the reference default min(0.6, max(0.2, 2/(n−1))).
    Random(Option<f64>),
    /// Every ordered pair.
    Complete,
    /// Barabási–Albert preferential attachment with `m` edges per new node (undirected).
    BarabasiAlbert(u32),
    /// Watts–Strogatz ring lattice with `k` neighbours (even) and rewiring probability `beta`.
    WattsStrogatz(u32, f64),
}

impl Topology {
    /// Short name for tables.
    pub fn label(&self) -> String {
        match self {
            Topology::Wheel => "wheel".into(),
            Topology::Star => "star".into(),
            Topology::Chain => "chain".into(),
            Topology::Tree => "tree".into(),
            Topology::Random(p) => match p {
                Some(p) => format!("random(p={p})"),
                None => "random".into(),
            },
            Topology::Complete => "complete".into(),
            Topology::BarabasiAlbert(m) => format!("barabasi_albert(m={m})"),
            Topology::WattsStrogatz(k, b) => format!("watts_strogatz(k={k},beta={b})"),
        }
    }

    /// Checks parameters against the agent count; returns what was expected on failure.
    pub fn validate(&self, n: u32) -> Result<(), String> {
        match *self {
            Topology::Random(Some(p)) if !(0.0..=1.0).contains(&p) => {
                Err(format!("an edge probability in [0, 1], got {p}"))
            }
            Topology::BarabasiAlbert(m) if m == 0 || m >= n => Err(format!("1 <= m < agents ({n}), got m = {m}")),
            Topology::WattsStrogatz(k, beta) if k == 0 || k % 2 == 1 || k >= n || !(0.0..=1.0).contains(&beta) => {
                Err(format!("an even k with 0 < k < agents ({n}) and beta in [0, 1], got k = {k}, beta = {beta}"))
            }
            _ => Ok(()),
        }
    }
}

/// A frozen directed communication graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommGraph {
    out: Vec<Vec<u32>>,
    inc: Vec<Vec<u32>>,
}

impl CommGraph {
    /// Builds `topology` over `n` agents; random topologies draw from the Topology stream.
    pub fn build(topology: &Topology, n: u32, streams: &Streams) -> CommGraph {
        let mut g: DiGraph<(), ()> = DiGraph::new();
        let nodes: Vec<_> = (0..n).map(|_| g.add_node(())).collect();
        let both = |g: &mut DiGraph<(), ()>, a: u32, b: u32| {
            if a != b {
                g.update_edge(nodes[a as usize], nodes[b as usize], ());
                g.update_edge(nodes[b as usize], nodes[a as usize], ());
            }
        };
        let mut rng: SimRng = streams.rng(StreamKind::Topology, &[u64::from(n)]);
        match *topology {
            Topology::Chain => (1..n).for_each(|i| both(&mut g, i - 1, i)),
            Topology::Tree => (1..n).for_each(|c| both(&mut g, (c - 1) / 2, c)),
            Topology::Star => (1..n).for_each(|i| both(&mut g, 0, i)),
            Topology::Wheel => {
                (1..n).for_each(|i| both(&mut g, 0, i));
                if n > 2 {
                    (1..n - 1).for_each(|i| both(&mut g, i, i + 1));
                    both(&mut g, 1, n - 1);
                }
            }
            Topology::Complete => {
                for a in 0..n {
                    for b in a + 1..n {
                        both(&mut g, a, b);
                    }
                }
            }
            Topology::Random(p) => {
                let p = p.unwrap_or_else(|| (2.0 / (f64::from(n) - 1.0)).clamp(0.2, 0.6));
                for a in 0..n {
                    for b in 0..n {
                        if a != b && rng.bernoulli(p) {
                            g.update_edge(nodes[a as usize], nodes[b as usize], ());
                        }
                    }
                }
            }
            Topology::BarabasiAlbert(m) => {
                // Start from a complete core of m+1 nodes, then attach each node to m distinct
                // targets drawn proportionally to degree.
                let core = (m + 1).min(n);
                let mut ends: Vec<u32> = Vec::new();
                for a in 0..core {
                    for b in a + 1..core {
                        both(&mut g, a, b);
                        ends.extend([a, b]);
                    }
                }
                for v in core..n {
                    let mut targets: Vec<u32> = Vec::new();
                    while targets.len() < m as usize {
                        let t =
                            if ends.is_empty() { rng.below(u64::from(v)) as u32 } else { ends[rng.index(ends.len())] };
                        if !targets.contains(&t) {
                            targets.push(t);
                        }
                    }
                    for t in targets {
                        both(&mut g, v, t);
                        ends.extend([v, t]);
                    }
                }
            }
            Topology::WattsStrogatz(k, beta) => {
                let mut edges: Vec<(u32, u32)> = Vec::new();
                for a in 0..n {
                    for j in 1..=k / 2 {
                        edges.push((a, (a + j) % n));
                    }
                }
                let mut set: std::collections::BTreeSet<(u32, u32)> =
                    edges.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
                for e in edges.iter_mut() {
                    if rng.bernoulli(beta) {
                        let (a, b) = *e;
                        let c = rng.below(u64::from(n)) as u32;
                        let key = (a.min(c), a.max(c));
                        if c != a && !set.contains(&key) {
                            set.remove(&(a.min(b), a.max(b)));
                            set.insert(key);
                            *e = (a, c);
                        }
                    }
                }
                for (a, b) in set {
                    both(&mut g, a, b);
                }
            }
        }
        let mut out = vec![Vec::new(); n as usize];
        let mut inc = vec![Vec::new(); n as usize];
        for e in g.edge_indices() {
            let (s, d) = g.edge_endpoints(e).expect("edge");
            out[s.index()].push(d.index() as u32);
            inc[d.index()].push(s.index() as u32);
        }
        out.iter_mut().chain(inc.iter_mut()).for_each(|v| {
            v.sort_unstable();
            v.dedup();
        });
        CommGraph { out, inc }
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// True for the empty graph.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Agents that `a`'s handoffs and messages reach, ascending.
    pub fn out(&self, a: u32) -> &[u32] {
        &self.out[a as usize]
    }

    /// Agents that `a` hears from, ascending.
    pub fn incoming(&self, a: u32) -> &[u32] {
        &self.inc[a as usize]
    }

    /// In-degree plus out-degree of `a`.
    pub fn degree(&self, a: u32) -> usize {
        self.out[a as usize].len() + self.inc[a as usize].len()
    }

    /// Number of directed edges.
    pub fn edge_count(&self) -> usize {
        self.out.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(t: Topology, n: u32) -> CommGraph {
        CommGraph::build(&t, n, &Streams::new(42))
    }

    #[test]
    fn paper_topologies_have_the_reference_edges() {
        assert_eq!(g(Topology::Chain, 8).edge_count(), 14);
        assert_eq!(g(Topology::Tree, 8).edge_count(), 14);
        assert_eq!(g(Topology::Wheel, 8).edge_count(), 28);
        assert_eq!(g(Topology::Tree, 8).out(3), &[1, 7]);
        assert_eq!(g(Topology::Wheel, 8).out(1), &[0, 2, 7]);
        assert_eq!(g(Topology::Star, 8).edge_count(), 14);
        assert_eq!(g(Topology::Complete, 8).edge_count(), 56);
    }

    #[test]
    fn generated_graphs_are_deterministic_and_sane() {
        for t in [Topology::Random(None), Topology::BarabasiAlbert(2), Topology::WattsStrogatz(4, 0.2)] {
            let a = g(t.clone(), 30);
            assert_eq!(a, g(t.clone(), 30));
            for v in 0..30 {
                assert!(!a.out(v).contains(&v));
            }
        }
        assert_eq!(g(Topology::WattsStrogatz(4, 0.0), 10).edge_count(), 40);
        assert_eq!(g(Topology::BarabasiAlbert(2), 10).edge_count(), 2 * (3 + 2 * 7));
    }
}
