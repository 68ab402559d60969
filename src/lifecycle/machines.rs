//! The Windows Machines as targets, by WMCO's rule: a Machine is configured once the Machine API has `Provisioned`
//! it (an instance with an address), never waiting for `status.nodeRef` — the Node appears only after wmrender
//! installed kubelet. Its instance is reached at the Machine's address (WMCO's choice: the first IPv4 InternalIP,
//! else the first InternalDNS) as WMCO's user for the platform. Machine data is untrusted: the name, address and user
//! are checked by the inventory's rules, and a Machine that fails them is refused (never contacted, and reported).

use crate::cluster::machines::{Machine, WindowsMachines};
use crate::delivery::inventory::{self, Node};
use serde::Serialize;

/// A host wmrender does not contact (yet): a Machine not provisioned far enough (`refused: false`), or one holding a
/// value wmrender will not use, or a target whose identity conflicts with another's (`refused: true`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The target's name: its Machine's, the BYOH host's address, the inventory's name.
    pub target: String,
    /// Its Machine, for a Machine-backed host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    pub refused: bool,
    pub why: String,
}

/// What a Windows Machine is to wmrender.
pub enum Candidate {
    /// Provisioned, with an address: its instance, reached as WMCO's user for the platform (`None`: the platform
    /// has none wmrender knows, so only an inventory entry for its address can say how to log in).
    Ready {
        node: Node,
        user_known: bool,
    },
    Skip(Refusal),
}

/// The SSH user WMCO logs in with on a Machine of this platform (`status.platformStatus.type` of the
/// Infrastructure), `None` for a platform without Windows MachineSets.
pub fn user_for(platform: &str) -> Option<&'static str> {
    match platform {
        "Azure" => Some("capi"),
        "AWS" | "GCP" | "Nutanix" | "VSphere" => Some("Administrator"),
        _ => None,
    }
}

/// Each Windows Machine as a candidate, in list order.
pub fn candidates(found: &WindowsMachines) -> Vec<Candidate> {
    let user = user_for(&found.platform);
    found.machines.iter().map(|m| candidate(m, user)).collect()
}

fn candidate(m: &Machine, user: Option<&str>) -> Candidate {
    let shown = m.name.escape_debug().to_string();
    let skip = |refused: bool, why: String| {
        Candidate::Skip(Refusal { target: shown.clone(), machine: Some(shown.clone()), refused, why })
    };
    if let Some(why) = m.waiting_for() {
        return skip(false, why);
    }
    let address = m.ssh_address().unwrap_or_default();
    // An unknown platform's user is checked once an inventory entry names one; the placeholder passes the rules.
    match inventory::machine_node(&m.name, address, user.unwrap_or("Administrator")) {
        Ok(node) => Candidate::Ready { node, user_known: user.is_some() },
        Err(refused) => skip(true, refused.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::machines::test_machine as machine;
    use serde_json::json;

    #[test]
    fn provisioned_machines_are_candidates_the_others_wait_or_are_refused() {
        let ip = |a: &str| json!([{"type": "InternalIP", "address": a}]);
        let found = WindowsMachines {
            platform: "Azure".into(),
            machines: vec![
                machine("m-ok", Some("Provisioned"), ip("10.0.0.5")),
                machine("m-new", Some("Provisioning"), json!([])),
                machine("m-noaddr", Some("Provisioned"), json!([])),
                machine("m-evil", Some("Provisioned"), ip("-oProxyCommand=x")),
                machine("m;evil", Some("Running"), ip("10.0.0.6")),
            ],
        };
        let all = candidates(&found);
        let Candidate::Ready { node, user_known } = &all[0] else { panic!("m-ok is ready") };
        assert_eq!((node.name.as_str(), node.user.as_str(), node.machine.as_deref()), ("m-ok", "capi", Some("m-ok")));
        assert!(*user_known);
        let states: Vec<(&str, bool)> = all[1..]
            .iter()
            .map(|c| match c {
                Candidate::Skip(s) => (s.target.as_str(), s.refused),
                Candidate::Ready { .. } => ("ready", false),
            })
            .collect();
        assert_eq!(states, [("m-new", false), ("m-noaddr", false), ("m-evil", true), ("m;evil", true)]);
    }

    #[test]
    fn a_platform_without_windows_machinesets_has_no_user() {
        assert_eq!(user_for("VSphere"), Some("Administrator"));
        assert_eq!(user_for("BareMetal"), None);
        assert_eq!(user_for(""), None);
    }
}
