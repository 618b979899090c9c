//! The commit pipeline: metadata (derive or strict ledger) → guard gates → store, and what
//! the strict ledger inherits from what a writer consumed.

use super::*;
use crate::attack::capability::Forgery;
use crate::ledger::Admission;

/// One write for [`World::commit`]: the item, the scope its writer asks for, who writes it and
/// by which route, what the strict ledger labels it with, and what the evaluator records of it.
pub(super) struct WriteRequest {
    /// The item as written.
    pub item: MemoryItem,
    /// The scope asked for.
    pub scope: Scope,
    /// The writing agent.
    pub owner: u32,
    /// The strict ledger's channel for it.
    pub channel: StrictChannel,
    /// The strict ledger's label of its dependencies.
    pub label: Label,
    /// The evaluator's record, when the attack caused the write (never read by a guard).
    pub poison: Option<PoisonRecord>,
    /// The route it takes.
    pub route: Route,
    /// A direct write's forgery and the item as forged, which keeps its claimed fields
    /// through the provenance step unless the ledger sets them aside.
    pub forgery: Option<(Forgery, MemoryItem)>,
    /// The agent whose output it carries over an edge (a handoff's sender), for observers.
    pub from: Option<u32>,
}

impl WriteRequest {
    /// A write with no evaluator record and no forgery.
    pub fn new(item: MemoryItem, scope: Scope, owner: u32, channel: StrictChannel, label: Label, route: Route) -> Self {
        WriteRequest { item, scope, owner, channel, label, poison: None, route, forgery: None, from: None }
    }

    /// The same write, carried over the edge from agent `from`.
    pub fn from(mut self, from: u32) -> Self {
        self.from = Some(from);
        self
    }

    /// The same write, recorded as poison by the evaluator when `poison` is set.
    pub fn poison(mut self, poison: Option<PoisonRecord>) -> Self {
        self.poison = poison;
        self
    }
}

impl World<'_> {
    /// Stores a trusted seed without derive or gates (the reference's preload path).
    pub(super) fn commit_trusted(&mut self, mut item: MemoryItem) -> ItemId {
        item.scope = Scope::Team;
        item.status = Status::Active;
        item.backend_q = item.utility_q;
        item.backend_snapshot = (item.trust, item.hazard, item.taint);
        item.committed_at = self.queue.now();
        if let Some(l) = self.ledger.as_mut() {
            l.sign(&mut item);
        }
        let task = item.origin_task;
        let id = self.store(item, 0);
        self.trace.u64(u64::from(id));
        if self.monitors.is_some() {
            let at = self.at();
            let obs = Observation::Commit {
                task,
                route: Route::Preload,
                owner: 0,
                from: None,
                id,
                requested: Scope::Team,
                verdict: None,
            };
            observe(&mut self.monitors, &self.bank, &self.oracle, self.scn.agents, at, obs);
        }
        id
    }

    /// Puts a committed item into the bank (its intent embedded only when the store has no
    /// group for that intent yet) and into the current task's scope if it was written for it.
    pub(super) fn store(&mut self, item: MemoryItem, owner: u32) -> ItemId {
        let key = Embedder::text_key(&item.intent);
        let (cache, embedder, lex) = (&mut self.intent_cache, &mut self.embedder, &mut self.lex);
        let mut make = |item: &MemoryItem| -> Vec<f32> {
            if let Some(e) = cache.get(&key) {
                return e.to_vec();
            }
            let tokens = tokens_of(&item.intent.to_lowercase(), lex);
            let e: Arc<[f32]> = embedder.embed(&tokens, key, lex).into();
            cache.insert(key, e.clone());
            e.to_vec()
        };
        let origin_task = item.origin_task;
        let id = self.bank.insert(item, owner, key, &mut make);
        if let Some(st) = self.cur.as_mut()
            && st.task == origin_task
        {
            st.task_items.push(id);
            // Only the same-task scope ranks a task's items by their intents.
            let sim = if self.scn.protocol.same_task_scope {
                self.intent_cache.get(&key).map(|e| cosine(&st.query_emb, e))
            } else {
                None
            };
            st.task_item_sims.push(sim);
        }
        id
    }

    /// Commits one direct poison write; returns its id and final status.
    pub(super) fn commit_poison(&mut self, w: PoisonWrite, task: u32, target: u8) -> (ItemId, Status) {
        let PoisonWrite { mut item, scope, owner } = w;
        // The plan derived at build and after stealth; strong clamps; the commit derives once
        // more (spec C9).
        self.scn.attack.clamp(&mut item);
        let forgery = self.apply_capabilities(&mut item, scope, owner);
        // A planted item's whole text enters the prompt that retrieves it.
        let tokens = self.cur.as_ref().map(|s| s.target_tokens.clone()).unwrap_or_default();
        let record = self.direct_record(task, target, tokens, true);
        let mut req = WriteRequest::new(item, scope, owner, StrictChannel::External, Label::clean(), Route::Direct);
        req.poison = Some(record);
        req.forgery = forgery;
        let (id, _) = self.commit(req);
        (id, self.bank.get(id).status)
    }

    /// The evaluator's record of an attacker-caused write of task `task` targeting `target`
    /// (direct, laundered or a compromised summary: the attack wrote it).
    pub(super) fn direct_record(
        &self,
        task: u32,
        target: u8,
        target_tokens: Arc<[Sym]>,
        carries: bool,
    ) -> PoisonRecord {
        PoisonRecord {
            origin: PoisonOrigin::Direct,
            attack: self.scn.attack.family(),
            task,
            target_tokens,
            target,
            written_at: self.now(),
            carries_payload: carries,
        }
    }

    /// The commit pipeline: ledger check (direct writes) → metadata (derive or strict ledger)
    /// → ledger signature (the manager's own writes) → guard gates → store.
    pub(super) fn commit(&mut self, req: WriteRequest) -> (ItemId, CommitVerdict) {
        let WriteRequest { mut item, scope: requested, owner, channel, label, poison, route, forgery, from } = req;
        // A direct write bypasses the memory manager and arrives with whatever tag it carries:
        // the ledger checks it before the gates trust its provenance.
        let next = self.bank.len() as u32;
        let admission = match self.ledger.as_mut() {
            Some(l) if route == Route::Direct => l.admit_direct(&mut item, next),
            _ => Admission::default(),
        };
        match self.scn.protocol.provenance {
            ProvenanceMode::Recomputed => self.meta.derive(&mut item),
            ProvenanceMode::StrictLedger => {
                let requested_readers: Vec<u32> = match requested {
                    Scope::Team => (0..self.scn.agents).collect(),
                    Scope::Private => vec![owner],
                };
                // The label's readers are the requested ones that every dependency allows.
                let readers = intersect(Some(requested_readers), label.readers).unwrap_or_default();
                // The external channel's own taint joins the dependencies'.
                let taint =
                    if channel == StrictChannel::External { label.taint.max(Taint::External) } else { label.taint };
                let q = item.utility_q;
                apply_strict_view(&mut item, channel, taint, readers, label.parents, requested);
                // The ledger keeps attack-set Q out, but trusted seeds keep theirs.
                if channel == StrictChannel::UserHistory {
                    item.utility_q = q;
                }
            }
        }
        // A surviving forgery keeps what it claimed, unless the ledger set its claims aside.
        if let Some((f, claimed)) = forgery.filter(|_| !admission.distrusted && route == Route::Direct) {
            f.after_provenance(&mut item, &claimed);
        }
        item.scope = requested;
        let verdict = if admission.rejected {
            item.status = Status::Rejected;
            CommitVerdict::refused(requested)
        } else {
            self.guard.commit(&mut item, requested)
        };
        if verdict.rewritten {
            item.features = analyze(&item.intent, &item.experience, &mut self.lex);
        }
        // The memory manager signs what it stores of its own writes (after a rewrite).
        if route != Route::Direct
            && let Some(l) = self.ledger.as_mut()
        {
            l.sign(&mut item);
            l.check_write(&item, next);
            self.last_signed = Some(next);
        }
        item.backend_q = item.utility_q;
        item.backend_snapshot = (item.trust, item.hazard, item.taint);
        item.committed_at = self.queue.now();
        let status = item.status;
        let task = item.origin_task;
        let id = self.store(item, owner);
        if let Some(p) = poison {
            self.oracle.register_poison(id, p);
        }
        self.trace.u64(u64::from(id));
        self.trace.u64(status as u64);
        self.recorder.commit(&self.oracle, id, &verdict, status);
        if self.monitors.is_some() {
            let at = self.at();
            let obs = Observation::Commit { task, route, owner, from, id, requested, verdict: Some(&verdict) };
            observe(&mut self.monitors, &self.bank, &self.oracle, self.scn.agents, at, obs);
        }
        (id, verdict)
    }

    pub(super) fn report_of(&self, agent: u32, round: u32) -> Vec<ItemId> {
        let st = self.cur.as_ref().expect("task");
        st.selected[round as usize][agent as usize]
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| self.bank.get(*id).is_active())
            .take(self.scn.protocol.handoff_report_max)
            .collect()
    }

    /// The strict ledger's label for a memory `owner` generates (spec §3.6,
    /// `comparison_runtime.observe_ingress`): its dependencies are `parents` when the writer
    /// names them (a handoff's reported memories), else everything `owner` consumed during the
    /// task; their labels, and under [`LedgerInputs::Reference`] the labels `owner` received
    /// over routed messages, give the worst taint and the readers every dependency allows.
    /// `LedgerInputs::LastRound` reads only the last round's selection and nothing received.
    pub(super) fn ledger_label(&self, st: &TaskState, owner: u32, parents: Option<&[ItemId]>, last: usize) -> Label {
        let strict = self.scn.protocol.provenance == ProvenanceMode::StrictLedger;
        let mut label = Label::clean();
        if !strict {
            return label;
        }
        let reference = self.scn.protocol.routing.ledger_inputs == LedgerInputs::Reference;
        let deps: Vec<ItemId> = match parents {
            Some(p) => p.to_vec(),
            None if reference => consumed_by(st, owner),
            None => st.selected[last][owner as usize].iter().map(|(id, _)| *id).collect(),
        };
        for id in deps {
            let it = self.bank.get(id);
            label.absorb(it.taint, readers_of(it));
            label.parents.push(it.name.clone());
        }
        if reference && let Some(r) = &st.received[owner as usize] {
            label.absorb(r.taint, r.readers.clone());
        }
        label
    }

    /// The label of a summary of `report` alone (no task state to read).
    pub(super) fn report_label(&self, report: &[ItemId]) -> Label {
        let mut label = Label::clean();
        if self.scn.protocol.provenance != ProvenanceMode::StrictLedger {
            return label;
        }
        for id in report {
            let it = self.bank.get(*id);
            label.absorb(it.taint, readers_of(it));
            label.parents.push(it.name.clone());
        }
        label
    }

    /// A message or report routed from `sender` to `receiver` under the strict ledger hands the
    /// receiver the labels of everything the sender consumed and received
    /// (`comparison_runtime.route`).
    pub(super) fn route_labels(&mut self, sender: u32, receiver: u32) {
        if self.scn.protocol.provenance != ProvenanceMode::StrictLedger
            || self.scn.protocol.routing.ledger_inputs != LedgerInputs::Reference
        {
            return;
        }
        let st = self.cur.as_ref().expect("task");
        let mut label = Label::clean();
        for id in consumed_by(st, sender) {
            let it = self.bank.get(id);
            label.absorb(it.taint, readers_of(it));
        }
        if let Some(r) = &st.received[sender as usize] {
            label.absorb(r.taint, r.readers.clone());
        }
        let st = self.cur.as_mut().expect("task");
        let slot = &mut st.received[receiver as usize];
        match slot {
            Some(r) => r.absorb(label.taint, label.readers),
            None => *slot = Some(Received { taint: label.taint, readers: label.readers }),
        }
    }
}

/// Every memory `agent` read during the task, each once, in the order it first read them.
fn consumed_by(st: &TaskState, agent: u32) -> Vec<ItemId> {
    let mut out: Vec<ItemId> = Vec::new();
    for round in &st.selected {
        for (id, _) in &round[agent as usize] {
            if !out.contains(id) {
                out.push(*id);
            }
        }
    }
    out
}

/// The readers an item's label allows (`None`: every agent).
fn readers_of(it: &MemoryItem) -> Option<Vec<u32>> {
    if it.allowed_agents.is_empty() {
        None
    } else {
        let mut r = it.allowed_agents.clone();
        r.sort_unstable();
        r.dedup();
        Some(r)
    }
}

/// Intersects two reader sets (`None`: every agent).
fn intersect(a: Option<Vec<u32>>, b: Option<Vec<u32>>) -> Option<Vec<u32>> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(a.into_iter().filter(|x| b.binary_search(x).is_ok()).collect()),
    }
}

/// What a strict-ledger memory inherits: the worst taint of its dependencies (clean <
/// unverified < external), the readers all of them allow, and their ids as lineage.
#[derive(Clone, Debug)]
pub(super) struct Label {
    /// Worst taint.
    pub taint: Taint,
    /// Readers every dependency allows (`None`: every agent).
    pub readers: Option<Vec<u32>>,
    /// Dependency ids.
    pub parents: Vec<String>,
}

impl Label {
    /// No dependency.
    pub fn clean() -> Self {
        Label { taint: Taint::Clean, readers: None, parents: Vec::new() }
    }

    fn absorb(&mut self, taint: Taint, readers: Option<Vec<u32>>) {
        self.taint = self.taint.max(taint);
        self.readers = intersect(self.readers.take(), readers);
    }
}

/// The labels an agent received over routed messages this task, folded.
#[derive(Clone, Debug)]
pub(super) struct Received {
    taint: Taint,
    readers: Option<Vec<u32>>,
}

impl Received {
    fn absorb(&mut self, taint: Taint, readers: Option<Vec<u32>>) {
        self.taint = self.taint.max(taint);
        self.readers = intersect(self.readers.take(), readers);
    }
}
