//! Per-flow state keyed by flow id: a vector for the small dense ids flows carry here (one
//! index per event, no hashing on the dispatch path), a hash map for any id beyond it.
//! Written here because no map crate offers this split; keys come back in id order, so runs
//! stay deterministic.

use std::collections::HashMap;

/// Ids below this live in the vector: one id far out costs at most this many empty slots.
/// The same bound as the flows a UDP receiver tracks, which is what feeds these maps from the
/// network.
const DENSE: u32 = super::MAX_TRACKED_FLOWS as u32;

#[derive(Debug, Clone)]
pub struct FlowMap<T> {
    dense: Vec<Option<T>>,
    sparse: HashMap<u32, T>,
}

impl<T> Default for FlowMap<T> {
    fn default() -> Self {
        Self { dense: Vec::new(), sparse: HashMap::new() }
    }
}

impl<T> FlowMap<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, id: &u32) -> Option<&T> {
        if *id < DENSE {
            self.dense.get(*id as usize)?.as_ref()
        } else {
            self.sparse.get(id)
        }
    }

    pub fn insert(&mut self, id: u32, value: T) {
        if id < DENSE {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i] = Some(value);
        } else {
            self.sparse.insert(id, value);
        }
    }

    /// The value for `id`, inserted with `make` first if absent.
    pub fn get_or_insert_with(&mut self, id: u32, make: impl FnOnce() -> T) -> &mut T {
        if id < DENSE {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].get_or_insert_with(make)
        } else {
            self.sparse.entry(id).or_insert_with(make)
        }
    }

    pub fn get_mut(&mut self, id: &u32) -> Option<&mut T> {
        if *id < DENSE {
            self.dense.get_mut(*id as usize)?.as_mut()
        } else {
            self.sparse.get_mut(id)
        }
    }

    /// Every id present, in increasing order.
    pub fn keys(&self) -> Vec<u32> {
        let mut keys: Vec<u32> = self
            .dense
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|_| i as u32))
            .collect();
        let mut sparse: Vec<u32> = self.sparse.keys().copied().collect();
        sparse.sort_unstable();
        keys.extend(sparse);
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_ids_behave_alike() {
        let mut m = FlowMap::new();
        m.insert(3, "a");
        m.insert(u32::MAX, "z");
        *m.get_or_insert_with(7, || "b") = "c";
        assert_eq!(m.get(&3), Some(&"a"));
        assert_eq!(m.get(&7), Some(&"c"));
        assert_eq!(m.get(&u32::MAX), Some(&"z"));
        assert_eq!(m.get(&4), None);
        assert_eq!(m.keys(), vec![3, 7, u32::MAX]);
    }
}
