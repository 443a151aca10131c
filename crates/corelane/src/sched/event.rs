//! What the dispatcher moves: events, and where it placed them. A leaf module: the
//! dispatcher, its books and every policy import it, and it imports none of them.

/// An event: which flow it belongs to, its place in the flow, when it was born and its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The flow the event belongs to.
    pub flow: u32,
    /// Its place in the flow; the egress checks these come out in order.
    pub seq: u64,
    /// When it arrived (ns), for its latency.
    pub born_ns: u64,
    /// The worker time it takes (ns).
    pub cost_ns: u32,
    /// The part of the cost the dispatcher can predict (from a packet's length).
    pub visible_cost_ns: u32,
    /// A worker starts the event no earlier than this (0: at once); set by Diffuser so that a
    /// diffused event finishes after its predecessor.
    pub not_before_ns: u64,
    /// Predicted worker time the dispatcher charged for it (waiting included).
    pub charge_ns: u32,
    /// When the dispatcher predicted it would finish (Diffuser), to correct its predictions.
    pub due_ns: u64,
}

impl Event {
    /// A new event; the dispatcher fills in its timing fields.
    pub fn new(flow: u32, seq: u64, born_ns: u64, cost_ns: u32, visible_cost_ns: u32) -> Self {
        Self {
            flow,
            seq,
            born_ns,
            cost_ns,
            visible_cost_ns,
            not_before_ns: 0,
            charge_ns: 0,
            due_ns: 0,
        }
    }
}

/// Where the dispatcher put an event: send `event` to `worker`, as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// The worker that serves the event.
    pub worker: usize,
    /// The event with its timing fields (`not_before_ns`, `charge_ns`, `due_ns`) filled in.
    pub event: Event,
}

/// The epoch at which loads are measured and the feedback loops run.
pub const EPOCH_NS: u64 = 250_000;
