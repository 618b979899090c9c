//! Which tasks of a stream are poisoning tasks and which count toward metrics (spec §5.3): the
//! paper launcher's `persistent_online` (every task both), or the scheduled protocol's warm-up
//! followed by a budget of round(T × rate) poisoning tasks that metrics exclude.

use crate::engine::{StreamKind, Streams};
use serde::{Deserialize, Serialize};

/// Placement of scheduled poisoning tasks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Schedule {
    /// Uniformly random positions (`Random(seed + 1337).sample`).
    #[default]
    Random,
    /// Evenly spaced positions.
    Even,
    /// The stream's semantic anchors (tasks that later tasks revisit), evenly thinned to the
    /// budget; random positions fill up if there are too few anchors.
    SemanticAnchor,
}

/// Which tasks are poisoning tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Poisoning {
    /// The paper launcher's `persistent_online`: every task is poisoned and every task counts.
    AllTasks,
    /// Warm-up tasks, then a budget of round(T × rate) poisoning tasks; metrics exclude both.
    Scheduled {
        /// Warm-up tasks.
        warmup: u32,
        /// Activation rate.
        rate: f64,
        /// Placement.
        schedule: Schedule,
    },
}

impl Poisoning {
    /// (field, expected) on the first problem, for a stream of `tasks` tasks.
    pub fn validate(&self, tasks: u32) -> Result<(), (String, String)> {
        if let Poisoning::Scheduled { warmup, rate, .. } = *self {
            if !(0.0..=1.0).contains(&rate) {
                return Err(("rate".into(), format!("an activation rate in [0, 1], got {rate}")));
            }
            if warmup >= tasks {
                return Err(("warmup".into(), format!("fewer warm-up tasks than tasks ({tasks})")));
            }
        }
        Ok(())
    }
}

/// (poisoning, metric) per stream position of a stream of `t` tasks; `anchors` marks the
/// positions a `SemanticAnchor` schedule may poison.
pub fn poisoning_set(p: &Poisoning, t: usize, anchors: &[bool], streams: &Streams) -> Vec<(bool, bool)> {
    match *p {
        Poisoning::AllTasks => vec![(true, true); t],
        Poisoning::Scheduled { warmup, rate, schedule } => {
            let warmup = (warmup as usize).min(t);
            let span = t - warmup;
            let budget = ((t as f64 * rate).round() as usize).max(1).min(span);
            let random = |budget: usize, exclude: &[usize]| -> Vec<usize> {
                let mut r = streams.rng(StreamKind::Workload, &[1337]);
                let free: Vec<usize> = (warmup..t).filter(|i| !exclude.contains(i)).collect();
                r.sample_indices(free.len(), budget.min(free.len())).into_iter().map(|i| free[i]).collect()
            };
            let picks: Vec<usize> = match schedule {
                Schedule::Random => random(budget, &[]),
                Schedule::Even => (0..budget).map(|i| warmup + i * span / budget).collect(),
                Schedule::SemanticAnchor => {
                    let cands: Vec<usize> = (warmup..t).filter(|i| anchors.get(*i).copied().unwrap_or(false)).collect();
                    let mut picks: Vec<usize> = if cands.len() <= budget {
                        cands
                    } else {
                        (0..budget).map(|i| cands[i * cands.len() / budget]).collect()
                    };
                    let more = budget - picks.len();
                    if more > 0 {
                        let extra = random(more, &picks);
                        picks.extend(extra);
                    }
                    picks
                }
            };
            (0..t)
                .map(|i| {
                    let p = picks.contains(&i);
                    (p, i >= warmup && !p)
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(schedule: Schedule) -> Poisoning {
        Poisoning::Scheduled { warmup: 20, rate: 0.05, schedule }
    }

    #[test]
    fn the_scheduled_protocol_has_its_budget_after_warmup() {
        let s = Streams::new(42);
        let anchors: Vec<bool> = (0..200).map(|i| i % 6 == 0).collect();
        for schedule in [Schedule::Random, Schedule::Even, Schedule::SemanticAnchor] {
            let set = poisoning_set(&sched(schedule), 200, &anchors, &s);
            let poisoned: Vec<usize> = (0..200).filter(|i| set[*i].0).collect();
            assert_eq!(poisoned.len(), 10, "{schedule:?}: 5% of 200");
            assert!(poisoned.iter().all(|i| *i >= 20));
            // Metrics exclude warm-up and poisoning tasks: 200 − 20 − 10.
            assert_eq!(set.iter().filter(|x| x.1).count(), 170);
            assert!(set.iter().all(|(p, m)| !(*p && *m)));
            if schedule == Schedule::SemanticAnchor {
                assert!(poisoned.iter().all(|i| anchors[*i]));
            }
        }
        assert_eq!(poisoning_set(&Poisoning::AllTasks, 5, &[], &s), vec![(true, true); 5]);
    }
}
