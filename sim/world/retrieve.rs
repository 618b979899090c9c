//! Two-stage retrieval (spec §3.3): per-store backend candidates, the candidate pool a guard
//! receives, the broker, the guard's scoring and read firewall, then top-k.
//!
//! A retrieval is *planned* from the world as it stands, writing nothing but its worker's
//! scratch ([`World::plan_retrieve`]), and the plan is then *applied* ([`World::apply_retrieve`]):
//! the rebuilt candidate caches, new text embeddings, the items' counters and LRU touches,
//! the guard's observation of blocks, the recorder, the trace, monitors and inspection. The
//! calls of a lockstep round read only the round's starting state, so they can be planned on
//! several threads and applied in agent order with the same bytes as one after another
//! (see `World::plan_round`).

use super::*;

/// A retrieval key holds a word the lexicon has not interned. Planning never interns (a
/// word's symbol is its place in interning order, and token lists are sorted by symbol), so
/// the caller interns the key, in agent order, and plans again.
pub(super) struct NeedsWords(pub(super) String);

/// A store's candidate cache as a retrieval rebuilt it, written back when the plan is applied.
pub(super) struct SlotUpdate {
    slot: usize,
    cache: StoreCache,
    /// The store's group similarities, when they were extended.
    sims: Option<Vec<f64>>,
}

/// What one retrieval decided, before any of it is written.
pub(super) struct RetrievePlan {
    /// Every candidate handed to the guard's scoring (each counts as retrieved).
    pool: Vec<ItemId>,
    /// (item, stage, reason) of each blocked candidate, in pool order.
    blocked: Vec<(ItemId, &'static str, &'static str)>,
    /// The selected memories and their retrieval similarity, best first.
    selection: Vec<(ItemId, f64)>,
    slots: Vec<SlotUpdate>,
    /// Text embeddings computed for items that had none.
    fresh: Vec<(ItemId, Vec<f32>)>,
}

/// Buffers and per-task memos of one retrieval worker. Every memo entry is a function of its
/// key within a task (the memo stamp), so workers that each keep their own give the same
/// retrievals as one that keeps them all.
#[derive(Default)]
pub(super) struct RetrieveScratch {
    ranked: Vec<(f64, usize, ItemId, bool)>,
    keys: Vec<Option<u8>>,
    top: Vec<(f64, usize, ItemId, f64)>,
    /// Per item slot: (stamp, text similarity to the current task's query).
    sim_memo: Vec<(u32, f64)>,
    /// Per item slot: (stamp, reader key, cluster share bits, keyed candidates, verdict) of
    /// its last read this task, when the guard is pure; the reader key is
    /// [`Guard::score_reader_key`]'s, so readers the guard cannot tell apart share one verdict.
    verdict_memo: Vec<(u32, u64, u64, usize, crate::guard::ReadVerdict)>,
    /// Per item slot: (stamp, reader, backend pre-score) for the current task.
    prescore_memo: Vec<(u32, u32, f64)>,
}

impl World<'_> {
    /// The text embedding of item `id`, computed now and kept in `fresh` for the plan's
    /// application (its index there). A keyed memory is embedded by its retrieval key, once
    /// per distinct key (every round memory of a task shares its question).
    fn plan_text_embedding(&self, id: ItemId, fresh: &mut Vec<(ItemId, Vec<f32>)>) -> Result<usize, NeedsWords> {
        if let Some(i) = fresh.iter().position(|(x, _)| *x == id) {
            return Ok(i);
        }
        let it = self.bank.get(id);
        let e = match &it.retrieval_key {
            Some(key) => {
                let k = Embedder::text_key(key);
                let known = lock(&self.key_embeddings).get(&k).cloned();
                match known {
                    Some(e) => e.to_vec(),
                    None => {
                        // Tokens merged from the key's parts when it was committed, or the
                        // key tokenised now.
                        let tokenised;
                        let tokens: &[Sym] = match self.cur.as_ref().and_then(|st| st.key_tokens.get(&id)) {
                            Some(t) => {
                                debug_assert_eq!(
                                    Some(t),
                                    known_tokens_of(&key.to_lowercase(), &self.lex).as_ref(),
                                    "a retrieval key's tokens from its parts"
                                );
                                t
                            }
                            None => {
                                tokenised = known_tokens_of(&key.to_lowercase(), &self.lex)
                                    .ok_or_else(|| NeedsWords(key.clone()))?;
                                &tokenised
                            }
                        };
                        let e: Arc<[f32]> = self.embedder.embed(tokens, k, &self.lex).into();
                        lock(&self.key_embeddings).insert(k, e.clone());
                        e.to_vec()
                    }
                }
            }
            None => self.embedder.embed(it.features.tokens.get(), Embedder::text_key(&it.experience), &self.lex),
        };
        fresh.push((id, e));
        Ok(fresh.len() - 1)
    }

    /// Cosine of `query` and the text embedding of item `id` (the bank's, or see
    /// [`Self::plan_text_embedding`]).
    fn plan_text_similarity(
        &self,
        id: ItemId,
        query: &[f32],
        fresh: &mut Vec<(ItemId, Vec<f32>)>,
    ) -> Result<f64, NeedsWords> {
        if let Some(e) = self.bank.text_embedding(id) {
            return Ok(cosine(query, e));
        }
        let i = self.plan_text_embedding(id, fresh)?;
        Ok(cosine(query, &fresh[i].1))
    }

    /// How similar a selected memory looks to the model: the cosine of the query and the text
    /// the prompt shows (intent and experience). The retriever scores a keyed memory by its
    /// retrieval key, which the prompt never shows (an INFA round memory's key is the question
    /// itself, a haystack unit's the question plus its content), so the stand-in's relevance
    /// reads the shown text instead; for an unkeyed memory the two are the same number.
    pub(super) fn shown_similarity(&self, id: ItemId, retrieval_sim: f64, query: &[f32]) -> f64 {
        if self.bank.get(id).retrieval_key.is_none() {
            return retrieval_sim;
        }
        let known = lock(&self.shown_embeddings).get(&id).cloned();
        let e = known.unwrap_or_else(|| {
            let it = self.bank.get(id);
            let e: Arc<[f32]> =
                self.embedder.embed(it.features.tokens.get(), Embedder::text_key(&it.experience), &self.lex).into();
            lock(&self.shown_embeddings).insert(id, e.clone());
            e
        });
        cosine(query, &e)
    }

    /// The indices of `cands` the pool needs from the backend's hybrid ranking: the "selected"
    /// top-k, the first `backend_k` in backend order, the whole hybrid order (to break the
    /// pre-score's ties per store), or nothing where the guard ranks the pool itself.
    pub(super) fn backend_selection(&self, cands: &[(f64, ItemId)]) -> Arc<[usize]> {
        let (sel, bk) = self.pool_sizes();
        match self.pool {
            Pool::Selected => hybrid_top_k(cands, &self.bank, sel),
            Pool::BackendOrder => hybrid_top_k(cands, &self.bank, bk),
            Pool::Resorted => hybrid_top_k(cands, &self.bank, cands.len()),
            Pool::UnionResorted | Pool::Flat => Arc::new([]),
        }
    }

    /// (memories in the backend's "selected" set, candidates per store): the protocol's top-k
    /// and backend_k, or LongMemEval's reference pools, where the runner asks the core for
    /// four times top-k and the core asks the backend for its own rule of that.
    pub(super) fn pool_sizes(&self) -> (usize, usize) {
        let proto = &self.scn.protocol;
        if self.haystack_reference() {
            let retrieve_k = 4 * proto.top_k;
            (proto.top_k, proto.backend_k.unwrap_or((4 * retrieve_k).max(retrieve_k + 4)))
        } else {
            (proto.top_k, proto.backend_k())
        }
    }

    /// Whether LongMemEval's haystack and its rerank follow the reference.
    pub(super) fn haystack_reference(&self) -> bool {
        matches!(&self.scn.workload, WorkloadConfig::LongMemEval(c) if c.layout == HaystackLayout::Reference)
    }

    /// A store's backend candidates for the current task (spec §3.3 stage 1): similarity per
    /// intent, the top `backend_k` intents expanded to their memories, and the indices of the
    /// `top_k` best by hybrid score 0.5·z_sim + 0.5·z_q. Within a task the query and every Q are
    /// fixed and stores only grow (until a capacity evicts from one: then its cache starts
    /// afresh), so the group ranking is reused until the store gains a group and the candidates
    /// until it gains an item; the shared store's candidates thus serve every agent and round
    /// of the task.
    pub(super) fn store_candidates(
        &self,
        slot: usize,
        shared: bool,
        agent: u32,
    ) -> (Candidates, Arc<[usize]>, Option<SlotUpdate>) {
        let (_, bk) = self.pool_sizes();
        let topo = self.scn.memory_topology;
        let groups = if shared { self.bank.shared_groups() } else { self.bank.private_groups(agent) };
        let items = if shared { self.bank.shared_store().len() } else { self.bank.private_store(agent).len() };
        let evictions = if shared { self.bank.shared_evictions() } else { self.bank.private_evictions(agent) };
        let st = self.cur.as_ref().expect("task");
        let old = &st.store_cache[slot];
        // The store shrank (a capacity evicted from it): rank it afresh.
        let afresh = old.evictions != evictions;
        let reader_dependent = shared && topo == MemoryTopology::RoleIsolated;
        if !afresh && old.groups == groups.len() && old.items == items && !reader_dependent {
            return (old.cands.clone(), old.best.clone(), None);
        }
        let mut cache = if afresh { StoreCache { evictions, ..StoreCache::default() } } else { old.clone() };
        let mut new_sims = None;
        if cache.groups != groups.len() {
            let mut sims: Vec<f64> = if afresh { Vec::new() } else { st.group_sims[slot].clone() };
            let dim = self.bank.dim().max(1);
            for g in &groups[sims.len()..] {
                let s = match st.intent_sims.get(g.embedding / dim) {
                    Some(s) => *s,
                    None => cosine(&st.query_emb, self.bank.intent_embedding(g.embedding)),
                };
                sims.push(s);
            }
            // Bounded selection of the best backend_k groups (ties: lower group index first).
            // Groups only grow and their similarities are fixed within a task, so new groups
            // continue the selection where the last one stopped: the same result as a rescan.
            let top = &mut cache.top;
            let from = if cache.groups == usize::MAX { 0 } else { cache.groups };
            if from == 0 {
                top.clear();
            }
            for (g, &s) in sims.iter().enumerate().skip(from) {
                if s < 0.0 || (top.len() == bk && s <= top[bk - 1].0) {
                    continue;
                }
                let at = top.partition_point(|(t, _)| *t >= s);
                top.insert(at, (s, g));
                top.truncate(bk);
            }
            cache.groups = groups.len();
            new_sims = Some(sims);
        }
        let mut cands: Vec<(f64, ItemId)> =
            Vec::with_capacity(cache.top.iter().map(|(_, g)| groups[*g].members.len()).sum());
        cands.extend(
            cache
                .top
                .iter()
                .flat_map(|(s, g)| groups[*g].members.iter().map(move |id| (*s, *id)))
                .filter(|(_, id)| !reader_dependent || topo.shared_visible(self.bank.get(*id), agent, self.scn.agents)),
        );
        let best = self.backend_selection(&cands);
        let cands = Arc::new(cands);
        cache.items = if reader_dependent { usize::MAX } else { items };
        cache.cands = cands.clone();
        cache.best = best.clone();
        (cands, best, Some(SlotUpdate { slot, cache, sims: new_sims }))
    }

    /// A store's candidates without a backend (the INFA harness's `--memory-backend none`):
    /// every memory the reader can see, in commit order.
    pub(super) fn flat_candidates(&self, shared: bool, agent: u32) -> (Candidates, Arc<[usize]>, Option<SlotUpdate>) {
        let topo = self.scn.memory_topology;
        let ids = if shared { self.bank.shared_store() } else { self.bank.private_store(agent) };
        let cands: Vec<(f64, ItemId)> = ids
            .iter()
            .filter(|id| !shared || topo.shared_visible(self.bank.get(**id), agent, self.scn.agents))
            .map(|id| (0.0, *id))
            .collect();
        (Arc::new(cands), Arc::new([]), None)
    }

    /// A store's candidates under the same-task scope (LongMemEval, spec §5.5): only items
    /// written for the current task, the `backend_k` most similar by intent, and the `top_k`
    /// best of those by the backend's hybrid score.
    pub(super) fn scoped_candidates(
        &self,
        slot: usize,
        shared: bool,
        agent: u32,
    ) -> (Candidates, Arc<[usize]>, Option<SlotUpdate>) {
        let (_, bk) = self.pool_sizes();
        let topo = self.scn.memory_topology;
        let want = if shared { crate::memory::StoreKind::Shared } else { crate::memory::StoreKind::Private(agent) };
        let st = self.cur.as_ref().expect("task");
        // Within a task the query and every Q are fixed, so the candidates hold until the task
        // gains an item; the shared store's then serve every agent (unless visibility depends
        // on the reader).
        let reader_dependent = shared && topo == MemoryTopology::RoleIsolated;
        let old = &st.store_cache[slot];
        if !reader_dependent && old.items == st.task_items.len() {
            return (old.cands.clone(), old.best.clone(), None);
        }
        let mut cands: Vec<(f64, ItemId)> = Vec::new();
        for (&id, known) in st.task_items.iter().zip(&st.task_item_sims) {
            if self.bank.location(id) != want
                || (shared && !topo.shared_visible(self.bank.get(id), agent, self.scn.agents))
            {
                continue;
            }
            // An intent first embedded after its item joined the task is looked up now.
            let sim = known.unwrap_or_else(|| {
                let key = Embedder::text_key(&self.bank.get(id).intent);
                self.intent_cache.get(&key).map_or(0.0, |e| cosine(&st.query_emb, e))
            });
            debug_assert_eq!(
                sim.to_bits(),
                self.intent_cache
                    .get(&Embedder::text_key(&self.bank.get(id).intent))
                    .map_or(0.0, |e| cosine(&st.query_emb, e))
                    .to_bits(),
                "an item's intent similarity as it joined the task"
            );
            cands.push((sim, id));
        }
        // Most similar first; ties keep commit order.
        let mut ranked: Vec<(f64, usize, ItemId)> = cands.iter().enumerate().map(|(i, (s, id))| (*s, i, *id)).collect();
        top_k(&mut ranked, bk, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let cands: Vec<(f64, ItemId)> = ranked.into_iter().map(|(s, _, id)| (s, id)).collect();
        let best = self.backend_selection(&cands);
        let cands: Candidates = Arc::new(cands);
        let cache = StoreCache {
            items: if reader_dependent { usize::MAX } else { st.task_items.len() },
            cands: cands.clone(),
            best: best.clone(),
            ..old.clone()
        };
        (cands, best, Some(SlotUpdate { slot, cache, sims: None }))
    }

    /// Extends the task's similarity of its query to each intent of the run up to the bank's
    /// intent count (a cache: each value is one cosine, whenever it is computed).
    pub(super) fn fill_intent_sims(&mut self) {
        let rows = self.bank.intent_count();
        let dim = self.bank.dim().max(1);
        let st = self.cur.as_mut().expect("task");
        for row in st.intent_sims.len()..rows {
            st.intent_sims.push(cosine(&st.query_emb, self.bank.intent_embedding(row * dim)));
        }
    }

    /// Two-stage retrieval (spec §3.3) for `agent` in `round`, planned without writing
    /// anything but the worker's `scratch`: per-store candidates and the pool the guard
    /// receives (see [`Pool`]), the broker for shared items, the guard's scoring and firewall,
    /// then top-k.
    pub(super) fn plan_retrieve(
        &self,
        agent: u32,
        round: u32,
        scratch: &mut RetrieveScratch,
    ) -> Result<RetrievePlan, NeedsWords> {
        let proto = &self.scn.protocol;
        let (sel_k, bk) = self.pool_sizes();
        // The core keeps this many after scoring; LongMemEval's runner then reranks and cuts
        // to top-k.
        let haystack = self.haystack_reference();
        let proto_top_k = proto.top_k;
        let k = if haystack { 4 * proto_top_k } else { proto_top_k };
        let st = self.cur.as_ref().expect("task");
        let task = st.task;
        let class = self.workload.tasks()[task as usize].class.as_str();
        let reader = Reader { agent, task_class: class };
        let topo = self.scn.memory_topology;
        let kind = self.pool;
        let mut slots: Vec<SlotUpdate> = Vec::new();
        // Each store's candidates are shared with the store cache, not copied.
        let mut pools: [Option<Candidates>; 2] = [None, None];
        let mut bests: [Option<Arc<[usize]>>; 2] = [None, None];
        let mut selected: Vec<(ItemId, bool)> = Vec::new();
        for (store_idx, shared) in [(0u64, false), (1u64, true)] {
            if shared && topo == MemoryTopology::PrivateOnly {
                continue;
            }
            let slot = if shared { self.scn.agents as usize } else { agent as usize };
            let (cands, best, update) = if kind == Pool::Flat {
                self.flat_candidates(shared, agent)
            } else if proto.same_task_scope {
                self.scoped_candidates(slot, shared, agent)
            } else {
                self.store_candidates(slot, shared, agent)
            };
            slots.extend(update);
            match kind {
                // The backend's own selection (ε-exploration or the hybrid top-k); the
                // exploration stream is the selection's alone, so pools that ignore it change
                // nothing else by skipping it.
                Pool::Selected => {
                    let mut rng = self.streams.rng(
                        StreamKind::Exploration,
                        &[u64::from(task), u64::from(agent), u64::from(round), store_idx],
                    );
                    if rng.bernoulli(proto.epsilon) {
                        selected.extend(rng.sample_indices(cands.len(), sel_k).iter().map(|i| (cands[*i].1, shared)));
                    } else {
                        selected.extend(best.iter().map(|i| (cands[*i].1, shared)));
                    }
                }
                Pool::BackendOrder => selected.extend(best.iter().map(|i| (cands[*i].1, shared))),
                Pool::Flat => selected.extend(cands.iter().map(|(_, id)| (*id, shared))),
                Pool::Resorted | Pool::UnionResorted => {}
            }
            pools[store_idx as usize] = Some(cands);
            bests[store_idx as usize] = Some(best);
        }
        let (pure, stamp) = (self.guard.score_is_pure(), self.memo_stamp);
        let mut pool: Vec<(ItemId, bool)> = if matches!(kind, Pool::Resorted | Pool::UnionResorted) {
            if scratch.prescore_memo.len() < self.bank.slots() {
                scratch.prescore_memo.resize(self.bank.slots(), (0, 0, 0.0));
            }
            let class_id = self.bank.class_id(class);
            // The best `backend_k` by pre-score, in one bounded pass: per store under the
            // reference (ties keep the backend's hybrid order, the order its candidates came
            // in), or over the union of both stores (ties keep candidate order, private first).
            let order = |a: &(f64, usize, ItemId, bool), b: &(f64, usize, ItemId, bool)| {
                b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
            };
            let mut ranked = std::mem::take(&mut scratch.ranked);
            ranked.clear();
            let mut pool = Vec::new();
            let mut position = 0usize;
            for (store_idx, cands) in pools.iter().enumerate() {
                let Some(cands) = cands else { continue };
                let shared = store_idx == 1;
                let per_store = kind == Pool::Resorted;
                // Per store the candidates come in the backend's hybrid order; the union keeps
                // candidate order.
                let hybrid = bests[store_idx].clone().unwrap_or_else(|| Arc::new([]));
                let n = if per_store { hybrid.len() } else { cands.len() };
                for rank in 0..n {
                    let ci = if per_store { hybrid[rank] } else { rank };
                    let (s, id) = cands[ci];
                    // The pre-score depends on the item, its intent similarity to the task's
                    // query and the reader: memoised per task like the read verdicts.
                    let i = self.bank.slot_of(id);
                    let m = scratch.prescore_memo[i];
                    let p = if pure && m.0 == stamp && m.1 == agent {
                        m.2
                    } else {
                        let input = self.bank.prescore_input(id, agent, class, class_id);
                        let p = self.guard.prescore(input, s);
                        scratch.prescore_memo[i] = (stamp, agent, p);
                        p
                    };
                    let pos = if per_store { rank } else { position };
                    ranked.push((p, pos, id, shared));
                    position += 1;
                }
                if per_store {
                    top_k(&mut ranked, bk, order);
                    pool.extend(ranked.iter().map(|(_, _, id, sh)| (*id, *sh)));
                    ranked.clear();
                }
            }
            top_k(&mut ranked, bk, order);
            pool.extend(ranked.iter().map(|(_, _, id, sh)| (*id, *sh)));
            scratch.ranked = ranked;
            pool
        } else {
            selected
        };
        // The cross-agent broker on shared items.
        let mut blocked: Vec<(ItemId, &'static str, &'static str)> = Vec::new();
        pool.retain(|(id, shared)| {
            if !*shared {
                return true;
            }
            let d = self.guard.broker(self.bank.get(*id), reader, topo);
            if d.action == crate::guard::Action::Block {
                blocked.push((*id, "broker", d.reason));
                false
            } else {
                true
            }
        });
        // Cluster share over every candidate handed to scoring (spec C11).
        let mut keys = std::mem::take(&mut scratch.keys);
        keys.clear();
        keys.extend(pool.iter().map(|(id, _)| self.bank.get(*id).features.answer_key));
        let keyed = keys.iter().filter(|k| k.is_some()).count();
        let mut key_counts = [0usize; 5];
        for k in keys.iter().flatten() {
            key_counts[*k as usize] += 1;
        }
        let query_emb = &st.query_emb;
        // The best `top_k` unblocked candidates by score, in one bounded pass; ties keep
        // candidate order (spec C11): the position among unblocked candidates breaks them.
        let order =
            |a: &(f64, usize, ItemId, f64), b: &(f64, usize, ItemId, f64)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let mut top = std::mem::take(&mut scratch.top);
        top.clear();
        let mut fresh = Vec::new();
        let mut unblocked = 0usize;
        let mut outcome = Ok(());
        for (i, (id, _)) in pool.iter().enumerate() {
            let share = match keys[i] {
                Some(key) => key_counts[key as usize] as f64 / keyed.max(1) as f64,
                None => 0.0,
            };
            let cluster = Cluster { share, keyed };
            let i = self.bank.slot_of(*id);
            if scratch.sim_memo.len() <= i {
                scratch.sim_memo.resize(self.bank.slots(), (0, 0.0));
                scratch
                    .verdict_memo
                    .resize(self.bank.slots(), (0, 0, 0, 0, crate::guard::ReadVerdict { score: 0.0, blocked: None }));
            }
            let sim = if scratch.sim_memo[i].0 == stamp {
                scratch.sim_memo[i].1
            } else {
                match self.plan_text_similarity(*id, query_emb, &mut fresh) {
                    Ok(s) => {
                        scratch.sim_memo[i] = (stamp, s);
                        s
                    }
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            };
            let m = scratch.verdict_memo[i];
            let reader_key = if pure { self.guard.score_reader_key(self.bank.get(*id), reader) } else { 0 };
            let v = if pure && m.0 == stamp && m.1 == reader_key && m.2 == share.to_bits() && m.3 == keyed {
                m.4
            } else {
                let v = self.guard.score(self.bank.get(*id), &st.query, sim, cluster, reader);
                if pure {
                    scratch.verdict_memo[i] = (stamp, reader_key, share.to_bits(), keyed, v);
                }
                v
            };
            let floor_block = self.guard.min_score().is_some_and(|m| v.score < m);
            match v.blocked.or(floor_block.then_some("low_score")) {
                Some(reason) => blocked.push((*id, "read", reason)),
                None => {
                    top.push((v.score, unblocked, *id, sim));
                    unblocked += 1;
                }
            }
        }
        top_k(&mut top, k, order);
        if outcome.is_ok() && haystack {
            rerank_history(&mut top, &self.history_overlap, proto_top_k);
        }
        let selection = top.iter().map(|&(_, _, id, sim)| (id, sim)).collect();
        // Hand the buffers back for the next retrieval.
        scratch.top = top;
        scratch.keys = keys;
        outcome?;
        Ok(RetrievePlan { pool: pool.into_iter().map(|(id, _)| id).collect(), blocked, selection, slots, fresh })
    }

    /// Writes what a retrieval planned, in the order a retrieval always has: its caches, the
    /// candidates' counters, the guard's observation of its blocks, each block (recorder,
    /// trace, monitors), each selected memory (counter, LRU touch, trace, inspection).
    pub(super) fn apply_retrieve(&mut self, agent: u32, round: u32, plan: RetrievePlan) -> Vec<(ItemId, f64)> {
        let RetrievePlan { pool, blocked, selection, slots, fresh } = plan;
        let task = self.cur.as_ref().expect("task").task;
        for u in slots {
            self.apply_slot(u);
        }
        for (id, e) in fresh {
            if self.bank.text_embedding(id).is_none() {
                self.bank.set_text_embedding(id, e);
            }
        }
        for id in &pool {
            self.bank.get_mut(*id).retrieved_count += 1;
        }
        if !blocked.is_empty() {
            let seen: Vec<(&MemoryItem, &'static str)> =
                blocked.iter().map(|(id, _, reason)| (self.bank.get(*id), *reason)).collect();
            self.guard.observe_read_blocks(&seen);
        }
        for &(id, stage, reason) in &blocked {
            if stage == "read" {
                self.bank.get_mut(id).blocked_count += 1;
            }
            self.recorder.read_block(&self.oracle, id, stage, reason);
            self.trace.u64(u64::from(id));
            if self.monitors.is_some() {
                let at = self.at();
                let obs = Observation::ReadBlocked { task, round, agent, id, stage, reason };
                observe(&mut self.monitors, &self.bank, &self.oracle, self.scn.agents, at, obs);
            }
        }
        for &(id, _) in &selection {
            self.bank.get_mut(id).selected_count += 1;
            self.bank.touch(id);
            self.trace.u64(u64::from(id));
            if let Some(i) = self.inspection.as_mut() {
                i.selections.push((task, round, agent, id, self.bank.get(id).status));
            }
        }
        selection
    }
}

impl World<'_> {
    /// Writes back a store's rebuilt candidate cache.
    pub(super) fn apply_slot(&mut self, u: SlotUpdate) {
        let st = self.cur.as_mut().expect("task");
        if let Some(sims) = u.sims {
            st.group_sims[u.slot] = sims;
        }
        st.store_cache[u.slot] = u.cache;
    }
}

impl RetrievePlan {
    /// The selected memories and their retrieval similarity, best first.
    pub(super) fn selection(&self) -> &[(ItemId, f64)] {
        &self.selection
    }
}

/// Locks a cache whose entries are each a function of their key: a poisoned lock still holds
/// whole entries, so it is taken as it is.
pub(super) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// LongMemEval's runner cut (`filter_task_scoped_memories` with
/// `rerank_trusted_haystack_candidates`): of the core's selection, the trusted history units
/// that overlap the query move to the front (most overlap first, then selection order, at most
/// 48), the rest keep their order, and the first `k` remain.
fn rerank_history(top: &mut Vec<(f64, usize, ItemId, f64)>, overlap: &HashMap<ItemId, f64>, k: usize) {
    const TOP_N: usize = 48;
    let mut scored: Vec<(f64, usize)> = Vec::new();
    let mut other: Vec<usize> = Vec::new();
    for (pos, e) in top.iter().enumerate() {
        match overlap.get(&e.2) {
            Some(s) if *s > 0.0 => scored.push((*s, pos)),
            _ => other.push(pos),
        }
    }
    if scored.is_empty() {
        top.truncate(k);
        return;
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut order: Vec<usize> = scored.iter().take(TOP_N).map(|x| x.1).collect();
    let mut rest: Vec<usize> = other.into_iter().chain(scored.iter().skip(TOP_N).map(|x| x.1)).collect();
    rest.sort_unstable();
    order.extend(rest);
    order.truncate(k);
    let picked: Vec<(f64, usize, ItemId, f64)> = order.iter().map(|i| top[*i]).collect();
    *top = picked;
}

/// Which candidates a guard receives from the backend (see [`CandidatePool`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Pool {
    /// The backend's "selected" set per store: hybrid top-k, or the ε sample.
    Selected,
    /// The first `backend_k` per store in the backend's hybrid order.
    BackendOrder,
    /// The first `backend_k` per store by the guard's pre-score (ties: hybrid order).
    Resorted,
    /// The best `backend_k` of both stores together by pre-score (memlink before the fidelity
    /// pass).
    UnionResorted,
    /// No backend: every visible memory.
    Flat,
}

impl Pool {
    /// The pool of `guard` under `scn`'s routing.
    pub(super) fn of(scn: &Scenario, guard: &dyn Guard) -> Pool {
        if scn.memory_backend() == MemoryBackend::FlatList {
            return Pool::Flat;
        }
        let strict = scn.protocol.provenance == ProvenanceMode::StrictLedger;
        match scn.protocol.routing.candidate_pool {
            CandidatePool::UnionResorted => {
                if guard.full_pool() {
                    Pool::UnionResorted
                } else {
                    Pool::Selected
                }
            }
            CandidatePool::Reference => {
                if strict || guard.backend_order_pool() {
                    Pool::BackendOrder
                } else if guard.full_pool() {
                    Pool::Resorted
                } else {
                    Pool::Selected
                }
            }
        }
    }
}

/// Keeps the `k` first elements under the total order `cmp`, sorted (a partial selection, so
/// ranking hundreds of candidates for three slots stays cheap).
fn top_k<T: Copy>(v: &mut Vec<T>, k: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) {
    if v.len() <= k {
        v.sort_by(cmp);
        return;
    }
    if k <= 16 {
        // A bounded insertion pass beats a selection plus sort for the small k of a prompt; it
        // runs in place, the best `m` so far in `v[..m]` (slot `m` is never past the element
        // being read). `x` lands before the first element not less than it, as a bounded
        // insertion puts it; `cmp` is a total order (ties are broken by position), so the
        // result is the selection's.
        use std::cmp::Ordering::Less;
        let mut m = 0;
        for i in 0..v.len() {
            let x = v[i];
            if k == 0 || (m == k && cmp(&x, &v[k - 1]) != Less) {
                continue;
            }
            let mut j = m.min(k - 1);
            m = (m + 1).min(k);
            while j > 0 && cmp(&v[j - 1], &x) != Less {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = x;
        }
        v.truncate(m);
        return;
    }
    v.select_nth_unstable_by(k - 1, &cmp);
    v.truncate(k);
    v.sort_by(cmp);
}

/// Indices of the `k` best candidates by the backend's hybrid score 0.5·z_sim + 0.5·z_q
/// (ties: candidate order).
fn hybrid_top_k(cands: &[(f64, ItemId)], bank: &MemoryBank, k: usize) -> Arc<[usize]> {
    // Mean and spread of the candidates' Q (summed in candidate order), then one bounded pass
    // over the hybrid scores; ties keep candidate order.
    let n = cands.len().max(1) as f64;
    let m = cands.iter().map(|(_, id)| bank.backend_q(*id)).sum::<f64>() / n;
    let var = cands
        .iter()
        .map(|(_, id)| {
            let q = bank.backend_q(*id);
            (q - m) * (q - m)
        })
        .sum::<f64>()
        / n;
    let sd = if cands.len() <= 1 || var <= 0.0 { 1.0 } else { var.sqrt() };
    let order = |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let mut best: Vec<(f64, usize)> = cands
        .iter()
        .enumerate()
        .map(|(i, (s, id))| {
            let q = bank.backend_q(*id);
            (0.5 * (s - 0.18568) / 0.09408 + 0.5 * ((q - m) / sd).clamp(-3.0, 3.0), i)
        })
        .collect();
    top_k(&mut best, k, order);
    best.iter().map(|h| h.1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `top_k` keeps the k best in order, in place or by selection, as a full sort and a cut
    /// would (a total order: ties broken by position).
    #[test]
    fn top_k_is_a_sort_and_a_cut() {
        let order = |a: &(u32, usize), b: &(u32, usize)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        let mut state = 7u64;
        for n in [0usize, 1, 2, 5, 16, 17, 40, 300] {
            let v: Vec<(u32, usize)> = (0..n)
                .map(|i| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (((state >> 33) % 7) as u32, i)
                })
                .collect();
            for k in [0usize, 1, 3, 16, 17, 64, 400] {
                let mut want = v.clone();
                want.sort_by(order);
                want.truncate(k);
                let mut got = v.clone();
                top_k(&mut got, k, order);
                assert_eq!(got, want, "n {n}, k {k}");
            }
        }
    }

    /// The runner's cut: overlapping history units first (most overlap, then selection order),
    /// then the rest in selection order, cut to k.
    #[test]
    fn rerank_moves_overlapping_history_ahead() {
        // Selection order 0..6: items 10..16 with scores descending; 11, 13 and 15 are history.
        let mut top: Vec<(f64, usize, ItemId, f64)> =
            (0..6).map(|i| (1.0 - i as f64 * 0.1, i, 10 + i as u32, 0.5)).collect();
        let mut overlap = HashMap::default();
        overlap.insert(11, 1.0);
        overlap.insert(13, 3.0);
        overlap.insert(15, 3.0);
        overlap.insert(12, 0.0);
        rerank_history(&mut top, &overlap, 4);
        let ids: Vec<ItemId> = top.iter().map(|e| e.2).collect();
        assert_eq!(ids, vec![13, 15, 11, 10]);
        // Nothing overlapping: the selection order, cut.
        let mut top: Vec<(f64, usize, ItemId, f64)> = (0..3).map(|i| (1.0, i, i as u32, 0.5)).collect();
        rerank_history(&mut top, &HashMap::default(), 2);
        assert_eq!(top.iter().map(|e| e.2).collect::<Vec<_>>(), vec![0, 1]);
    }
}
