//! IP networks (CIDRs) as the inputs write them: [`ipnet`] does the arithmetic; this file adds the rules the
//! inputs need (host bits zero, as the API server requires) and the few questions the network rules ask.

use ipnet::{IpNet, Ipv4Net};
use std::net::{IpAddr, Ipv4Addr};

/// Parses `10.128.0.0/14` or `fd00::/48`, saying in wmrender's words what is wrong. Host bits must be zero.
pub fn parse_cidr(s: &str) -> Result<IpNet, String> {
    let (addr, prefix) = s.split_once('/').ok_or("missing `/prefix`")?;
    let addr: IpAddr = addr.parse().map_err(|_| format!("`{addr}` is not an IP address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let out_of_range = || format!("the prefix `/{}` is not a number from 0 to {max}", prefix.escape_debug());
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= max).ok_or_else(out_of_range)?;
    let net = IpNet::new(addr, prefix).map_err(|_| out_of_range())?;
    if net.trunc() != net {
        return Err(format!("host bits are set; the network address is {}", net.trunc()));
    }
    Ok(net)
}

/// The `n`th address of the network (0 = the network address): the cluster DNS service is the 10th of the first
/// service network. `None` when the network is smaller than that.
pub fn nth(net: &IpNet, n: u128) -> Option<IpAddr> {
    let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
    if n.checked_shr(host_bits).is_some_and(|high| high != 0) {
        return None;
    }
    Some(match net {
        IpNet::V4(v) => IpAddr::V4((u32::from(v.network()) + n as u32).into()),
        IpNet::V6(v) => IpAddr::V6((u128::from(v.network()) + n).into()),
    })
}

/// Whether two networks share any address.
pub fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

/// Class E (240.0.0.0/4): Windows nodes cannot use these addresses.
pub fn is_class_e(net: &IpNet) -> bool {
    const CLASS_E: IpNet = IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(240, 0, 0, 0), 4));
    overlaps(net, &CLASS_E)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        parse_cidr(s).unwrap()
    }

    #[test]
    fn parses_and_rejects() {
        assert!(parse_cidr("10.128.0.0/14").is_ok());
        assert!(parse_cidr("fd00::/48").is_ok());
        assert!(parse_cidr("10.128.0.1/14").unwrap_err().contains("10.128.0.0/14"));
        assert!(parse_cidr("10.0.0.0").is_err());
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("banana/8").is_err());
    }

    #[test]
    fn nth_address() {
        assert_eq!(nth(&net("172.30.0.0/16"), 10).unwrap().to_string(), "172.30.0.10");
        assert_eq!(nth(&net("fd02::/112"), 10).unwrap().to_string(), "fd02::a");
        assert_eq!(nth(&net("10.0.0.0/29"), 10), None);
        assert_eq!(nth(&net("10.0.0.0/28"), 10).unwrap().to_string(), "10.0.0.10");
        assert_eq!(nth(&net("::/0"), 10).unwrap().to_string(), "::a");
    }

    #[test]
    fn overlap_and_class_e() {
        let a = net("10.128.0.0/14");
        assert!(overlaps(&a, &net("10.130.0.0/16")));
        assert!(!overlaps(&a, &net("10.132.0.0/14")));
        assert!(!overlaps(&a, &net("fd00::/8")));
        assert!(is_class_e(&net("240.0.0.0/14")));
        assert!(is_class_e(&net("224.0.0.0/3")));
        assert!(!is_class_e(&a));
        assert!(overlaps(&net("0.0.0.0/0"), &a));
    }
}
