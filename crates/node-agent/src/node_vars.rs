//! Values only the node knows, substituted into service commands and step arguments as plain text (WMCO's rule):
//! NODE_IP from the default route, NODE_NAME from the platform's source, HOSTNAME_OVERRIDE when the platform
//! names the node.

use crate::steps::{StepOutcome, run_step};
use crate::system::System;
use wmrender_contract::{NodeNameSource, NodeSettings, NodeVariable};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeVars {
    pub node_ip: String,
    pub node_name: String,
    /// The node name when the platform overrides Windows' host name, else empty.
    pub hostname_override: String,
}

impl NodeVars {
    pub fn value(&self, v: NodeVariable) -> &str {
        match v {
            NodeVariable::NodeIp => &self.node_ip,
            NodeVariable::NodeName => &self.node_name,
            NodeVariable::HostnameOverride => &self.hostname_override,
        }
    }

    /// The pairs for [`substitute`], for the given variables.
    pub fn pairs(&self, vars: &[NodeVariable]) -> Vec<(&'static str, &str)> {
        vars.iter().map(|v| (v.placeholder(), self.value(*v))).collect()
    }
}

/// Replaces each placeholder by its value in one left-to-right scan: a value is inserted as it is and never
/// scanned again, so a value can neither expand into another placeholder nor be interpreted.
pub fn substitute(text: &str, pairs: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        for (placeholder, value) in pairs {
            if !placeholder.is_empty()
                && let Some(after) = rest.strip_prefix(placeholder)
            {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Trims and lower-cases a node name and checks it is a DNS subdomain (RFC 1123), as Kubernetes requires of a
/// node's name.
pub fn check_node_name(raw: &str) -> Result<String, String> {
    let name = raw.trim().to_ascii_lowercase();
    let shown: String = raw.chars().take(80).collect();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(format!(
            "{shown:?} is not a usable node name (expected a DNS name: letters, digits, `-` and `.`, at most 253 characters)"
        ));
    }
    Ok(name)
}

/// Why the node variables could not be computed.
#[derive(Debug, PartialEq, Eq)]
pub enum VarsError {
    Pending(String),
    Failed(String),
}

/// Computes the node variables; a name step is run each time (its value may change with the platform).
pub fn compute(sys: &mut dyn System, settings: &NodeSettings, ran: &mut Vec<String>) -> Result<NodeVars, VarsError> {
    let node_ip = match sys.default_route_ipv4() {
        Ok(Some(ip)) => ip.to_string(),
        Ok(None) => return Err(VarsError::Failed("the node has no IPv4 default route, so NODE_IP is unknown".into())),
        Err(e) => return Err(VarsError::Failed(format!("cannot read the default route: {e}"))),
    };
    let (raw, source) = match &settings.node_name {
        NodeNameSource::DnsHostName => (sys.dns_host_name(false), "the DNS host name".to_string()),
        NodeNameSource::DnsFullyQualified => (sys.dns_host_name(true), "the fully qualified DNS name".to_string()),
        NodeNameSource::Step { step } => {
            let source = format!("step `{step}`");
            // NodeSettings::parse checked that the step is listed.
            let Some(step) = settings.step(step) else {
                return Err(VarsError::Failed(format!("{source} is not in node.json")));
            };
            ran.push(step.name.clone());
            match run_step(sys, step, &[(NodeVariable::NodeIp.placeholder(), node_ip.as_str())]) {
                StepOutcome::Done { value: Some(v), .. } => (Ok(v), source),
                StepOutcome::Done { value: None, .. } => {
                    return Err(VarsError::Failed(format!("{source} printed no `value` for the node name")));
                }
                StepOutcome::Pending(why) => return Err(VarsError::Pending(format!("{source}: {why}"))),
                StepOutcome::Failed(why) => return Err(VarsError::Failed(format!("{source}: {why}"))),
            }
        }
    };
    let raw = raw.map_err(|e| VarsError::Failed(format!("cannot read {source}: {e}")))?;
    let node_name = check_node_name(&raw).map_err(|e| VarsError::Failed(format!("node name from {source}: {e}")))?;
    let hostname_override = if settings.node_name.overrides_hostname() { node_name.clone() } else { String::new() };
    Ok(NodeVars { node_ip, node_name, hostname_override })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_is_one_plain_scan() {
        let pairs = [("NODE_NAME", "NODE_IP"), ("NODE_IP", "10.0.0.5")];
        assert_eq!(substitute("--node NODE_NAME --ip=NODE_IP", &pairs), "--node NODE_IP --ip=10.0.0.5");
        assert_eq!(substitute("ünïcode NODE_IPNODE_IP", &pairs), "ünïcode 10.0.0.510.0.0.5");
        assert_eq!(substitute("none", &[]), "none");
    }

    #[test]
    fn node_names_are_lower_case_dns_names() {
        assert_eq!(check_node_name("  WIN-Node-01.Example.COM\r\n").unwrap(), "win-node-01.example.com");
        for bad in ["", "a b", "-a", "a-", "a..b", "a_b", "$(calc)", "x\ny", &"a".repeat(64), "ü"] {
            assert!(check_node_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
