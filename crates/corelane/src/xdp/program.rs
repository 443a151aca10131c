//! corelane's XDP program, emitted per run for the bound address and port: UDP frames to
//! that address and port (one optional VLAN tag, IPv4 with options but not fragments, IPv6
//! without extension headers) go to the AF_XDP socket of their RX queue through an XSKMAP, or
//! are dropped and counted for the ceiling run; every other frame (ARP, ICMP, SSH, other
//! ports, fragments) is passed to the kernel's stack untouched.

use std::net::{IpAddr, SocketAddr};

use super::asm::{Alu, Asm, Cond, Label, Size, R0, R1, R10, R2, R3, R4, R5, R6};
use super::frame::{ETH_P_8021AD, ETH_P_8021Q, ETH_P_IP, ETH_P_IPV6, IPPROTO_UDP};

/// The name every corelane XDP program carries; how a later run recognises a left-over one.
pub const PROGRAM_NAME: &str = "corelane_xdp";

const ETH_HLEN: i16 = 14;
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;
const HELPER_MAP_LOOKUP: i32 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;

/// What the program does with a matching frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `bpf_redirect_map(xskmap, rx_queue_index, XDP_PASS)`: to the queue's AF_XDP socket, or
    /// to the stack when the queue has none.
    Redirect { xskmap_fd: i32 },
    /// `XDP_DROP`, counted in slot 0 of a per-CPU array: the ceiling of any XDP consumer.
    Drop { counter_fd: i32 },
}

/// A 16-bit field as a BPF load of network-order bytes reads it on this host.
fn be16(v: u16) -> i32 {
    i32::from(u16::from_ne_bytes(v.to_be_bytes()))
}

/// Four address bytes as a 32-bit BPF load reads them.
fn word(bytes: [u8; 4]) -> u32 {
    u32::from_ne_bytes(bytes)
}

/// Jumps to `pass` unless `bytes` from r2 (the frame's start, moved on past a VLAN tag) have
/// arrived: r3 holds `data_end`.
fn pass_unless_arrived(a: &mut Asm, bytes: i16, pass: Label) {
    a.alu_reg(Alu::Mov, R4, R2).alu_imm(Alu::Add, R4, bytes.into());
    a.jump_reg(Cond::Gt, R4, R3, pass);
}

/// Jumps to `pass` unless the EtherType in r5 is `ethertype`, its IP header of `header_len`
/// bytes has arrived and the header's protocol byte at `protocol_at` says UDP; r5 is then free.
fn pass_unless_udp(a: &mut Asm, ethertype: u16, header_len: i16, protocol_at: i16, pass: Label) {
    a.jump_imm(Cond::Ne, R5, be16(ethertype), pass);
    pass_unless_arrived(a, ETH_HLEN + header_len, pass);
    a.load(Size::B, R5, R2, ETH_HLEN + protocol_at);
    a.jump_imm(Cond::Ne, R5, IPPROTO_UDP.into(), pass);
}

/// Emits the program for `addr` (an unspecified address matches any destination address of
/// its family).
pub fn emit(addr: SocketAddr, action: Action) -> Vec<u64> {
    let mut a = Asm::new();
    let pass = a.label();
    let l3 = a.label();
    let vlan = a.label();
    let matched = a.label();
    a.alu_reg(Alu::Mov, R6, R1);
    a.load(Size::W, R2, R1, 0); // data
    a.load(Size::W, R3, R1, 4); // data_end
    pass_unless_arrived(&mut a, ETH_HLEN, pass);
    a.load(Size::H, R5, R2, 12);
    a.jump_imm(Cond::Eq, R5, be16(ETH_P_8021Q), vlan);
    a.jump_imm(Cond::Eq, R5, be16(ETH_P_8021AD), vlan);
    a.goto(l3);
    a.bind(vlan);
    // One tag: the inner type sits 4 bytes on, and r2 moves so L3 is again at r2 + 14.
    pass_unless_arrived(&mut a, ETH_HLEN + 4, pass);
    a.load(Size::H, R5, R2, 16);
    a.alu_imm(Alu::Add, R2, 4);
    a.bind(l3);
    match addr.ip() {
        IpAddr::V4(ip) => {
            pass_unless_udp(&mut a, ETH_P_IP, 20, 9, pass);
            // Fragments (offset or more-fragments set) go to the stack, which reassembles.
            a.load(Size::H, R5, R2, ETH_HLEN + 6);
            a.alu_imm(Alu::And, R5, be16(0x3fff));
            a.jump_imm(Cond::Ne, R5, 0, pass);
            if !ip.is_unspecified() {
                a.load(Size::W, R5, R2, ETH_HLEN + 16);
                a.jump32_imm(Cond::Ne, R5, word(ip.octets()), pass);
            }
            // The header's own length (IHL x 4, 20 to 60 bytes) places the UDP header.
            a.load(Size::B, R5, R2, ETH_HLEN);
            a.alu_imm(Alu::And, R5, 0x0f).alu_imm(Alu::Lsh, R5, 2);
            a.jump_imm(Cond::Lt, R5, 20, pass);
            a.alu_reg(Alu::Add, R2, R5);
        }
        IpAddr::V6(ip) => {
            pass_unless_udp(&mut a, ETH_P_IPV6, 40, 6, pass);
            if !ip.is_unspecified() {
                for (i, chunk) in ip.octets().chunks_exact(4).enumerate() {
                    let bytes = [chunk[0], chunk[1], chunk[2], chunk[3]];
                    a.load(Size::W, R5, R2, ETH_HLEN + 24 + 4 * i as i16);
                    a.jump32_imm(Cond::Ne, R5, word(bytes), pass);
                }
            }
            a.alu_imm(Alu::Add, R2, 40);
        }
    }
    // r2 + 14 is now the UDP header.
    pass_unless_arrived(&mut a, ETH_HLEN + 8, pass);
    a.load(Size::H, R5, R2, ETH_HLEN + 2);
    a.jump_imm(Cond::Eq, R5, be16(addr.port()), matched);
    a.bind(pass);
    a.alu_imm(Alu::Mov, R0, XDP_PASS).exit();
    a.bind(matched);
    match action {
        Action::Redirect { xskmap_fd } => {
            a.load(Size::W, R2, R6, 16); // rx_queue_index
            a.load_map(R1, xskmap_fd);
            a.alu_imm(Alu::Mov, R3, XDP_PASS);
            a.call(HELPER_REDIRECT_MAP).exit();
        }
        Action::Drop { counter_fd } => {
            let drop = a.label();
            a.store_imm(Size::W, R10, -4, 0);
            a.alu_reg(Alu::Mov, R2, R10).alu_imm(Alu::Add, R2, -4);
            a.load_map(R1, counter_fd);
            a.call(HELPER_MAP_LOOKUP);
            a.jump_imm(Cond::Eq, R0, 0, drop);
            a.load(Size::DW, R1, R0, 0).alu_imm(Alu::Add, R1, 1).store(Size::DW, R0, 0, R1);
            a.bind(drop);
            a.alu_imm(Alu::Mov, R0, XDP_DROP).exit();
        }
    }
    // Every label above is bound and every jump spans fewer than 100 instructions.
    a.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_assembles() {
        for addr in ["0.0.0.0:9", "10.1.2.3:4321", "[::]:9", "[fd00::1]:4321"] {
            let addr: SocketAddr = addr.parse().unwrap();
            for action in [Action::Redirect { xskmap_fd: 3 }, Action::Drop { counter_fd: 4 }] {
                let p = emit(addr, action);
                assert!(p.len() > 20 && p.len() < 100, "{addr} {action:?}: {}", p.len());
            }
        }
    }
}
