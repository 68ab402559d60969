//! Machine-level environment variables (the cluster proxy): set exactly as node.json gives them, removed when
//! empty or no longer listed. Services see a change only after a reboot, so any change asks for one.

use crate::system::System;
use std::collections::BTreeSet;
use wmrender_contract::NodeSettings;

/// Converges the variables; returns the names changed. `managed` is the set of names the agent manages, updated.
pub fn converge(
    sys: &mut dyn System,
    settings: &NodeSettings,
    managed: &mut BTreeSet<String>,
) -> Result<Vec<String>, String> {
    let mut changed = Vec::new();
    let dropped: Vec<String> = managed.iter().filter(|n| !settings.environment.contains_key(*n)).cloned().collect();
    let wanted = settings.environment.iter().map(|(n, v)| (n.clone(), Some(v.as_str()).filter(|v| !v.is_empty())));
    for (name, value) in wanted.chain(dropped.into_iter().map(|n| (n, None))) {
        let current = sys.machine_env(&name).map_err(|e| format!("cannot read machine variable {name}: {e}"))?;
        if current.as_deref() != value {
            sys.set_machine_env(&name, value).map_err(|e| format!("cannot set machine variable {name}: {e}"))?;
            changed.push(name.clone());
        }
        if settings.environment.contains_key(&name) {
            managed.insert(name);
        } else {
            managed.remove(&name);
        }
    }
    Ok(changed)
}
