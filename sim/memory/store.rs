//! The memory bank: an arena of items plus the stores that index into it.

use super::dense::{ClassTable, PrescoreInput, ScopeKey};
use super::item::{ItemId, MemoryItem, Scope, Status, Taint};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How agents' memories are connected (spec §3.4).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum MemoryTopology {
    /// No shared store is visible.
    PrivateOnly,
    /// Every agent reads the shared store directly (the paper's configs).
    #[default]
    GlobalShared,
    /// Shared reads pass through the cross-agent broker.
    BrokeredShared,
    /// Shared reads are limited to the reader's half of the team, and brokered.
    RoleIsolated,
}

impl MemoryTopology {
    /// `shared_visible_by_topology(m, agent)` of spec §3.4.
    pub fn shared_visible(self, item: &MemoryItem, reader: u32, agents: u32) -> bool {
        match self {
            MemoryTopology::PrivateOnly => false,
            MemoryTopology::GlobalShared | MemoryTopology::BrokeredShared => true,
            MemoryTopology::RoleIsolated => {
                if item.allowed_agents.is_empty() {
                    return true;
                }
                let half = (agents / 2).max(1);
                let side = |a: u32| a < half;
                item.allowed_agents.iter().any(|a| side(*a) == side(reader))
            }
        }
    }

    /// Whether shared reads pass the cross-agent broker under this topology.
    pub fn brokered(self) -> bool {
        matches!(self, MemoryTopology::BrokeredShared | MemoryTopology::RoleIsolated)
    }
}

/// Which store an item sits in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreKind {
    /// An agent's private store.
    Private(u32),
    /// The team store.
    Shared,
    /// The quarantine store (never retrievable).
    Quarantine,
    /// Nowhere (rejected at the write gate).
    Dropped,
    /// Evicted from a full store ([`Capacity`]): never retrievable again.
    Evicted,
}

impl StoreKind {
    /// Four bytes: an agent's index, or one of the four highest `u32` values (a team has far
    /// fewer agents: scenarios are validated).
    fn pack(self) -> u32 {
        match self {
            StoreKind::Private(a) => {
                debug_assert!(a < u32::MAX - 3, "agent index {a} collides with a packed store kind");
                a
            }
            StoreKind::Shared => u32::MAX,
            StoreKind::Quarantine => u32::MAX - 1,
            StoreKind::Dropped => u32::MAX - 2,
            StoreKind::Evicted => u32::MAX - 3,
        }
    }

    /// The kind [`StoreKind::pack`] packed.
    fn unpack(x: u32) -> StoreKind {
        match x {
            u32::MAX => StoreKind::Shared,
            0xffff_fffe => StoreKind::Quarantine,
            0xffff_fffd => StoreKind::Dropped,
            0xffff_fffc => StoreKind::Evicted,
            a => StoreKind::Private(a),
        }
    }
}

/// A bound on every store's size and what a full store evicts (issue 20). The paper's runs
/// have none (`protocol.capacity: None`): stores keep everything ever written, so a run's
/// memory grows with edges × rounds × tasks. With a capacity, a store that an insert takes
/// past its bound evicts one of its other items (the newcomer always enters), and the bank
/// reuses the evicted items' space once their task has finished, so the live set is bounded
/// by the stores' capacities plus one task's writes. Rejected items, which no store holds,
/// are released the same way.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// Most items an agent's private store holds; the quarantine store too.
    pub items: usize,
    /// Most items the shared store holds (`None`: `items`).
    #[serde(default)]
    pub shared_items: Option<usize>,
    /// Which item a full store evicts.
    pub policy: Eviction,
}

impl Capacity {
    /// Checks the bounds; returns (field, expected) on a problem.
    pub fn validate(&self) -> std::result::Result<(), (String, String)> {
        if self.items == 0 {
            return Err(("items".into(), "a capacity of at least 1 item per store".into()));
        }
        if self.shared_items == Some(0) {
            return Err(("shared_items".into(), "a shared capacity of at least 1 item (or None)".into()));
        }
        Ok(())
    }

    fn of(&self, kind: StoreKind) -> usize {
        match kind {
            StoreKind::Shared => self.shared_items.unwrap_or(self.items),
            _ => self.items,
        }
    }
}

/// Which item a full store evicts. Ties go to the item inserted first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Eviction {
    /// The item inserted first.
    Fifo,
    /// The item least recently placed into a prompt (an item never placed counts from its
    /// insert).
    Lru,
    /// The item with the lowest utility Q as the entry holds it (not the backend's cache).
    LowestQ,
}

/// Items of one store that share an intent text: the MemRL backend keys memories by intent and
/// expands a retrieved intent to all its memories (spec §3.3).
#[derive(Clone, Debug)]
pub struct IntentGroup {
    /// Hash of the intent text.
    pub key: u64,
    /// Offset of the intent embedding in the bank's intent table.
    pub embedding: usize,
    /// Member items in insertion order.
    pub members: Vec<ItemId>,
}

#[derive(Clone, Debug, Default)]
struct Store {
    items: Vec<ItemId>,
    groups: Vec<IntentGroup>,
    by_key: rustc_hash::FxHashMap<u64, usize>,
    /// Items evicted from this store so far (a reader's cache of the store is stale when it
    /// changes: the store shrank).
    evictions: u64,
}

impl Store {
    /// Removes `id` from the store and its intent group; a group left empty is dropped (its
    /// intent is gone from the store, as if never written).
    fn remove(&mut self, id: ItemId, key: u64) {
        self.evictions += 1;
        if let Some(p) = self.items.iter().position(|x| *x == id) {
            self.items.remove(p);
        }
        let Some(&g) = self.by_key.get(&key) else { return };
        let members = &mut self.groups[g].members;
        if let Some(p) = members.iter().position(|x| *x == id) {
            members.remove(p);
        }
        if members.is_empty() {
            self.groups.remove(g);
            self.by_key.remove(&key);
            for v in self.by_key.values_mut() {
                if *v > g {
                    *v -= 1;
                }
            }
        }
    }

    fn add(&mut self, id: ItemId, key: u64, intents: &mut IntentTable, intent_emb: &mut dyn FnMut() -> Vec<f32>) {
        self.items.push(id);
        match self.by_key.get(&key) {
            Some(g) => self.groups[*g].members.push(id),
            None => {
                let offset = intents.offset(key, intent_emb);
                self.by_key.insert(key, self.groups.len());
                self.groups.push(IntentGroup { key, embedding: offset, members: vec![id] });
            }
        }
    }
}

/// Intent embeddings, one per distinct intent of the run: stores that share an intent share
/// its row, so a per-query similarity can be computed once for all of them.
#[derive(Clone, Debug, Default)]
struct IntentTable {
    values: Vec<f32>,
    by_key: rustc_hash::FxHashMap<u64, usize>,
}

impl IntentTable {
    /// The offset of intent `key`'s row, embedding it first if the run has not seen it.
    fn offset(&mut self, key: u64, intent_emb: &mut dyn FnMut() -> Vec<f32>) -> usize {
        if let Some(o) = self.by_key.get(&key) {
            return *o;
        }
        let offset = self.values.len();
        self.values.extend_from_slice(&intent_emb());
        self.by_key.insert(key, offset);
        offset
    }
}

/// Marks an id whose item has been released.
const RELEASED: u32 = u32::MAX;

/// All items of a run and the stores that index them.
///
/// Ids are handed out in write order and never reused. Items live in slots: without a
/// [`Capacity`] slot and id coincide and nothing is ever released; with one, an evicted or
/// rejected item's slot is released at the next [`Self::release`] (the world calls it when a
/// task has finished) and reused by later writes. The per-slot arrays below are indexed by
/// slot, the per-id ones by id.
#[derive(Clone, Debug)]
pub struct MemoryBank {
    /// Items by slot.
    items: Vec<MemoryItem>,
    /// Each id's slot (`RELEASED` once released).
    slot: Vec<u32>,
    /// Each id's status at insert (kept after release: the evaluator counts stored poison).
    status: Vec<Status>,
    /// Each slot's intent key (to find its item's group on eviction; kept under a capacity).
    intent_keys: Vec<u64>,
    /// Released slots, reused last-released first.
    free: Vec<u32>,
    /// Evicted or rejected ids waiting for [`Self::release`].
    limbo: Vec<ItemId>,
    capacity: Option<Capacity>,
    /// When each slot's item was last placed into a prompt (or inserted), for LRU.
    last_used: Vec<u64>,
    tick: u64,
    evicted: u64,
    rejected: u64,
    /// Each slot's backend Q, dense, so ranking candidates need not touch whole items. Kept in
    /// step by `insert` and `sync_backend_q`.
    backend_q: Vec<f64>,
    /// Each slot's backend snapshot and scope key, dense for the same reason (see
    /// [`super::dense`]); taken at insert, when both are final.
    snapshots: Vec<(f64, f64, Taint)>,
    scope_keys: Vec<ScopeKey>,
    classes: ClassTable,
    text_embeddings: Vec<Option<Box<[f32]>>>,
    intent_table: IntentTable,
    dim: usize,
    private: Vec<Store>,
    shared: Store,
    quarantine: Vec<ItemId>,
    /// Where each item ever written is, packed ([`StoreKind::pack`]): four bytes per id, where
    /// the enum took eight.
    location: Vec<u32>,
    /// The intent of a released slot's blank item.
    blank_intent: Arc<str>,
}

impl MemoryBank {
    /// An empty bank for `agents` agents with embeddings of dimension `dim`.
    pub fn new(agents: usize, dim: usize) -> Self {
        Self::with_capacity(agents, dim, 0, 0)
    }

    /// An empty bank with room for `items` items held at once and `ids` items written, so a
    /// run does not keep moving (and, with freed pages kept mapped, keep every old copy of) a
    /// growing arena. Room not used costs address space, not memory.
    pub fn with_capacity(agents: usize, dim: usize, items: usize, ids: usize) -> Self {
        MemoryBank {
            items: Vec::with_capacity(items),
            slot: Vec::with_capacity(ids),
            status: Vec::with_capacity(ids),
            intent_keys: Vec::new(),
            free: Vec::new(),
            limbo: Vec::new(),
            capacity: None,
            last_used: Vec::new(),
            tick: 0,
            evicted: 0,
            rejected: 0,
            backend_q: Vec::with_capacity(items),
            snapshots: Vec::with_capacity(items),
            scope_keys: Vec::with_capacity(items),
            classes: ClassTable::default(),
            text_embeddings: Vec::new(),
            intent_table: IntentTable::default(),
            dim,
            private: vec![Store::default(); agents],
            shared: Store::default(),
            quarantine: Vec::new(),
            location: Vec::with_capacity(ids),
            blank_intent: "".into(),
        }
    }

    /// Bounds every store by `capacity` (call before the first insert).
    pub fn set_capacity(&mut self, capacity: Option<Capacity>) {
        assert!(self.slot.is_empty(), "capacity is set on an empty bank");
        self.capacity = capacity;
    }

    /// The stores' bound, if any.
    pub fn capacity(&self) -> Option<Capacity> {
        self.capacity
    }

    /// Adds an item (already through the gates); returns its id. Placement follows the item's
    /// status and scope: active private items go to `owner`'s store, active team items to the
    /// shared store, quarantined ones to quarantine, rejected ones nowhere. `intent_key` groups
    /// items by intent; `intent_emb` is called with the item only when the store has no such
    /// group yet. Under a [`Capacity`], a store the item takes past its bound evicts another
    /// item (see [`Eviction`]).
    pub fn insert(
        &mut self,
        mut item: MemoryItem,
        owner: u32,
        intent_key: u64,
        intent_emb: &mut dyn FnMut(&MemoryItem) -> Vec<f32>,
    ) -> ItemId {
        let id = self.slot.len() as ItemId;
        item.id = id;
        let place = match (item.status, item.scope) {
            (Status::Rejected, _) => StoreKind::Dropped,
            (Status::Quarantined, _) => StoreKind::Quarantine,
            (Status::Active, Scope::Team) => StoreKind::Shared,
            (Status::Active, Scope::Private) => StoreKind::Private(owner),
        };
        let mut emb = || intent_emb(&item);
        match place {
            StoreKind::Private(a) => self.private[a as usize].add(id, intent_key, &mut self.intent_table, &mut emb),
            StoreKind::Shared => self.shared.add(id, intent_key, &mut self.intent_table, &mut emb),
            StoreKind::Quarantine => self.quarantine.push(id),
            StoreKind::Dropped | StoreKind::Evicted => {}
        }
        self.location.push(place.pack());
        self.status.push(item.status);
        self.rejected += u64::from(item.status == Status::Rejected);
        let key = self.classes.key_of(&item);
        let s = match self.free.pop() {
            Some(s) => {
                let i = s as usize;
                self.backend_q[i] = item.backend_q;
                self.snapshots[i] = item.backend_snapshot;
                self.scope_keys[i] = key;
                self.text_embeddings[i] = None;
                self.items[i] = item;
                s
            }
            None => {
                self.backend_q.push(item.backend_q);
                self.snapshots.push(item.backend_snapshot);
                self.scope_keys.push(key);
                self.items.push(item);
                self.text_embeddings.push(None);
                (self.items.len() - 1) as u32
            }
        };
        self.slot.push(s);
        if let Some(cap) = self.capacity {
            self.tick += 1;
            if self.last_used.len() <= s as usize {
                self.last_used.resize(s as usize + 1, 0);
                self.intent_keys.resize(s as usize + 1, 0);
            }
            self.last_used[s as usize] = self.tick;
            self.intent_keys[s as usize] = intent_key;
            if place == StoreKind::Dropped {
                self.limbo.push(id);
            } else {
                self.enforce(place, cap, id);
            }
        }
        id
    }

    /// Evicts from the store at `place` until it is within `cap`, never the newcomer `new`.
    fn enforce(&mut self, place: StoreKind, cap: Capacity, new: ItemId) {
        let bound = cap.of(place);
        loop {
            let ids: &[ItemId] = match place {
                StoreKind::Private(a) => &self.private[a as usize].items,
                StoreKind::Shared => &self.shared.items,
                StoreKind::Quarantine => &self.quarantine,
                StoreKind::Dropped | StoreKind::Evicted => return,
            };
            if ids.len() <= bound {
                return;
            }
            // Store order is insertion order, so the first minimum is the oldest on a tie. One
            // pass over the store: a bound of thousands costs microseconds per write.
            let slot = |id: &ItemId| self.slot[*id as usize] as usize;
            let mut others = ids.iter().filter(|id| **id != new);
            let victim = match cap.policy {
                Eviction::Fifo => others.next(),
                Eviction::Lru => others.min_by_key(|id| self.last_used[slot(id)]),
                Eviction::LowestQ => {
                    others.min_by(|a, b| self.items[slot(a)].utility_q.total_cmp(&self.items[slot(b)].utility_q))
                }
            }
            .copied();
            let Some(victim) = victim else { return };
            let key = self.intent_keys[self.slot[victim as usize] as usize];
            match place {
                StoreKind::Private(a) => self.private[a as usize].remove(victim, key),
                StoreKind::Shared => self.shared.remove(victim, key),
                _ => self.quarantine.retain(|x| *x != victim),
            }
            self.location[victim as usize] = StoreKind::Evicted.pack();
            self.evicted += 1;
            self.limbo.push(victim);
        }
    }

    /// Notes that item `id` was placed into a prompt (the LRU clock; a no-op without a
    /// capacity).
    pub fn touch(&mut self, id: ItemId) {
        if self.capacity.is_some() {
            self.tick += 1;
            let s = self.slot[id as usize] as usize;
            self.last_used[s] = self.tick;
        }
    }

    /// Releases the items evicted or rejected since the last call, so that their slots are
    /// reused; returns their ids, in eviction order, so that callers drop what they keep
    /// about them. Call it only when nothing still refers to those items (the world calls it
    /// when a task has finished, under lockstep timing).
    pub fn release(&mut self) -> Vec<ItemId> {
        let ids = std::mem::take(&mut self.limbo);
        for &id in &ids {
            let s = self.slot[id as usize];
            // Every released slot shares one empty intent: `"".into()` would allocate for each.
            let blank = self.blank_intent.clone();
            self.items[s as usize] =
                MemoryItem::new(String::new(), blank, String::new(), crate::text::TextFeatures::default());
            self.text_embeddings[s as usize] = None;
            self.slot[id as usize] = RELEASED;
            self.free.push(s);
        }
        ids
    }

    /// Item `id`'s slot: a per-item cache indexed by it stays bounded by the live set (a
    /// released slot is reused only after [`Self::release`], so a cache stamped per task never
    /// sees two items in one slot within a task).
    pub fn slot_of(&self, id: ItemId) -> usize {
        self.slot[id as usize] as usize
    }

    /// Whether item `id` is still held (not released).
    pub fn is_live(&self, id: ItemId) -> bool {
        self.slot.get(id as usize).is_some_and(|s| *s != RELEASED)
    }

    /// Item `id`, unless it was released.
    pub fn try_get(&self, id: ItemId) -> Option<&MemoryItem> {
        self.is_live(id).then(|| &self.items[self.slot[id as usize] as usize])
    }

    /// Item `id`'s status at insert (known after its release too).
    pub fn status(&self, id: ItemId) -> Status {
        self.status[id as usize]
    }

    /// Items evicted from full stores so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Items rejected at the write gate so far.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Items held now (not released), in id order.
    pub fn live_items(&self) -> impl Iterator<Item = &MemoryItem> {
        self.slot.iter().filter(|s| **s != RELEASED).map(|s| &self.items[*s as usize])
    }

    /// Slots allocated (items held, released slots waiting for reuse included).
    pub fn slots(&self) -> usize {
        self.items.len()
    }

    /// The item with id `id`.
    pub fn get(&self, id: ItemId) -> &MemoryItem {
        &self.items[self.slot[id as usize] as usize]
    }

    /// Mutable access to item `id`. Call [`Self::sync_backend_q`] after changing its backend Q.
    pub fn get_mut(&mut self, id: ItemId) -> &mut MemoryItem {
        &mut self.items[self.slot[id as usize] as usize]
    }

    /// Item `id`'s backend Q (from the dense copy).
    pub fn backend_q(&self, id: ItemId) -> f64 {
        self.backend_q[self.slot[id as usize] as usize]
    }

    /// Refreshes the dense copy of item `id`'s backend Q.
    pub fn sync_backend_q(&mut self, id: ItemId) {
        let s = self.slot[id as usize] as usize;
        self.backend_q[s] = self.items[s].backend_q;
    }

    /// The id of task class `class` in the bank's class table (`None`: no item names it).
    /// Look it up once per reader, then pass it to [`Self::prescore_input`].
    pub fn class_id(&self, class: &str) -> Option<u32> {
        self.classes.id(class)
    }

    /// What a backend pre-score reads of item `id` for `agent` reading in `task_class` (whose
    /// id is `class_id`), from the dense copies.
    pub fn prescore_input(&self, id: ItemId, agent: u32, task_class: &str, class_id: Option<u32>) -> PrescoreInput {
        let i = self.slot[id as usize] as usize;
        let sv = match self.scope_keys[i].violation(agent, class_id) {
            Some(v) => v,
            None => self.items[i].scope_violation(agent, task_class),
        };
        let input = PrescoreInput { backend_q: self.backend_q[i], snapshot: self.snapshots[i], scope_violation: sv };
        debug_assert_eq!(
            input,
            PrescoreInput::of(&self.items[i], agent, task_class),
            "dense copy of item {id} is stale"
        );
        input
    }

    /// The text embedding of item `id`, if computed.
    pub fn text_embedding(&self, id: ItemId) -> Option<&[f32]> {
        self.text_embeddings[self.slot[id as usize] as usize].as_deref()
    }

    /// Stores the text embedding of item `id`.
    pub fn set_text_embedding(&mut self, id: ItemId, emb: Vec<f32>) {
        assert_eq!(emb.len(), self.dim, "embedding dimension");
        let s = self.slot[id as usize] as usize;
        self.text_embeddings[s] = Some(emb.into_boxed_slice());
    }

    /// Replaces item `id`'s experience and features (a writer's in-place update); its text
    /// embedding is recomputed when next needed. The intent, and so its store group, stays.
    pub fn edit_text(&mut self, id: ItemId, experience: String, features: crate::text::TextFeatures) {
        let s = self.slot[id as usize] as usize;
        let item = &mut self.items[s];
        item.experience = experience;
        item.features = features;
        self.text_embeddings[s] = None;
    }

    /// The intent embedding at `offset` of the intent table.
    pub fn intent_embedding(&self, offset: usize) -> &[f32] {
        &self.intent_table.values[offset..offset + self.dim]
    }

    /// The number of distinct intents so far; `offset / dim` of an [`IntentGroup`]'s
    /// embedding is below it.
    pub fn intent_count(&self) -> usize {
        self.intent_table.values.len() / self.dim.max(1)
    }

    /// Where item `id` is stored.
    pub fn location(&self, id: ItemId) -> StoreKind {
        StoreKind::unpack(self.location[id as usize])
    }

    /// Agent `a`'s private store, in insertion order.
    pub fn private_store(&self, a: u32) -> &[ItemId] {
        &self.private[a as usize].items
    }

    /// Evictions from agent `a`'s private store so far (see [`Capacity`]): within a task a
    /// store only grows unless this changes.
    pub fn private_evictions(&self, a: u32) -> u64 {
        self.private[a as usize].evictions
    }

    /// Evictions from the shared store so far.
    pub fn shared_evictions(&self) -> u64 {
        self.shared.evictions
    }

    /// Intent groups of agent `a`'s private store.
    pub fn private_groups(&self, a: u32) -> &[IntentGroup] {
        &self.private[a as usize].groups
    }

    /// The shared store, in insertion order.
    pub fn shared_store(&self) -> &[ItemId] {
        &self.shared.items
    }

    /// Intent groups of the shared store.
    pub fn shared_groups(&self) -> &[IntentGroup] {
        &self.shared.groups
    }

    /// The quarantine store.
    pub fn quarantine_store(&self) -> &[ItemId] {
        &self.quarantine
    }

    /// Number of items ever written (ids handed out).
    pub fn len(&self) -> usize {
        self.slot.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.slot.is_empty()
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }
}
