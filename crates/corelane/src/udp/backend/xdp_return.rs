//! The floor of an AF_XDP delivery: the program and sockets of `xdp`, and lanes that only
//! hand each frame back to the fill ring and count it, reading nothing.

use super::xdp::{self, Reads};
use super::{Backend, BackendOptions, BindRequest, Bound, RecvBackend};
use crate::udp::UdpError;
use crate::xdp::XdpMode;

/// AF_XDP frames counted and handed back unread.
pub(in crate::udp) struct XdpReturn {
    pub mode: XdpMode,
}

impl Backend for XdpReturn {
    fn name(&self) -> &'static str {
        "xdp-return"
    }

    fn about(&self) -> &'static str {
        "the delivery floor: AF_XDP as xdp, each frame handed back to the kernel unread \
         (needs root; --xdp-mode, --xdp-dev)"
    }

    fn options(&self) -> &'static [&'static str] {
        &["--xdp-mode", "--xdp-dev"]
    }

    fn configure(&self, options: &BackendOptions) -> RecvBackend {
        RecvBackend::XdpReturn { mode: options.xdp_mode.unwrap_or(self.mode) }
    }

    fn bind(&self, request: &BindRequest<'_>) -> Result<Bound, UdpError> {
        let mut bound = xdp::bind(request, self.mode, None, Reads::Nothing)?;
        bound.note = bound
            .note
            .map(|note| format!("{note}; frames handed back unread (the delivery floor)"));
        Ok(bound)
    }

    fn reads_headers(&self) -> bool {
        false
    }
}
