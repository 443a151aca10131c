//! Seed 001's recycling, each method switchable so the lab can price it:
//! * `buffers` — the sk_buff-recycling analog: the I/O buffers a connection is lent while it
//!   has bytes in flight come from its lane's pool and go back to it when the connection goes
//!   idle or closes; without it, every request allocates (and zeroes) fresh buffers that are
//!   freed when the connection goes idle;
//! * `fd` — the fd-recycling analog: connection state lives in a slab whose slots (and their
//!   token numbers) are reused, instead of a boxed entry in a hash map per connection;
//! * `events` — epoll_event recycling: one event array per lane reused by every `epoll_wait`,
//!   instead of a fresh array per call.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// Which recycling methods are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Recycle {
    pub buffers: bool,
    pub fd: bool,
    pub events: bool,
}

impl Recycle {
    pub const ALL: Self = Self { buffers: true, fd: true, events: true };
    pub const NONE: Self = Self { buffers: false, fd: false, events: false };
}

impl Default for Recycle {
    fn default() -> Self {
        Self::ALL
    }
}

impl FromStr for Recycle {
    type Err = String;

    /// `all`, `none`, or a comma list of `fd`, `events`, `buffers`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "all" => return Ok(Self::ALL),
            "none" => return Ok(Self::NONE),
            _ => {}
        }
        let mut r = Self::NONE;
        for part in s.split(',').map(str::trim) {
            match part {
                "fd" => r.fd = true,
                "events" => r.events = true,
                "buffers" => r.buffers = true,
                other => {
                    return Err(format!(
                        "unknown recycling method {other:?}: use all, none, or a comma list of fd, events, buffers"
                    ))
                }
            }
        }
        Ok(r)
    }
}

impl fmt::Display for Recycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> =
            [(self.fd, "fd"), (self.events, "events"), (self.buffers, "buffers")]
                .into_iter()
                .filter_map(|(on, name)| on.then_some(name))
                .collect();
        match parts.len() {
            0 => f.write_str("none"),
            3 => f.write_str("all"),
            _ => f.write_str(&parts.join(",")),
        }
    }
}

/// The capacity a pooled buffer keeps at most beyond its size (responses of a fixed body and
/// heads fit; bigger ones grow a buffer for their connection only).
const KEPT_CAPACITY: usize = 16 << 10;

/// A lane's buffers of one size. With recycling off every `take` allocates (zeroed, as a
/// fresh receive buffer must be) and every `give` frees.
#[derive(Debug)]
pub struct BufferPool {
    size: usize,
    recycle: bool,
    free: Vec<Vec<u8>>,
    /// Buffers kept at most; beyond it returned buffers are freed.
    keep: usize,
}

impl BufferPool {
    pub fn new(size: usize, recycle: bool, keep: usize) -> Self {
        Self { size, recycle, free: Vec::new(), keep }
    }

    /// A buffer of `size` bytes.
    pub fn take(&mut self) -> Vec<u8> {
        match self.free.pop() {
            Some(buf) => buf,
            None => vec![0; self.size],
        }
    }

    /// Returns a buffer taken from this pool. A buffer a connection grew (a long pipeline,
    /// a large response) goes back at its usual size: a pool of buffers each as large as the
    /// largest ever used would keep every peer's peak.
    pub fn give(&mut self, mut buf: Vec<u8>) {
        if self.recycle && self.free.len() < self.keep && buf.capacity() >= self.size {
            buf.truncate(self.size);
            buf.shrink_to(self.size.max(KEPT_CAPACITY));
            buf.resize(self.size, 0);
            self.free.push(buf);
        }
    }

    pub fn idle(&self) -> usize {
        self.free.len()
    }
}

/// Connection state by token. Recycled: a slab whose freed slots are reused (tokens stay small
/// and dense). Fresh: a boxed entry per connection in a hash map, the allocation pattern of a
/// server that does not recycle.
#[derive(Debug)]
pub enum SlotTable<T> {
    Recycled { slots: Vec<Option<T>>, free: Vec<usize>, len: usize },
    Fresh { map: HashMap<u64, Box<T>>, next: u64 },
}

impl<T> SlotTable<T> {
    pub fn new(recycle: bool) -> Self {
        if recycle {
            Self::Recycled { slots: Vec::new(), free: Vec::new(), len: 0 }
        } else {
            Self::Fresh { map: HashMap::new(), next: 0 }
        }
    }

    /// Stores `value` and returns its token.
    pub fn insert(&mut self, value: T) -> u64 {
        match self {
            Self::Recycled { slots, free, len } => {
                *len += 1;
                if let Some(i) = free.pop() {
                    slots[i] = Some(value);
                    i as u64
                } else {
                    slots.push(Some(value));
                    (slots.len() - 1) as u64
                }
            }
            Self::Fresh { map, next } => {
                let token = *next;
                *next += 1;
                map.insert(token, Box::new(value));
                token
            }
        }
    }

    pub fn get_mut(&mut self, token: u64) -> Option<&mut T> {
        match self {
            Self::Recycled { slots, .. } => slots.get_mut(token as usize)?.as_mut(),
            Self::Fresh { map, .. } => map.get_mut(&token).map(|b| &mut **b),
        }
    }

    pub fn remove(&mut self, token: u64) -> Option<T> {
        match self {
            Self::Recycled { slots, free, len } => {
                let value = slots.get_mut(token as usize)?.take()?;
                free.push(token as usize);
                *len -= 1;
                Some(value)
            }
            Self::Fresh { map, .. } => map.remove(&token).map(|b| *b),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Recycled { len, .. } => *len,
            Self::Fresh { map, .. } => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tokens in use (for the periodic timeout sweep).
    pub fn tokens(&self) -> Vec<u64> {
        match self {
            Self::Recycled { slots, .. } => {
                slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|_| i as u64)).collect()
            }
            Self::Fresh { map, .. } => map.keys().copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycle_lists_parse_and_print() {
        assert_eq!("all".parse::<Recycle>().unwrap(), Recycle::ALL);
        assert_eq!("none".parse::<Recycle>().unwrap(), Recycle::NONE);
        let r: Recycle = "fd, buffers".parse().unwrap();
        assert_eq!(r, Recycle { fd: true, buffers: true, events: false });
        assert_eq!(r.to_string(), "fd,buffers");
        assert!("fd,sockets".parse::<Recycle>().unwrap_err().contains("\"sockets\""));
    }

    /// A buffer grown to 2 MiB by one connection went back to the pool at 2 MiB, so a pool
    /// of 1,024 could hold 2 GiB; it goes back at its usual size.
    #[test]
    fn grown_buffers_are_shrunk_before_they_are_pooled() {
        let mut pool = BufferPool::new(8192, true, 16);
        let mut buf = pool.take();
        buf.resize(2 << 20, 7);
        pool.give(buf);
        let again = pool.take();
        assert_eq!(again.len(), 8192);
        assert!(again.capacity() <= KEPT_CAPACITY, "{}", again.capacity());
        let mut outputs = BufferPool::new(0, true, 16);
        let mut out = outputs.take();
        out.extend_from_slice(&[1; 1 << 20]);
        outputs.give(out);
        assert!(outputs.take().capacity() <= KEPT_CAPACITY);
    }

    #[test]
    fn recycled_slots_are_reused_fresh_ones_are_not() {
        for recycle in [true, false] {
            let mut t = SlotTable::new(recycle);
            let a = t.insert("a");
            let b = t.insert("b");
            assert_eq!(t.remove(a), Some("a"));
            assert_eq!(t.remove(a), None);
            let c = t.insert("c");
            assert_eq!(c == a, recycle);
            assert_eq!(t.len(), 2);
            assert_eq!(t.get_mut(b).copied(), Some("b"));
            let mut tokens = t.tokens();
            tokens.sort();
            let mut want = vec![b, c];
            want.sort();
            assert_eq!(tokens, want);
        }
    }

    #[test]
    fn pools_keep_buffers_only_when_recycling() {
        let mut on = BufferPool::new(16, true, 4);
        let buf = on.take();
        assert_eq!(buf.len(), 16);
        on.give(buf);
        assert_eq!(on.idle(), 1);
        let mut off = BufferPool::new(16, false, 4);
        let buf = off.take();
        off.give(buf);
        assert_eq!(off.idle(), 0);
    }
}
