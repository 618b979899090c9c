//! The memory bank: an arena of items plus the stores that index into it.

use super::item::{ItemId, MemoryItem, Scope, Status};
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

/// All items of a run and the stores that index them.
#[derive(Clone, Debug)]
pub struct MemoryBank {
    items: Vec<MemoryItem>,
    embeddings: Vec<f32>,
    dim: usize,
    private: Vec<Vec<ItemId>>,
    shared: Vec<ItemId>,
    quarantine: Vec<ItemId>,
    location: Vec<StoreKind>,
}

impl MemoryBank {
    /// An empty bank for `agents` agents with embeddings of dimension `dim`.
    pub fn new(agents: usize, dim: usize) -> Self {
        MemoryBank {
            items: Vec::new(),
            embeddings: Vec::new(),
            dim,
            private: vec![Vec::new(); agents],
            shared: Vec::new(),
            quarantine: Vec::new(),
            location: Vec::new(),
        }
    }

    /// Adds an item (already through the gates) with its embedding; returns its id.
    /// Placement follows the item's status and scope: active private items go to `owner`'s store,
    /// active team items to the shared store, quarantined ones to quarantine, rejected nowhere.
    pub fn insert(&mut self, mut item: MemoryItem, embedding: &[f32], owner: u32) -> ItemId {
        assert_eq!(embedding.len(), self.dim, "embedding dimension");
        let id = self.items.len() as ItemId;
        item.id = id;
        let place = match (item.status, item.scope) {
            (Status::Rejected, _) => StoreKind::Dropped,
            (Status::Quarantined, _) => StoreKind::Quarantine,
            (Status::Active, Scope::Team) => StoreKind::Shared,
            (Status::Active, Scope::Private) => StoreKind::Private(owner),
        };
        match place {
            StoreKind::Private(a) => self.private[a as usize].push(id),
            StoreKind::Shared => self.shared.push(id),
            StoreKind::Quarantine => self.quarantine.push(id),
            StoreKind::Dropped => {}
        }
        self.location.push(place);
        self.items.push(item);
        self.embeddings.extend_from_slice(embedding);
        id
    }

    /// The item with id `id`.
    pub fn get(&self, id: ItemId) -> &MemoryItem {
        &self.items[id as usize]
    }

    /// Mutable access to item `id`.
    pub fn get_mut(&mut self, id: ItemId) -> &mut MemoryItem {
        &mut self.items[id as usize]
    }

    /// The embedding of item `id`.
    pub fn embedding(&self, id: ItemId) -> &[f32] {
        let s = id as usize * self.dim;
        &self.embeddings[s..s + self.dim]
    }

    /// Where item `id` is stored.
    pub fn location(&self, id: ItemId) -> StoreKind {
        self.location[id as usize]
    }

    /// Agent `a`'s private store, in insertion order.
    pub fn private_store(&self, a: u32) -> &[ItemId] {
        &self.private[a as usize]
    }

    /// The shared store, in insertion order.
    pub fn shared_store(&self) -> &[ItemId] {
        &self.shared
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
