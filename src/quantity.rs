//! Kubernetes binary quantities (`16Gi`). The Machine API re-serialises them in canonical form, so rendering the
//! canonical form (`16Gi`, not `16384Mi`) avoids a permanent GitOps diff.

const UNITS: [(&str, u32); 5] = [("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5)];

/// The canonical spelling of a binary quantity, or `None` if it is not one (`16GB`, `1.5Gi`, `-1Gi`).
pub fn canonical(s: &str) -> Option<String> {
    let (digits, power) = UNITS.iter().find_map(|(u, p)| s.strip_suffix(u).map(|d| (d, *p)))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut n: u128 = digits.parse().ok()?;
    let mut power = power;
    while n >= 1024 && n.is_multiple_of(1024) && (power as usize) < UNITS.len() {
        n /= 1024;
        power += 1;
    }
    Some(format!("{n}{}", UNITS[power as usize - 1].0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn canonical_forms() {
        assert_eq!(super::canonical("16384Mi").as_deref(), Some("16Gi"));
        assert_eq!(super::canonical("120Gi").as_deref(), Some("120Gi"));
        assert_eq!(super::canonical("1536Mi").as_deref(), Some("1536Mi"));
        assert_eq!(super::canonical("16GB"), None);
        assert_eq!(super::canonical("Gi"), None);
    }
}
