//! The Windows Machines as sync targets, by WMCO's rule: a Machine is configured once the Machine API has
//! `Provisioned` it (an instance with an address), never waiting for `status.nodeRef` — the Node appears only after
//! sync installed kubelet. Its instance is reached at the Machine's address (WMCO's choice: the first IPv4
//! InternalIP, else the first InternalDNS) as WMCO's user for the platform. Machine data is untrusted: the name,
//! address and user are checked by the inventory's rules.

use crate::cluster::machines::{Machine, WindowsMachines, user_for};
use crate::sync::inventory::{self, Node};
use serde::Serialize;

/// A Windows Machine that is not a sync target: not provisioned far enough yet (`refused: false`), or holding a
/// value wmrender will not use (`refused: true`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub machine: String,
    pub refused: bool,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct Found {
    pub nodes: Vec<Node>,
    pub skipped: Vec<Skipped>,
    /// Every Windows Machine, targets or not: a Node that is a Machine's is never pruned (the Machine API owns it).
    pub machines: Vec<Machine>,
}

/// The targets of the Windows Machines, in list order.
pub fn targets(found: WindowsMachines) -> Found {
    let user = user_for(&found.platform);
    let mut out = Found::default();
    for m in &found.machines {
        let machine = m.name.escape_debug().to_string();
        if let Some(why) = m.waiting_for() {
            out.skipped.push(Skipped { machine, refused: false, why });
            continue;
        }
        let address = m.ssh_address().unwrap_or_default();
        match inventory::machine_node(&m.name, address, user) {
            Ok(node) => out.nodes.push(node),
            Err(refused) => out.skipped.push(Skipped { machine, refused: true, why: refused.to_string() }),
        }
    }
    out.machines = found.machines;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::machines::test_machine as machine;
    use serde_json::json;

    #[test]
    fn provisioned_machines_become_targets_the_others_wait_or_are_refused() {
        let ip = |a: &str| json!([{"type": "InternalIP", "address": a}]);
        let found = targets(WindowsMachines {
            platform: "Azure".into(),
            machines: vec![
                machine("m-ok", Some("Provisioned"), ip("10.0.0.5")),
                machine("m-new", Some("Provisioning"), json!([])),
                machine("m-noaddr", Some("Provisioned"), json!([])),
                machine("m-evil", Some("Provisioned"), ip("-oProxyCommand=x")),
                machine("m;evil", Some("Running"), ip("10.0.0.6")),
            ],
        });
        assert_eq!(found.nodes.len(), 1);
        let n = &found.nodes[0];
        assert_eq!((n.name.as_str(), n.user.as_str(), n.machine.as_deref()), ("m-ok", "capi", Some("m-ok")));
        let states: Vec<(&str, bool)> = found.skipped.iter().map(|s| (s.machine.as_str(), s.refused)).collect();
        assert_eq!(states, [("m-new", false), ("m-noaddr", false), ("m-evil", true), ("m;evil", true)]);
        assert_eq!(found.machines.len(), 5);
    }
}
