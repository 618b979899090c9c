//! The memory bank: an arena of items plus the stores that index into it.

use super::dense::{ClassTable, PrescoreInput, ScopeKey};
use super::item::{ItemId, MemoryItem, Scope, Status, Taint};
use serde::{Deserialize, Serialize};

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
}

impl Store {
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

/// All items of a run and the stores that index them.
#[derive(Clone, Debug)]
pub struct MemoryBank {
    items: Vec<MemoryItem>,
    /// Each item's backend Q, dense, so ranking candidates need not touch whole items. Kept in
    /// step by `insert` and `sync_backend_q`.
    backend_q: Vec<f64>,
    /// Each item's backend snapshot and scope key, dense for the same reason (see
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
    location: Vec<StoreKind>,
}

impl MemoryBank {
    /// An empty bank for `agents` agents with embeddings of dimension `dim`.
    pub fn new(agents: usize, dim: usize) -> Self {
        Self::with_capacity(agents, dim, 0)
    }

    /// An empty bank with room for `items` items, so a run does not keep moving a growing
    /// arena.
    pub fn with_capacity(agents: usize, dim: usize, items: usize) -> Self {
        MemoryBank {
            items: Vec::with_capacity(items),
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
            location: Vec::with_capacity(items),
        }
    }

    /// Adds an item (already through the gates); returns its id. Placement follows the item's
    /// status and scope: active private items go to `owner`'s store, active team items to the
    /// shared store, quarantined ones to quarantine, rejected ones nowhere. `intent_key` groups
    /// items by intent; `intent_emb` is called with the item only when the store has no such
    /// group yet.
    pub fn insert(
        &mut self,
        mut item: MemoryItem,
        owner: u32,
        intent_key: u64,
        intent_emb: &mut dyn FnMut(&MemoryItem) -> Vec<f32>,
    ) -> ItemId {
        let id = self.items.len() as ItemId;
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
            StoreKind::Dropped => {}
        }
        self.location.push(place);
        self.backend_q.push(item.backend_q);
        self.snapshots.push(item.backend_snapshot);
        let key = self.classes.key_of(&item);
        self.scope_keys.push(key);
        self.items.push(item);
        self.text_embeddings.push(None);
        id
    }

    /// The item with id `id`.
    pub fn get(&self, id: ItemId) -> &MemoryItem {
        &self.items[id as usize]
    }

    /// Mutable access to item `id`. Call [`Self::sync_backend_q`] after changing its backend Q.
    pub fn get_mut(&mut self, id: ItemId) -> &mut MemoryItem {
        &mut self.items[id as usize]
    }

    /// Item `id`'s backend Q (from the dense copy).
    pub fn backend_q(&self, id: ItemId) -> f64 {
        self.backend_q[id as usize]
    }

    /// Refreshes the dense copy of item `id`'s backend Q.
    pub fn sync_backend_q(&mut self, id: ItemId) {
        self.backend_q[id as usize] = self.items[id as usize].backend_q;
    }

    /// The id of task class `class` in the bank's class table (`None`: no item names it).
    /// Look it up once per reader, then pass it to [`Self::prescore_input`].
    pub fn class_id(&self, class: &str) -> Option<u32> {
        self.classes.id(class)
    }

    /// What a backend pre-score reads of item `id` for `agent` reading in `task_class` (whose
    /// id is `class_id`), from the dense copies.
    pub fn prescore_input(&self, id: ItemId, agent: u32, task_class: &str, class_id: Option<u32>) -> PrescoreInput {
        let i = id as usize;
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
        self.text_embeddings[id as usize].as_deref()
    }

    /// Stores the text embedding of item `id`.
    pub fn set_text_embedding(&mut self, id: ItemId, emb: Vec<f32>) {
        assert_eq!(emb.len(), self.dim, "embedding dimension");
        self.text_embeddings[id as usize] = Some(emb.into_boxed_slice());
    }

    /// Replaces item `id`'s experience and features (a writer's in-place update); its text
    /// embedding is recomputed when next needed. The intent, and so its store group, stays.
    pub fn edit_text(&mut self, id: ItemId, experience: String, features: crate::text::TextFeatures) {
        let item = &mut self.items[id as usize];
        item.experience = experience;
        item.features = features;
        self.text_embeddings[id as usize] = None;
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
        self.location[id as usize]
    }

    /// Agent `a`'s private store, in insertion order.
    pub fn private_store(&self, a: u32) -> &[ItemId] {
        &self.private[a as usize].items
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

    /// Every item ever written, in id order.
    pub fn items(&self) -> &[MemoryItem] {
        &self.items
    }

    /// Number of items ever written.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }
}
