//! Kubernetes quantities (`16Gi`, `2G`, `0`) for sizes, in the canonical form the API server stores.
//!
//! The API server re-serialises every `resource.Quantity` it stores (k8s.io/apimachinery `Quantity.String`), so a
//! MachineSet rendered with any other spelling (`0Gi`, `1024Pi`, `16384Mi`) differs from what Argo CD reads back:
//! a permanent diff. The rules, for the whole numbers wmrender accepts:
//! - a binary suffix (`Ki` … `Ei`) keeps a binary suffix: the largest one that divides the value exactly
//!   (`16384Mi` → `16Gi`, `1024Pi` → `1Ei`, `1536Mi` stays);
//! - a value below 1024 bytes written with a binary suffix becomes decimal: `0Gi` → `0`;
//! - no suffix or a decimal one (`k`, `M`, `G`, `T`, `P`, `E`) keeps a decimal suffix, the largest power of 1000
//!   that divides the value exactly (`2000M` → `2G`, `1500M` stays, `1000` → `1k`).
//!
//! Fractions, exponents and negative sizes are refused: no size wmrender renders needs them.

const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const DECIMAL: [&str; 6] = ["k", "M", "G", "T", "P", "E"];

/// A size as the API server keeps it: a whole number of bytes (at most 2^63 - 1, its int64) and whether it was
/// written with a binary suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    bytes: u64,
    binary: bool,
}

impl Quantity {
    /// Reads `16Gi`, `4096Mi`, `2G` or `17179869184`; says what is wrong otherwise.
    pub fn parse(s: &str) -> Result<Quantity, String> {
        let (digits, suffix) = split_whole(s, "1.5Gi is 1536Mi")?;
        let (base, power, binary): (u128, usize, bool) = if suffix.is_empty() {
            (1000, 0, false)
        } else if let Some(i) = BINARY.iter().position(|u| *u == suffix) {
            (1024, i + 1, true)
        } else if let Some(i) = DECIMAL.iter().position(|u| *u == suffix) {
            (1000, i + 1, false)
        } else {
            return Err(format!("`{suffix}` is not a size suffix"));
        };
        let too_large = || "it is larger than a quantity can hold (2^63 - 1 bytes)".to_string();
        let n: u128 = digits.parse().map_err(|_| too_large())?;
        let bytes = (0..power).try_fold(n, |v, _| v.checked_mul(base)).ok_or_else(too_large)?;
        let bytes = u64::try_from(bytes).ok().filter(|b| *b <= i64::MAX as u64).ok_or_else(too_large)?;
        Ok(Quantity { bytes, binary })
    }

    pub fn from_bytes(bytes: u64, binary: bool) -> Quantity {
        Quantity { bytes: bytes.min(i64::MAX as u64), binary }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The spelling the API server stores.
    pub fn canonical(&self) -> String {
        let (base, units) = if self.binary && self.bytes >= 1024 { (1024, BINARY) } else { (1000, DECIMAL) };
        let (mut n, mut power) = (self.bytes, 0);
        while n != 0 && n.is_multiple_of(base) && power < units.len() {
            n /= base;
            power += 1;
        }
        match power {
            0 => n.to_string(),
            p => format!("{n}{}", units[p - 1]),
        }
    }
}

/// `s` split into its leading whole number and what follows (`16Gi` → `16`, `Gi`), refused when it starts with
/// no digit or the number goes on as a fraction; `fraction_hint` shows the smaller unit to write instead
/// (`1.5Gi is 1536Mi`). Durations ([`crate::duration`]) are written the same way and split here too.
pub fn split_whole<'a>(s: &'a str, fraction_hint: &str) -> Result<(&'a str, &'a str), String> {
    let digits_end = s.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err("it does not start with a whole number".into());
    }
    if rest.starts_with('.') {
        return Err(format!("fractions are not accepted; use a smaller unit ({fraction_hint})"));
    }
    Ok((digits, rest))
}

/// The canonical spelling of a size, or `None` if it is not one (`16GB`, `1.5Gi`, `-1Gi`).
pub fn canonical(s: &str) -> Option<String> {
    Quantity::parse(s).ok().map(|q| q.canonical())
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn canonical_forms() {
        assert_eq!(canonical("16384Mi").as_deref(), Some("16Gi"));
        assert_eq!(canonical("120Gi").as_deref(), Some("120Gi"));
        assert_eq!(canonical("1536Mi").as_deref(), Some("1536Mi"));
        assert_eq!(canonical("0Gi").as_deref(), Some("0"));
        assert_eq!(canonical("1024Pi").as_deref(), Some("1Ei"));
        assert_eq!(canonical("1Ki").as_deref(), Some("1Ki"));
        assert_eq!(canonical("2000M").as_deref(), Some("2G"));
        assert_eq!(canonical("1500M").as_deref(), Some("1500M"));
        assert_eq!(canonical("1000").as_deref(), Some("1k"));
        assert_eq!(canonical("17179869184").as_deref(), Some("17179869184"));
        assert_eq!(canonical("8Ei"), None);
        assert_eq!(canonical("16GB"), None);
        assert_eq!(canonical("1.5Gi"), None);
        assert_eq!(canonical("-1Gi"), None);
        assert_eq!(canonical("Gi"), None);
    }
}
