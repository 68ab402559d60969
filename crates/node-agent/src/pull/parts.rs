//! Parts of programs a payload pull left on the node: `<path>.wmrender-pulling.wmrender-tmp`, kept when a pull is
//! cut off so the next takes the program up where it ended. A part is worth its disk (a kubelet is 120 MB) only
//! while the Node names the payload it belongs to, so the pull records each program in `pulled.json` before it
//! fetches it, and removes the parts no longer wanted: when the Node names a payload that does not stage that
//! program, one refused as a whole, the payload the node runs, or none; deconfigure removes them all. Only files
//! with the pull's own suffix are ever removed: no one else writes them. A program refused while it is fetched
//! takes its part and its record with it (an empty record is no file), so such a refusal leaves `pulled.json` as
//! it was; a record that cannot be read is never written over (it holds the rollback floors).

use super::PulledState;
use crate::system::Files;
use std::collections::BTreeSet;
use wmrender_contract::{NodePath, PULLING_SUFFIX};

/// Removes the parts recorded of programs other than `wanted` (the programs this pull stages; paths compared
/// without case, as Windows does). A part that cannot be removed stays recorded, for the next pull.
pub fn forget_except(sys: &dyn Files, wanted: &BTreeSet<String>) -> Result<(), String> {
    let record = PulledState::load_strict(sys)?;
    let unwanted: Vec<&str> = record
        .payload_parts
        .iter()
        .filter(|p| !wanted.iter().any(|w| w.eq_ignore_ascii_case(p)))
        .map(String::as_str)
        .collect();
    forget(sys, &unwanted)
}

/// Removes every part recorded: the Node names no payload, the payload on the node, or one refused as a whole, so
/// no program is wanted.
pub fn forget_all(sys: &dyn Files) -> Result<(), String> {
    forget_except(sys, &BTreeSet::new())
}

/// Records `program` before it is fetched: a part of it may stay on the node.
pub fn record(sys: &dyn Files, program: &str) -> Result<(), String> {
    let mut record = PulledState::load_strict(sys)?;
    if record.payload_parts.iter().any(|p| p.eq_ignore_ascii_case(program)) {
        return Ok(());
    }
    record.payload_parts.insert(program.to_string());
    record.save(sys)
}

/// Removes the parts of `programs` (refused, or no longer wanted) and their record; the record is written only
/// when it changes.
pub fn forget(sys: &dyn Files, programs: &[&str]) -> Result<(), String> {
    let left = remove(sys, programs.iter().copied());
    let mut record = PulledState::load_strict(sys)?;
    let before = record.payload_parts.len();
    record.payload_parts.retain(|p| {
        !programs.iter().any(|f| f.eq_ignore_ascii_case(p)) || left.iter().any(|(l, _)| l.eq_ignore_ascii_case(p))
    });
    if record.payload_parts.len() == before { Ok(()) } else { record.save(sys) }
}

/// Removes every part recorded (deconfigure; `pulled.json` goes next): the errors of those that cannot be.
pub fn remove_all(sys: &dyn Files) -> Vec<String> {
    // A record that cannot be read names no part (deconfigure removes it with the rest).
    let record = PulledState::load_strict(sys).unwrap_or_default();
    remove(sys, record.payload_parts.iter().map(String::as_str)).into_iter().map(|(_, why)| why).collect()
}

/// Removes the parts of `programs`: those that could not be, each with why.
fn remove<'a>(sys: &dyn Files, programs: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut left = Vec::new();
    for program in programs {
        // The record is a file on the node: a path that is not one names no part.
        let Some(part) = NodePath::parse(program).ok().and_then(|p| p.with_suffix(PULLING_SUFFIX).ok()) else {
            continue;
        };
        if let Err(why) = sys.remove_if_there(&part) {
            left.push((program.to_string(), why));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::Folder;
    use wmrender_contract::paths;

    fn part(f: &Folder, program: &str) -> std::path::PathBuf {
        f.local(&NodePath::known(program).with_suffix(PULLING_SUFFIX).unwrap())
    }

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    fn node() -> (tempfile::TempDir, Folder) {
        let dir = tempfile::tempdir().unwrap();
        let f = Folder(dir.path().to_path_buf());
        std::fs::create_dir_all(f.local(&NodePath::known(r"C:\k\wmrender"))).unwrap();
        (dir, f)
    }

    /// Records `program` and leaves a part of it, as a pull cut off does.
    fn cut_off(f: &Folder, program: &str) {
        record(f, program).unwrap();
        std::fs::create_dir_all(part(f, program).parent().unwrap()).unwrap();
        std::fs::write(part(f, program), "MZ part").unwrap();
    }

    #[test]
    fn a_part_is_kept_while_wanted_and_removed_once_not_or_at_deconfigure() {
        let (_dir, f) = node();
        let (kubelet, containerd) = (r"C:\k\kubelet.exe", r"C:\k\containerd\containerd.exe");
        cut_off(&f, kubelet);
        cut_off(&f, containerd);
        assert_eq!(PulledState::load(&f).payload_parts, set(&[kubelet, containerd]));
        // The record keeps the rest of pulled.json as it was.
        let mut record = PulledState::load(&f);
        record.reference = "registry.test/bundle@sha256:1".into();
        record.save(&f).unwrap();

        // The next payload stages kubelet only (spelt otherwise: Windows' paths have no case): containerd's part
        // goes.
        forget_except(&f, &set(&[r"C:\k\KUBELET.exe"])).unwrap();
        assert!(part(&f, kubelet).exists() && !part(&f, containerd).exists());
        let record = PulledState::load(&f);
        assert_eq!(
            (record.payload_parts, record.reference.as_str()),
            (set(&[kubelet]), "registry.test/bundle@sha256:1")
        );

        // A path that is not a node path (the record was changed on the node) names nothing; the file a part
        // would name without the suffix is never touched.
        std::fs::write(f.local(&NodePath::known(kubelet)), "MZ running").unwrap();
        let mut record = PulledState::load(&f);
        record.payload_parts.insert(r"C:\k\..\..\etc".into());
        record.save(&f).unwrap();
        assert!(remove_all(&f).is_empty());
        assert!(!part(&f, kubelet).exists());
        assert_eq!(std::fs::read(f.local(&NodePath::known(kubelet))).unwrap(), b"MZ running");

        // Nothing wanted (the payload is on the node, or the Node names none): nothing recorded.
        forget_all(&f).unwrap();
        assert!(PulledState::load(&f).payload_parts.is_empty());
    }

    #[test]
    fn a_refused_program_leaves_the_record_as_it_was_and_one_not_reached_keeps_its_part() {
        let (_dir, f) = node();
        let state = f.local(&NodePath::known(paths::PULLED_STATE));
        // A node that never pulled: its first pull, refused, writes no pulled.json.
        record(&f, r"C:\k\a.exe").unwrap();
        std::fs::write(part(&f, r"C:\k\a.exe"), "MZ half").unwrap();
        forget(&f, &[r"C:\k\a.exe"]).unwrap();
        assert!(!part(&f, r"C:\k\a.exe").exists() && !state.exists());
        // A part of b from an earlier pull cut off: a refused before b was reached leaves b's part and the record
        // byte for byte.
        cut_off(&f, r"C:\k\b.exe");
        let before = std::fs::read(&state).unwrap();
        record(&f, r"C:\k\a.exe").unwrap();
        forget(&f, &[r"C:\k\a.exe"]).unwrap();
        assert_eq!(std::fs::read(&state).unwrap(), before);
        assert!(part(&f, r"C:\k\b.exe").exists());
    }

    #[test]
    fn a_record_that_cannot_be_read_is_never_written_over() {
        let (_dir, f) = node();
        let state = f.local(&NodePath::known(paths::PULLED_STATE));
        std::fs::write(&state, "{ not json").unwrap();
        for e in [record(&f, r"C:\k\a.exe"), forget(&f, &[r"C:\k\a.exe"]), forget_all(&f)] {
            assert!(e.is_err_and(|why| why.contains("not a pull record")));
        }
        assert_eq!(std::fs::read(&state).unwrap(), b"{ not json");
        assert!(remove_all(&f).is_empty());
    }

    #[test]
    fn a_part_that_cannot_be_removed_stays_recorded() {
        let (_dir, f) = node();
        let kubelet = r"C:\k\kubelet.exe";
        record(&f, kubelet).unwrap();
        // A folder where the part would be: remove_file fails on it.
        std::fs::create_dir_all(part(&f, kubelet)).unwrap();
        forget_all(&f).unwrap();
        forget(&f, &[kubelet]).unwrap();
        assert_eq!(PulledState::load(&f).payload_parts, set(&[kubelet]));
        let errors = remove_all(&f);
        assert!(errors.len() == 1 && errors[0].contains("cannot remove"), "{errors:?}");
    }
}
