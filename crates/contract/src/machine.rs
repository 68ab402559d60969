//! `C:\k\wmrender\machine.json`: which Machine a host is the instance of, written by sync for each Machine-backed
//! node (it knows the Machine; the host does not), read by the agent where the platform names a Machine's host
//! after the Machine ([`crate::NodeSettings::rename_to_machine`]). Read from a node, it is untrusted input: the
//! name must be one Windows takes as the host's DNS name as it is.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeMachine {
    /// The Machine's name (`metadata.name`), which the host takes as its name.
    pub machine: String,
}

/// The longest DNS host name (one DNS label). Windows keeps it whole and cuts only the NetBIOS name at 15
/// characters, as it does for Nutanix Machines named after their MachineSets (`<cluster>-<id>-windows-worker-xxxxx`).
pub const HOST_NAME_MAX: usize = 63;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    #[error("machine.json does not parse: {0}")]
    Syntax(String),
    #[error(
        "machine.json names Machine {0:?}, which is not a Windows host name (letters, digits and `-`, at most 63, not only digits)"
    )]
    NotAHostName(String),
}

/// Whether Windows takes `name` as the host's DNS name unchanged: a DNS label, not all digits.
pub fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= HOST_NAME_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.bytes().all(|b| b.is_ascii_digit())
}

impl NodeMachine {
    pub fn parse(bytes: &[u8]) -> Result<NodeMachine, MachineError> {
        let m: NodeMachine = serde_json::from_slice(bytes).map_err(|e| MachineError::Syntax(e.to_string()))?;
        if !is_host_name(&m.machine) {
            let shown: String = m.machine.chars().take(80).collect();
            return Err(MachineError::NotAHostName(shown));
        }
        Ok(m)
    }

    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_name_must_be_a_host_name() {
        for ok in ["winworker-x7k2p", "ntnxlab-x2v7c-windows-worker-4hx9z"] {
            let ok = NodeMachine { machine: ok.into() };
            assert_eq!(NodeMachine::parse(&ok.to_json()), Ok(ok));
        }
        let long = "a".repeat(64);
        for bad in ["", long.as_str(), "-x", "x-", "a b", "a.b", "12345", "x&calc", "ü"] {
            let m = NodeMachine { machine: bad.into() };
            assert!(NodeMachine::parse(&m.to_json()).is_err(), "{bad:?}");
        }
        assert!(matches!(NodeMachine::parse(b"{\"machine\":\"a\",\"x\":1}"), Err(MachineError::Syntax(_))));
    }
}
