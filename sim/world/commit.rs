//! The commit pipeline: metadata (derive or strict ledger) → guard gates → store, and what
//! the strict ledger inherits from what a writer consumed.

use super::*;

impl World<'_> {
    /// Stores a trusted seed without derive or gates (the reference's preload path).
    pub(super) fn commit_trusted(&mut self, mut item: MemoryItem) -> ItemId {
        item.scope = Scope::Team;
        item.status = Status::Active;
        item.backend_q = item.utility_q;
        item.backend_snapshot = (item.trust, item.hazard, item.taint);
        item.committed_at = self.queue.now();
        let id = self.store(item, 0);
        self.trace.u64(u64::from(id));
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
            let e: Rc<[f32]> = embedder.embed(&tokens, key, lex).into();
            cache.insert(key, e.clone());
            e.to_vec()
        };
        let origin_task = item.origin_task;
        let id = self.bank.insert(item, owner, key, &mut make);
        if let Some(st) = self.cur.as_mut()
            && st.task == origin_task
        {
            st.task_items.push(id);
        }
        id
    }

    pub(super) fn commit_poison(&mut self, w: PoisonWrite, task: u32, target: u8) {
        let PoisonWrite { mut item, scope, owner } = w;
        // The plan derived at build and after stealth; strong clamps; the commit derives once
        // more (spec C9).
        self.scn.attack.clamp(&mut item);
        // A planted item's whole text enters the prompt that retrieves it.
        let payload = true;
        let tokens = self.cur.as_ref().map(|s| s.target_tokens.clone()).unwrap_or_default();
        let strict = (StrictChannel::External, Taint::External, Vec::new());
        let record = PoisonRecord {
            origin: PoisonOrigin::Direct,
            attack: self.scn.attack.family(),
            task,
            target_tokens: tokens,
            target,
            written_at: self.now(),
            carries_payload: payload,
        };
        self.commit(item, scope, owner, strict, Some(record));
    }

    /// The commit pipeline: metadata (derive or strict ledger) → guard gates → store.
    pub(super) fn commit(
        &mut self,
        mut item: MemoryItem,
        requested: Scope,
        owner: u32,
        strict: (StrictChannel, Taint, Vec<String>),
        poison: Option<PoisonRecord>,
    ) -> (ItemId, CommitVerdict) {
        match self.scn.protocol.provenance {
            ProvenanceMode::Recomputed => derive_provenance(&mut item, &self.meta),
            ProvenanceMode::StrictLedger => {
                let readers = match requested {
                    Scope::Team => (0..self.scn.agents).collect(),
                    Scope::Private => vec![owner],
                };
                let (channel, taint, parents) = strict;
                let q = item.utility_q;
                apply_strict_view(&mut item, channel, taint, readers, parents, requested);
                // The ledger keeps attack-set Q out, but trusted seeds keep theirs.
                if channel == StrictChannel::UserHistory {
                    item.utility_q = q;
                }
            }
        }
        item.scope = requested;
        let verdict = self.guard.commit(&mut item, requested);
        if verdict.rewritten {
            item.features = analyze(&item.intent, &item.experience, &mut self.lex);
        }
        item.backend_q = item.utility_q;
        item.backend_snapshot = (item.trust, item.hazard, item.taint);
        item.committed_at = self.queue.now();
        let status = item.status;
        let id = self.store(item, owner);
        if let Some(p) = poison {
            self.oracle.register_poison(id, p);
        }
        self.trace.u64(u64::from(id));
        self.trace.u64(status as u64);
        self.recorder.commit(&self.oracle, id, &verdict, status);
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

    /// What the strict ledger inherits from memories an agent consumed (spec §3.6): the worst
    /// of their taints (clean < unverified < external < poisoned) and their ids as lineage.
    pub(super) fn ledger_inputs(&self, consumed: impl Iterator<Item = ItemId>) -> (Taint, Vec<String>) {
        // Only the strict ledger reads the lineage; recomputed provenance would drop it.
        let keep_names = self.scn.protocol.provenance == ProvenanceMode::StrictLedger;
        let mut taint = Taint::Clean;
        let mut names = Vec::new();
        for id in consumed {
            let it = self.bank.get(id);
            taint = taint.max(it.taint);
            if keep_names {
                names.push(it.name.clone());
            }
        }
        (taint, names)
    }
}
