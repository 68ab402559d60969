//! Durations as the inputs write them (`5s`, `90m`, `168h`, `7d`): a whole number and one unit. Written back in
//! Go's `time.ParseDuration` form (`168h`, `90m`, `5s`), which the node's programs read; a day is 24 hours there.

/// A whole number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration {
    seconds: u64,
}

const UNITS: [(&str, u64); 4] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)];

impl Duration {
    /// Reads `7d`, `168h`, `90m`, `5s` or `0`; says what is wrong otherwise.
    pub fn parse(s: &str) -> Result<Duration, String> {
        let (digits, unit) = crate::quantity::split_whole(s, "1.5h is 90m")?;
        let per = match unit {
            "" if digits.bytes().all(|b| b == b'0') => 1,
            "" => return Err("it has no unit (s, m, h or d)".into()),
            _ => UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, s)| *s)
                .ok_or(format!("`{unit}` is not a unit of time"))?,
        };
        let n: u64 = digits.parse().map_err(|_| "it is too long".to_string())?;
        // Go's durations end at about 292 years.
        let seconds =
            n.checked_mul(per).filter(|s| *s <= 9_000_000_000).ok_or("it is too long (more than 285 years)")?;
        Ok(Duration { seconds })
    }

    pub fn from_seconds(seconds: u64) -> Duration {
        Duration { seconds }
    }

    pub fn seconds(self) -> u64 {
        self.seconds
    }

    /// Whole days, rounded up (for the programs that count in days).
    pub fn days_rounded_up(self) -> u64 {
        self.seconds.div_ceil(86_400)
    }

    /// Go's form, in the largest unit Go knows (hours, minutes, seconds) that divides it: `168h`, `90m`, `5s`.
    pub fn go(self) -> String {
        if self.seconds == 0 {
            return "0s".into();
        }
        let (unit, per) =
            UNITS[1..].iter().find(|(_, per)| self.seconds.is_multiple_of(*per)).copied().unwrap_or(("s", 1));
        format!("{}{unit}", self.seconds / per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_with_a_unit_and_written_as_go_reads_them() {
        let go = |s: &str| Duration::parse(s).map(|d| d.go());
        assert_eq!(go("7d"), Ok("168h".into()));
        assert_eq!(go("168h"), Ok("168h".into()));
        assert_eq!(go("90m"), Ok("90m".into()));
        assert_eq!(go("120m"), Ok("2h".into()));
        assert_eq!(go("5s"), Ok("5s".into()));
        assert_eq!(go("0"), Ok("0s".into()));
        for bad in ["", "d", "5", "1.5h", "5 s", "5sec", "-5s", "99999999999999999999d", "10y"] {
            assert!(Duration::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Duration::parse("1.5h"), Err("fractions are not accepted; use a smaller unit (1.5h is 90m)".into()));
        assert_eq!(Duration::parse("h"), Err("it does not start with a whole number".into()));
        assert_eq!(Duration::parse("36h").unwrap().days_rounded_up(), 2);
        assert_eq!(Duration::parse("1s").unwrap().days_rounded_up(), 1);
    }
}
