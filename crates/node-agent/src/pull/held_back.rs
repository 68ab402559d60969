//! Programs a registry served wrong (content that does not match the digest the signed payload names), held back
//! for a while: a payload is asked for again at every pass, and without this a program changed at rest in the
//! registry would be downloaded whole at each (a 100 MB kubelet every two minutes). The refusal is said again with
//! its first message, so the Node's condition is not rewritten; the program is asked for again once its pause is
//! over (10 minutes, doubling up to 2 hours while it stays wrong), and at once by an agent that restarted. Only the
//! programs: a bundle's files are a few KB, and its signatures are asked for at every pass, so a payload signed
//! after it was refused is taken at the next.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The first pause before a program served wrong is asked for again; it doubles up to [`PAUSE_MAX`].
pub const PAUSE_FIRST: Duration = Duration::from_secs(600);
pub const PAUSE_MAX: Duration = Duration::from_secs(7200);

/// The programs held back, by digest with the repository and hosts asked (a key the pull makes): another
/// repository or another hosts.toml asks again at once.
#[derive(Debug, Default)]
pub struct HeldBack {
    programs: BTreeMap<String, Held>,
}

#[derive(Debug)]
struct Held {
    /// The refusal as it was first said.
    message: String,
    /// Not asked for again before this.
    until: Instant,
    /// How many times in a row it was served wrong.
    times: u32,
}

impl HeldBack {
    /// The refusal of `digest`, while its pause lasts at `now`.
    pub fn refusal(&self, digest: &str, now: Instant) -> Option<&str> {
        self.programs.get(digest).filter(|h| now < h.until).map(|h| h.message.as_str())
    }

    /// `digest` was served wrong at `now`, refused with `message`: held back for its next pause.
    pub fn served_wrong(&mut self, digest: &str, message: &str, now: Instant) {
        let times = self.programs.get(digest).map_or(1, |h| h.times.saturating_add(1));
        let pause = PAUSE_FIRST.saturating_mul(1 << (times - 1).min(8)).min(PAUSE_MAX);
        let message = self.programs.get(digest).map_or(message, |h| h.message.as_str()).to_string();
        self.programs.insert(digest.to_string(), Held { message, until: now + pause, times });
    }

    /// `digest` was served as its digest says: forgotten.
    pub fn served_right(&mut self, digest: &str) {
        self.programs.remove(digest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_served_wrong_is_held_back_with_its_first_refusal_for_a_pause_that_doubles_to_the_cap() {
        let t0 = Instant::now();
        let mut held = HeldBack::default();
        assert_eq!(held.refusal("sha256:aa", t0), None);
        held.served_wrong("sha256:aa", "kubelet.exe: other content", t0);
        assert_eq!(
            held.refusal("sha256:aa", t0 + PAUSE_FIRST - Duration::from_secs(1)),
            Some("kubelet.exe: other content")
        );
        assert_eq!(held.refusal("sha256:bb", t0), None, "only that program");
        // Asked again after the pause, served wrong again (with another message): held back twice as long, said
        // as before.
        let t1 = t0 + PAUSE_FIRST;
        assert_eq!(held.refusal("sha256:aa", t1), None);
        held.served_wrong("sha256:aa", "kubelet.exe: more than its size", t1);
        assert_eq!(
            held.refusal("sha256:aa", t1 + PAUSE_FIRST * 2 - Duration::from_secs(1)),
            Some("kubelet.exe: other content")
        );
        assert_eq!(held.refusal("sha256:aa", t1 + PAUSE_FIRST * 2), None);
        let mut t = t1;
        for _ in 0..20 {
            held.served_wrong("sha256:aa", "", t);
            t += PAUSE_MAX;
        }
        assert_eq!(held.refusal("sha256:aa", t - Duration::from_secs(1)), Some("kubelet.exe: other content"));
        assert_eq!(held.refusal("sha256:aa", t), None, "never longer than the cap");
        // Served right: forgotten.
        held.served_wrong("sha256:aa", "", t);
        held.served_right("sha256:aa");
        assert_eq!(held.refusal("sha256:aa", t), None);
    }
}
