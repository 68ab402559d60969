//! `C:\k\wmrender\node.json`: what the agent does on a node besides the services: folders, machine-level
//! environment variables, how the node's name is found, and the steps only PowerShell can do (rendered scripts
//! the agent runs and checks by their result line).

use crate::path::NodePath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSettings {
    /// `aws`, `azure`, `gcp`, `nutanix`, `vsphere` or `none`: for messages.
    pub platform: String,
    pub node_name: NodeNameSource,
    /// Folders the services need.
    pub directories: Vec<NodePath>,
    /// Machine-level environment variables (the cluster proxy). An empty value means the variable must not be
    /// set; services see a change only after a reboot, which the agent reports.
    pub environment: BTreeMap<String, String>,
    pub steps: Vec<Step>,
    /// Where the platform names a Machine's host after the Machine (vSphere, Nutanix: WMCO renames the host so that
    /// its Node matches its Machine): the step that renames the host to the Machine's name, which sync delivers for
    /// a Machine's instance ([`crate::machine::NodeMachine`]). Its argument `MACHINE_NAME` is that name; it runs
    /// before every other step, and its reboot holds everything else back, as the Containers feature's does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_to_machine: Option<String>,
    /// Files other programs leave behind as they rotate them (hybrid-overlay's client certificates): only the
    /// newest are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rotated_files: Vec<RotatedFiles>,
    /// The public keys (PEM, ECDSA P-256, cosign's) whose signatures the agent accepts on a bundle it pulls
    /// (`bundleSigning.publicKeys` of the inputs). Two during a rotation; none: the node pulls nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundle_keys: Vec<String>,
}

/// The placeholder of the Machine's name in the arguments of the [`NodeSettings::rename_to_machine`] step.
pub const MACHINE_NAME: &str = "MACHINE_NAME";

/// Files in one folder whose names match `<prefix>*<suffix>`, of which the agent keeps the `keep` newest (by
/// modification time, then by name) and removes the others; a name in `keepAlways` is never removed (the pointer
/// to the one in use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RotatedFiles {
    pub directory: NodePath,
    pub prefix: String,
    pub suffix: String,
    pub keep: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_always: Vec<String>,
}

impl RotatedFiles {
    /// Whether a file name is one of these rotated files (and not one always kept).
    pub fn matches(&self, name: &str) -> bool {
        name.len() >= self.prefix.len() + self.suffix.len()
            && name.starts_with(&self.prefix)
            && name.ends_with(&self.suffix)
            && !self.keep_always.iter().any(|k| k == name)
    }
}

/// How the agent finds the node's name (WMCO's rule per platform, lower case as kubelet registers it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum NodeNameSource {
    /// The DNS host name (Azure, Nutanix, BYOH): what kubelet registers without an override. Not the 15-character
    /// NetBIOS computer name.
    DnsHostName,
    /// Host name and primary DNS suffix (vSphere), passed to kubelet as `--hostname-override`.
    DnsFullyQualified,
    /// A rendered step prints the name (AWS metadata, GCP's script), passed as `--hostname-override`.
    Step { step: String },
}

impl NodeNameSource {
    /// Whether kubelet gets `--hostname-override` (the platform names the node, not Windows).
    pub fn overrides_hostname(&self) -> bool {
        !matches!(self, NodeNameSource::DnsHostName)
    }
}

/// The on-demand step `wmrender-node deconfigure` runs to remove the HNS networks (after the services stopped).
pub const REMOVE_HNS_NETWORKS_STEP: &str = "remove-hns-networks";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum When {
    /// Until it succeeds once for this script's content (Containers feature, Defender, firewall).
    Once,
    /// Once after every boot (routes Windows forgets).
    EveryBoot,
    /// On every pass, as WICD's reconcile does: settings someone else may undo while the node runs (the Defender
    /// exclusion).
    EveryPass,
    /// Whenever the agent needs its value or its effect: node name look-ups and pre-start steps.
    OnDemand,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub name: String,
    pub script: NodePath,
    /// Literal arguments; `NODE_NAME`-style placeholders of [`crate::services::NodeVariable`] are replaced.
    pub args: Vec<String>,
    pub when: When,
}

/// The last line a step script prints: one JSON object. The agent trusts this, not the exit code alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepOutput {
    pub ok: bool,
    /// The step did what it should, and Windows must restart for it to take effect.
    #[serde(default)]
    pub reboot_required: bool,
    /// Not done yet and not an error: the cluster or Windows must do something first (say what).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A value the step looked up (a host name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl StepOutput {
    /// The last line of `stdout` that is a JSON object, if any.
    pub fn from_stdout(stdout: &str) -> Option<StepOutput> {
        stdout.lines().rev().find_map(|l| serde_json::from_str::<StepOutput>(l.trim()).ok())
    }
}

impl NodeSettings {
    pub fn parse(bytes: &[u8]) -> Result<NodeSettings, String> {
        let s: NodeSettings = serde_json::from_slice(bytes).map_err(|e| format!("node.json does not parse: {e}"))?;
        for name in s.environment.keys() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("node.json: `{name}` is not an environment variable name"));
            }
        }
        for v in s.environment.values() {
            if v.contains('\0') {
                return Err("node.json: an environment value holds a NUL character".into());
            }
        }
        // The agent runs these scripts: only files sync delivers, below C:\k.
        for step in &s.steps {
            crate::NodePath::parse_delivered(step.script.as_str())
                .map_err(|e| format!("node.json: step `{}`: {e}", step.name))?;
        }
        if let NodeNameSource::Step { step } = &s.node_name
            && s.step(step).is_none()
        {
            return Err(format!("node.json: the node name comes from step `{step}`, which is not listed"));
        }
        if let Some(step) = &s.rename_to_machine
            && s.step(step).is_none_or(|st| st.when != When::OnDemand)
        {
            return Err(format!("node.json: the host is renamed by step `{step}`, which is not an on-demand step"));
        }
        for r in &s.rotated_files {
            if r.keep == 0 || r.prefix.is_empty() || [&r.prefix, &r.suffix].iter().any(|p| p.contains(['\\', '/', '*']))
            {
                return Err(format!(
                    "node.json: rotated files in {}: expected a file name prefix and suffix (no `\\`, `/` or `*`) and \
                     `keep` of at least 1",
                    r.directory
                ));
            }
        }
        Ok(s)
    }

    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }

    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_scripts_must_be_delivered_files() {
        let text = r#"{"platform":"none","nodeName":{"from":"dns-host-name"},"directories":[],"environment":{},
            "steps":[{"name":"x","script":"C:\\Windows\\evil.ps1","args":[],"when":"once"}]}"#;
        let e = NodeSettings::parse(text.as_bytes()).unwrap_err();
        assert!(e.contains("step `x`") && e.contains("outside"), "{e}");
    }

    #[test]
    fn rotated_files_match_by_prefix_and_suffix_and_spare_what_is_always_kept() {
        let r = RotatedFiles {
            directory: NodePath::known(r"C:\k\cni\config"),
            prefix: "ovnkube-client-".into(),
            suffix: ".pem".into(),
            keep: 2,
            keep_always: vec!["ovnkube-client-current.pem".into()],
        };
        assert!(r.matches("ovnkube-client-2026-11-05-10-04-59.pem"));
        for other in ["ovnkube-client-current.pem", "cni.conf", "ovnkube-client-.pe", "x-ovnkube-client-1.pem"] {
            assert!(!r.matches(other), "{other}");
        }
    }

    #[test]
    fn step_output_is_the_last_json_line() {
        let out = "noise\n{\"ok\":true,\"value\":\"ip-10-0-0-1.ec2.internal\"}\n";
        assert_eq!(StepOutput::from_stdout(out).unwrap().value.as_deref(), Some("ip-10-0-0-1.ec2.internal"));
        assert_eq!(StepOutput::from_stdout("nothing"), None);
        assert_eq!(StepOutput::from_stdout("[1]\n"), None);
    }
}
