//! The agent's log, one line per pass, at `C:\var\log\wmrender-node\wmrender-node.log`, kept small: past 1 MiB
//! the file becomes `wmrender-node.log.1` (replacing the previous one) and a new one starts.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub const LOG_FILE: &str = r"C:\var\log\wmrender-node\wmrender-node.log";
pub const MAX_BYTES: u64 = 1 << 20;

/// Appends `line` with a UTC time stamp. Logging never stops the agent: errors are ignored.
pub fn append(path: &Path, line: &str) {
    let _ = append_checked(path, line, MAX_BYTES);
}

pub fn append_checked(path: &Path, line: &str, max_bytes: u64) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::metadata(path).map(|m| m.len() >= max_bytes).unwrap_or(false) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        std::fs::rename(path, old)?;
    }
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(f, "{} {}", utc_now(), line.replace(['\r', '\n'], " "))
}

/// `2026-11-05T10:04:59Z`, without a date crate.
pub fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    utc(secs)
}

fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_stamps_and_rotation() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_709_251_199), "2024-02-29T23:59:59Z");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("logs").join("a.log");
        for i in 0..20 {
            append_checked(&log, &format!("pass {i}\nsecond line"), 100).unwrap();
        }
        let now = std::fs::read_to_string(&log).unwrap();
        assert!(now.len() < 200 && now.ends_with("pass 19 second line\n"), "{now}");
        assert!(dir.path().join("logs").join("a.log.1").exists());
    }
}
