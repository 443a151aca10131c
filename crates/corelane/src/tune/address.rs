//! An address on an interface, as a setting a plan can add and a revert file can remove:
//! `present` or `absent`. Read and changed through iproute2's `ip` (in the calling process's
//! network namespace), which every machine with a NIC to tune has; rtnetlink from scratch
//! would be several hundred lines of unsafe message layout for two calls.

use std::io;
use std::net::IpAddr;
use std::process::Command;

use crate::child_output;

pub const PRESENT: &str = "present";
pub const ABSENT: &str = "absent";

/// `ADDR/PREFIX`, checked: an address and a prefix length that fits it.
pub fn parse_cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, prefix) = text.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix: u8 = prefix.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some((addr, prefix))
}

fn ip(args: &[&str]) -> io::Result<String> {
    let limits = child_output::Limits::REPLY;
    let out =
        child_output::run(Command::new("ip").args(args), None, &limits).map_err(|e| match e {
            child_output::OutputError::Spawn(e) => {
                io::Error::new(e.kind(), format!("cannot run `ip` (install iproute2): {e}"))
            }
            e => io::Error::other(format!("ip {}: {e}", args.join(" "))),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = child_output::printable(&String::from_utf8_lossy(&out.stderr), 2000);
        Err(io::Error::other(format!("ip {}: {err}", args.join(" "))))
    }
}

/// Whether `nic` holds `addr` (with any prefix): `present` or `absent`.
pub fn state(nic: &str, addr: IpAddr) -> io::Result<String> {
    let text = ip(&["-o", "addr", "show", "dev", nic])?;
    let held = text.split_whitespace().any(|w| {
        w.split_once('/').is_some_and(|(a, _)| a.parse::<IpAddr>().is_ok_and(|a| a == addr))
    });
    Ok(if held { PRESENT } else { ABSENT }.to_string())
}

/// Adds (`present`) or removes (`absent`) `addr/prefix` on `nic`.
pub fn set(nic: &str, addr: IpAddr, prefix: u8, value: &str) -> io::Result<()> {
    let verb = match value {
        PRESENT => "add",
        ABSENT => "del",
        _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, "present or absent")),
    };
    let cidr = format!("{addr}/{prefix}");
    ip(&["addr", verb, &cidr, "dev", nic]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_address_with_a_fitting_prefix_parses() {
        assert_eq!(parse_cidr("10.0.0.5/24"), Some(("10.0.0.5".parse().unwrap(), 24)));
        assert_eq!(parse_cidr("fd00::5/64"), Some(("fd00::5".parse().unwrap(), 64)));
        for bad in [
            "10.0.0.5",
            "10.0.0.5/33",
            "fd00::5/129",
            "10.0.0.5/",
            "x/24",
            "10.0.0.5/+4",
            "/24",
            "10.0.0.5/24/1",
            "10.0.0.5/0024",
        ] {
            assert_eq!(parse_cidr(bad), None, "{bad}");
        }
    }
}
