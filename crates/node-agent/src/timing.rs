//! The agent's bounded waits and intervals, with the environment variables that change them (tests shorten them;
//! a service sees machine-level variables after a reboot).

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long a service may take to stop (or to start) before the agent kills its process (or gives up).
    pub stop_timeout: Duration,
    /// How often a service's state is polled while waiting.
    pub poll: Duration,
    /// The run loop's pause between converged passes (WICD reconciles every two minutes).
    pub interval: Duration,
    /// The longest back-off of the run loop after a pending or failed pass.
    pub backoff_max: Duration,
    /// How long a pass waits for another pass (sync's apply or the service) to release the lock.
    pub lock_timeout: Duration,
    /// How long a step script may run before it is ended and counted as failed.
    pub step_timeout: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            stop_timeout: Duration::from_secs(60),
            poll: Duration::from_millis(250),
            interval: Duration::from_secs(120),
            backoff_max: Duration::from_secs(120),
            lock_timeout: Duration::from_secs(600),
            step_timeout: Duration::from_secs(600),
        }
    }
}

/// The variables, in the order they are documented.
pub const VARIABLES: [&str; 5] = [
    "WMRENDER_NODE_STOP_TIMEOUT",
    "WMRENDER_NODE_INTERVAL",
    "WMRENDER_NODE_BACKOFF_MAX",
    "WMRENDER_NODE_LOCK_TIMEOUT",
    "WMRENDER_NODE_STEP_TIMEOUT",
];

impl Timing {
    /// Defaults, changed by the `WMRENDER_NODE_*` variables of the process environment.
    pub fn from_env() -> Result<Timing, String> {
        Timing::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Timing, String> {
        let mut t = Timing::default();
        let fields: [(&str, &mut Duration); 5] = [
            (VARIABLES[0], &mut t.stop_timeout),
            (VARIABLES[1], &mut t.interval),
            (VARIABLES[2], &mut t.backoff_max),
            (VARIABLES[3], &mut t.lock_timeout),
            (VARIABLES[4], &mut t.step_timeout),
        ];
        for (name, field) in fields {
            if let Some(text) = lookup(name) {
                *field = seconds(&text).ok_or_else(|| {
                    format!("{name}={text:?}: expected a number of seconds between 0 and 86400 (e.g. 60 or 0.5)")
                })?;
            }
        }
        Ok(t)
    }
}

fn seconds(text: &str) -> Option<Duration> {
    let s: f64 = text.trim().parse().ok()?;
    (s.is_finite() && (0.0..=86_400.0).contains(&s)).then(|| Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_change_the_defaults_and_junk_is_refused() {
        let t = Timing::from_lookup(|n| (n == "WMRENDER_NODE_STOP_TIMEOUT").then(|| "0.5".to_string())).unwrap();
        assert_eq!(t.stop_timeout, Duration::from_millis(500));
        assert_eq!(t.interval, Duration::from_secs(120));
        for bad in ["-1", "x", "NaN", "1e9", ""] {
            let err = Timing::from_lookup(|n| (n == "WMRENDER_NODE_INTERVAL").then(|| bad.to_string())).unwrap_err();
            assert!(err.starts_with("WMRENDER_NODE_INTERVAL="), "{err}");
        }
    }
}
