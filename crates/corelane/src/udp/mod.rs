//! Seed 000's UDP path: batched senders and receivers (sendmmsg/recvmmsg), UDP GSO and GRO as
//! run-time state that falls back when the kernel refuses, one shared socket or one
//! SO_REUSEPORT socket per lane, and a payload that lets the receiver check every datagram.

pub mod answer;
mod backend;
pub mod budget;
mod check;
pub mod dispatch;
mod echo;
mod error;
mod judge;
mod lanes;
mod pace;
pub mod payload;
mod ping;
mod recv;
mod recv_lane;
mod recv_report;
mod recv_watch;
mod send;
mod send_xdp;
pub mod sequence;
mod socket;
pub mod sockperf;
pub mod source_check;

pub use backend::{BackendOptions, BackendReport, BackendSecond, RecvBackend};
pub use check::Anomalies;
pub use echo::{
    Echo, EchoConfig, EchoInterval, EchoLane, EchoSummary, LANE_NAME as ECHO_LANE_NAME,
};
pub use error::UdpError;
pub use judge::{Dropped, ReplyCounter};
pub use lanes::{Lanes, ReceivePath};
pub use ping::{Ping, PingConfig, PingInterval, PingMode, PingSummary};
pub use recv::{Receiver, ReceiverConfig, LANE_NAME as RECV_LANE_NAME};
pub use recv_report::{LaneSummary, RecvInterval, RecvSummary};
pub use send::{
    GsoState, SendBackend, SendInterval, SendSummary, Sender, SenderConfig, MAX_GSO_SEGMENTS,
    MAX_PAYLOAD,
};
pub use sequence::{
    FlowGroup, FlowGroupReport, SequenceReport, SequenceTracker, MAX_FLOW_GROUPS, MAX_TRACKED_FLOWS,
};
pub use socket::{BusyPollState, OffloadState, SocketMode, Steering};

/// What a datagram of `udp echo` / `udp ping` carries: corelane's checked payload, or
/// sockperf's header (to cross corelane with sockperf's client and server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    #[default]
    Corelane,
    Sockperf,
}

/// The most messages one recvmmsg/sendmmsg call takes.
pub const MAX_BATCH: usize = crate::sys::mmsg::MAX_BATCH;
