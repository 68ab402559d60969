//! The services table, `C:\k\wmrender\services.json`: the Windows services a node runs, in start order, with the
//! files whose change restarts each. The renderer writes it (reviewers read it in the pull request), sync reads it
//! to plan restarts and to know which files are service binaries, and the agent converges the SCM to it.

use crate::path::NodePath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A value the agent computes on the node and substitutes into commands, as plain text (WMCO's rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeVariable {
    /// The IPv4 address of the interface that holds the default route.
    #[serde(rename = "NODE_IP")]
    NodeIp,
    /// The node's name in the cluster: the platform's host name where WMCO overrides it, else the DNS host name.
    #[serde(rename = "NODE_NAME")]
    NodeName,
    /// The platform's host name (AWS, GCP, vSphere), given to kubelet as `--hostname-override`.
    #[serde(rename = "HOSTNAME_OVERRIDE")]
    HostnameOverride,
}

impl NodeVariable {
    pub const ALL: [NodeVariable; 3] = [NodeVariable::NodeIp, NodeVariable::NodeName, NodeVariable::HostnameOverride];

    /// The placeholder as it stands in a command.
    pub fn placeholder(self) -> &'static str {
        match self {
            NodeVariable::NodeIp => "NODE_IP",
            NodeVariable::NodeName => "NODE_NAME",
            NodeVariable::HostnameOverride => "HOSTNAME_OVERRIDE",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    pub name: String,
    pub description: String,
    /// The whole command line, with [`NodeVariable`] placeholders.
    pub command: String,
    /// Services that must run first; they come earlier in the table.
    pub dependencies: Vec<String>,
    pub node_variables: Vec<NodeVariable>,
    /// Bundle files the service reads; a change to any of them restarts it.
    pub files: Vec<NodePath>,
    /// Payload files the service runs; a change stops it before the swap and starts it after.
    pub binaries: Vec<NodePath>,
    /// Credentials and CAs sync delivers for it that it reads once, at start: a change restarts it.
    pub secrets: Vec<NodePath>,
    /// Credentials and CAs sync delivers for it that it reads again by itself while it runs (kubelet's client CA
    /// file, the exporter's serving certificate): a change needs no restart. They must be there all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reloads: Vec<NodePath>,
    /// Files the cluster creates (kubelet's kubeconfig after its certificate is approved): the service waits
    /// for them, and the node is "pending" until they exist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<NodePath>,
    /// A step (by name, from node.json) that must succeed before the service starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_start: Option<String>,
    /// The node joins and works without it (monitoring, storage helpers): a problem of its own (a file missing, a
    /// start that fails) is reported and leaves every other service alone. Only optional services may depend on
    /// an optional service.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl Service {
    /// The paths whose change restarts the service: its files, binaries and the credentials it reads at start.
    pub fn restart_paths(&self) -> impl Iterator<Item = &NodePath> {
        self.files.iter().chain(&self.binaries).chain(&self.secrets)
    }

    /// Every delivered path the service needs on the node: the restart paths and the credentials it reloads.
    pub fn needed_paths(&self) -> impl Iterator<Item = &NodePath> {
        self.restart_paths().chain(&self.reloads)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicesFile {
    pub services: Vec<Service>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServicesError {
    #[error("services.json does not parse: {0}")]
    Syntax(String),
    #[error("service name `{0}` is not a Windows service name (letters, digits, `-`, `_`, `.`; at most 256)")]
    BadName(String),
    #[error("service `{0}` appears twice")]
    Duplicate(String),
    #[error("service `{0}` depends on `{1}`, which is not listed before it")]
    DependencyOrder(String, String),
    #[error("service `{0}`: {1}")]
    Path(String, crate::path::PathError),
    #[error("service `{0}`: the command is empty or has a line break")]
    BadCommand(String),
    #[error("service `{0}`: the command has `%`, which Windows expands in a service's command line (REG_EXPAND_SZ)")]
    Percent(String),
    #[error(
        "service `{0}` depends on `{1}`, which is optional: only an optional service may depend on an optional one"
    )]
    DependsOnOptional(String, String),
}

/// Service names wmrender creates: plain ASCII, so they can go into the SCM and into a command line as they are.
pub fn is_service_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 256 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl ServicesFile {
    /// Parses services.json and checks the rules the agent relies on: good names, each once, dependencies
    /// listed earlier (the table is the start order), paths below C:\k, one-line commands.
    pub fn parse(bytes: &[u8]) -> Result<ServicesFile, ServicesError> {
        let file: ServicesFile = serde_json::from_slice(bytes).map_err(|e| ServicesError::Syntax(e.to_string()))?;
        file.check()?;
        Ok(file)
    }

    pub fn check(&self) -> Result<(), ServicesError> {
        let mut seen = BTreeSet::new();
        for s in &self.services {
            if !is_service_name(&s.name) {
                return Err(ServicesError::BadName(s.name.clone()));
            }
            if s.command.trim().is_empty() || s.command.contains(['\r', '\n', '\0']) {
                return Err(ServicesError::BadCommand(s.name.clone()));
            }
            // The SCM stores the command as REG_EXPAND_SZ: `%NAME%` would not reach the service as written.
            if s.command.contains('%') {
                return Err(ServicesError::Percent(s.name.clone()));
            }
            for d in &s.dependencies {
                if !seen.contains(d.as_str()) {
                    return Err(ServicesError::DependencyOrder(s.name.clone(), d.clone()));
                }
                // A required service must never wait on one whose failure is allowed.
                if !s.optional && self.get(d).is_some_and(|dep| dep.optional) {
                    return Err(ServicesError::DependsOnOptional(s.name.clone(), d.clone()));
                }
            }
            for p in s.needed_paths().chain(&s.requires) {
                NodePath::parse_delivered(p.as_str()).map_err(|e| ServicesError::Path(s.name.clone(), e))?;
            }
            if !seen.insert(s.name.as_str()) {
                return Err(ServicesError::Duplicate(s.name.clone()));
            }
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }

    /// Every service that depends on `name`, directly or not, in table order.
    pub fn dependents(&self, name: &str) -> Vec<&Service> {
        let mut names: BTreeSet<&str> = BTreeSet::from([name]);
        let mut out = Vec::new();
        for s in &self.services {
            if s.dependencies.iter().any(|d| names.contains(d.as_str())) {
                names.insert(&s.name);
                out.push(s);
            }
        }
        out
    }

    /// The node paths of every service binary: on Windows they are staged and swapped by the agent.
    pub fn binaries(&self) -> BTreeSet<&NodePath> {
        self.services.iter().flat_map(|s| &s.binaries).collect()
    }

    /// The services a change of any of `paths` restarts (a file, binary or credential each reads at start), in
    /// table order.
    pub fn affected_by<'a>(&'a self, paths: &'a [NodePath]) -> impl Iterator<Item = &'a Service> + 'a {
        self.services.iter().filter(move |s| s.restart_paths().any(|f| paths.contains(f)))
    }

    /// Whether a change of `path` restarts a service: it is a file, binary or credential a service reads at start.
    pub fn restarts_for(&self, path: &NodePath) -> bool {
        self.services.iter().any(|s| s.restart_paths().any(|p| p == path))
    }

    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, deps: &[&str]) -> Service {
        Service {
            name: name.into(),
            description: format!("OpenShift managed {name}"),
            command: format!(r"C:\k\{name}.exe"),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            node_variables: vec![],
            files: vec![],
            binaries: vec![NodePath::known(&format!(r"C:\k\{name}.exe"))],
            secrets: vec![],
            reloads: vec![],
            requires: vec![],
            pre_start: None,
            optional: false,
        }
    }

    #[test]
    fn order_and_names_are_checked() {
        let ok = ServicesFile { services: vec![svc("a", &[]), svc("b", &["a"]), svc("c", &["b"])] };
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.dependents("a").iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        let bad = ServicesFile { services: vec![svc("b", &["a"]), svc("a", &[])] };
        assert_eq!(bad.check(), Err(ServicesError::DependencyOrder("b".into(), "a".into())));
        let bad = ServicesFile { services: vec![svc("a b", &[])] };
        assert!(matches!(bad.check(), Err(ServicesError::BadName(_))));
        let mut s = svc("a", &[]);
        s.command = "x\ny".into();
        assert!(matches!(ServicesFile { services: vec![s] }.check(), Err(ServicesError::BadCommand(_))));
        let mut s = svc("a", &[]);
        s.command = r"C:\k\a.exe --x=%PATH%".into();
        assert!(matches!(ServicesFile { services: vec![s] }.check(), Err(ServicesError::Percent(_))));
    }

    #[test]
    fn only_optional_services_depend_on_optional_ones() {
        let mut exporter = svc("exporter", &[]);
        exporter.optional = true;
        let mut helper = svc("helper", &["exporter"]);
        helper.optional = true;
        let ok = ServicesFile { services: vec![exporter.clone(), helper] };
        assert_eq!(ok.check(), Ok(()));
        let bad = ServicesFile { services: vec![exporter, svc("kubelet", &["exporter"])] };
        assert_eq!(bad.check(), Err(ServicesError::DependsOnOptional("kubelet".into(), "exporter".into())));
    }

    #[test]
    fn a_reloaded_credential_restarts_nothing() {
        let mut kubelet = svc("kubelet", &[]);
        kubelet.secrets = vec![NodePath::known(r"C:\k\bootstrap-ca.crt")];
        kubelet.reloads = vec![NodePath::known(r"C:\k\kubelet-ca.crt")];
        let table = ServicesFile { services: vec![kubelet] };
        assert!(table.restarts_for(&NodePath::known(r"C:\k\bootstrap-ca.crt")));
        assert!(!table.restarts_for(&NodePath::known(r"C:\k\kubelet-ca.crt")));
        let changed = [NodePath::known(r"C:\k\kubelet-ca.crt")];
        assert_eq!(table.affected_by(&changed).count(), 0);
    }
}
