//! Parts of programs a payload pull left on the node: `<path>.wmrender-pulling.wmrender-tmp`, kept when a pull is
//! cut off so the next takes the program up where it ended. A part is worth its disk (a kubelet is 120 MB) only
//! while the Node names the payload it belongs to, so the pull records, in `pulled.json` and before it fetches,
//! the programs it may leave a part of; the next pull removes the parts no longer wanted (the Node names another
//! payload that does not stage that program, the payload it names is on the node, or it names none), and
//! deconfigure removes them all. Only files with the pull's own suffix are ever removed: no one else writes them.

use super::PulledState;
use crate::system::Files;
use std::collections::BTreeSet;
use wmrender_contract::{NodePath, PULLING_SUFFIX};

/// Keeps the parts of `wanted` (the programs this pull stages) and removes the others recorded; then records
/// `wanted`, before any of them is fetched. A part that cannot be removed stays recorded, for the next pull.
pub fn keep_only(sys: &dyn Files, wanted: &BTreeSet<String>) -> Result<(), String> {
    let mut record = PulledState::load(sys);
    if record.payload_parts == *wanted {
        return Ok(());
    }
    let left = remove(sys, record.payload_parts.iter().filter(|p| !wanted.contains(*p)));
    record.payload_parts = wanted.iter().cloned().chain(left.into_iter().map(|(program, _)| program)).collect();
    record.save(sys)
}

/// Removes every part recorded (deconfigure; `pulled.json` goes next): the errors of those that cannot be.
pub fn remove_all(sys: &dyn Files) -> Vec<String> {
    let record = PulledState::load(sys);
    remove(sys, record.payload_parts.iter()).into_iter().map(|(_, why)| why).collect()
}

/// Removes the parts of `programs`: those that could not be, each with why.
fn remove<'a>(sys: &dyn Files, programs: impl Iterator<Item = &'a String>) -> Vec<(String, String)> {
    let mut left = Vec::new();
    for program in programs {
        // The record is a file on the node: a path that is not one names no part.
        let Some(part) = NodePath::parse(program).ok().and_then(|p| p.with_suffix(PULLING_SUFFIX).ok()) else {
            continue;
        };
        if let Err(e) = std::fs::remove_file(sys.local(&part))
            && e.kind() != std::io::ErrorKind::NotFound
        {
            left.push((program.clone(), format!("cannot remove {part}: {e}")));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::Folder;

    fn part(f: &Folder, program: &str) -> std::path::PathBuf {
        f.local(&NodePath::known(program).with_suffix(PULLING_SUFFIX).unwrap())
    }

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_part_is_kept_while_wanted_and_removed_once_not_or_at_deconfigure() {
        let dir = tempfile::tempdir().unwrap();
        let f = Folder(dir.path().to_path_buf());
        std::fs::create_dir_all(f.local(&NodePath::known(r"C:\k\wmrender"))).unwrap();
        let (kubelet, containerd) = (r"C:\k\kubelet.exe", r"C:\k\containerd\containerd.exe");
        keep_only(&f, &set(&[kubelet, containerd])).unwrap();
        assert_eq!(PulledState::load(&f).payload_parts, set(&[kubelet, containerd]));
        for p in [kubelet, containerd] {
            std::fs::create_dir_all(part(&f, p).parent().unwrap()).unwrap();
            std::fs::write(part(&f, p), "MZ part").unwrap();
        }
        // The record keeps the rest of pulled.json as it was.
        let mut record = PulledState::load(&f);
        record.reference = "registry.test/bundle@sha256:1".into();
        record.save(&f).unwrap();

        // The next payload stages kubelet only: containerd's part goes.
        keep_only(&f, &set(&[kubelet])).unwrap();
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
        keep_only(&f, &BTreeSet::new()).unwrap();
        assert!(PulledState::load(&f).payload_parts.is_empty());
    }

    #[test]
    fn a_part_that_cannot_be_removed_stays_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let f = Folder(dir.path().to_path_buf());
        std::fs::create_dir_all(f.local(&NodePath::known(r"C:\k\wmrender"))).unwrap();
        let kubelet = r"C:\k\kubelet.exe";
        keep_only(&f, &set(&[kubelet])).unwrap();
        // A folder where the part would be: remove_file fails on it.
        std::fs::create_dir_all(part(&f, kubelet)).unwrap();
        keep_only(&f, &BTreeSet::new()).unwrap();
        assert_eq!(PulledState::load(&f).payload_parts, set(&[kubelet]));
        let errors = remove_all(&f);
        assert!(errors.len() == 1 && errors[0].contains("cannot remove"), "{errors:?}");
    }
}
