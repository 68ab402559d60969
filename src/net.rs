//! IP networks (CIDRs) as the inputs write them: parsing, overlap, and the checks the network rules need.

use std::net::IpAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parses `10.128.0.0/14` or `fd00::/48`. Host bits must be zero, as the API server requires.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, prefix) = s.split_once('/').ok_or("missing `/prefix`")?;
        let addr: IpAddr = addr.parse().map_err(|_| format!("`{addr}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= max).ok_or(format!("prefix must be 0..={max}"))?;
        let cidr = Cidr { addr, prefix };
        if cidr.network_bits() != cidr.bits() {
            return Err(format!("host bits are set; the network address is {}", cidr.network()));
        }
        Ok(cidr)
    }

    fn bits(&self) -> u128 {
        match self.addr {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    fn width(&self) -> u8 {
        if self.addr.is_ipv4() { 32 } else { 128 }
    }

    fn mask(&self) -> u128 {
        let host = self.width() - self.prefix;
        let all = if self.width() == 32 { u32::MAX as u128 } else { u128::MAX };
        if host >= 128 { 0 } else { all & !((1u128 << host) - 1) }
    }

    fn network_bits(&self) -> u128 {
        self.bits() & self.mask()
    }

    fn network(&self) -> String {
        let n = self.network_bits();
        let ip: IpAddr = match self.addr {
            IpAddr::V4(_) => IpAddr::V4((n as u32).into()),
            IpAddr::V6(_) => IpAddr::V6(n.into()),
        };
        format!("{ip}/{}", self.prefix)
    }

    /// The `n`th address of the network (0 = the network address): the cluster DNS service is the 10th of the
    /// first service network. `None` when the network is smaller than that.
    pub fn nth(&self, n: u128) -> Option<IpAddr> {
        let host_bits = self.width() - self.prefix;
        if host_bits < 128 && n >= (1u128 << host_bits) {
            return None;
        }
        let v = self.network_bits() + n;
        Some(match self.addr {
            IpAddr::V4(_) => IpAddr::V4((v as u32).into()),
            IpAddr::V6(_) => IpAddr::V6(v.into()),
        })
    }

    /// Whether two networks share any address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() {
            return false;
        }
        let shorter = if self.prefix <= other.prefix { self } else { other };
        (self.bits() & shorter.mask()) == (other.bits() & shorter.mask())
    }

    /// Class E (240.0.0.0/4): Windows nodes cannot use these addresses.
    pub fn is_class_e(&self) -> bool {
        let class_e = Cidr { addr: IpAddr::V4([240, 0, 0, 0].into()), prefix: 4 };
        self.overlaps(&class_e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert!(Cidr::parse("10.128.0.0/14").is_ok());
        assert!(Cidr::parse("fd00::/48").is_ok());
        assert!(Cidr::parse("10.128.0.1/14").unwrap_err().contains("10.128.0.0/14"));
        assert!(Cidr::parse("10.0.0.0").is_err());
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("banana/8").is_err());
    }

    #[test]
    fn nth_address() {
        assert_eq!(Cidr::parse("172.30.0.0/16").unwrap().nth(10).unwrap().to_string(), "172.30.0.10");
        assert_eq!(Cidr::parse("fd02::/112").unwrap().nth(10).unwrap().to_string(), "fd02::a");
        assert_eq!(Cidr::parse("10.0.0.0/29").unwrap().nth(10), None);
    }

    #[test]
    fn overlap_and_class_e() {
        let a = Cidr::parse("10.128.0.0/14").unwrap();
        assert!(a.overlaps(&Cidr::parse("10.130.0.0/16").unwrap()));
        assert!(!a.overlaps(&Cidr::parse("10.132.0.0/14").unwrap()));
        assert!(Cidr::parse("240.0.0.0/14").unwrap().is_class_e());
        assert!(Cidr::parse("224.0.0.0/3").unwrap().is_class_e());
        assert!(!a.is_class_e());
        assert!(Cidr::parse("0.0.0.0/0").unwrap().overlaps(&a));
    }
}
