//! A Node object as read (JSON from the API server or a watch): its name, addresses, conditions, wmrender's taint and
//! the agent's report. Pure readers, compiled with or without the `cluster` feature; what talks to the API server is
//! [`super::nodes`]. Everything read from a Node is untrusted.

use serde_json::Value;
use wmrender_contract::node_status::{BUNDLE_ANNOTATION, CONDITION_TYPE, PAYLOAD_ANNOTATION, TAINT_EFFECT, TAINT_KEY};

pub fn path(node: &str) -> String {
    format!("/api/v1/nodes/{node}")
}

pub fn name_of(node: &Value) -> &str {
    node["metadata"]["name"].as_str().unwrap_or("")
}

/// `status.addresses` as (type, address).
pub fn addresses(node: &Value) -> impl Iterator<Item = (&str, &str)> {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a["type"].as_str()?, a["address"].as_str()?)))
}

pub fn internal_ip(node: &Value) -> Option<&str> {
    addresses(node).find(|(t, _)| *t == "InternalIP").map(|(_, a)| a)
}

pub fn boot_id(node: &Value) -> &str {
    node["status"]["nodeInfo"]["bootID"].as_str().unwrap_or("")
}

pub fn condition<'a>(node: &'a Value, kind: &str) -> Option<&'a Value> {
    node["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
}

pub fn ready(node: &Value) -> bool {
    condition(node, "Ready").is_some_and(|c| c["status"] == "True")
}

/// The agent's report on its node: its condition and the bundle it applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configured {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    /// The [`BUNDLE_ANNOTATION`]: the digest of the bundle the agent last applied.
    pub bundle: String,
    /// The [`PAYLOAD_ANNOTATION`]: the digest of the payload the agent last applied (empty: an agent that does not
    /// say, or a node without a payload).
    pub payload: String,
}

/// What the agent last reported on this Node, `None` when it never has.
pub fn configured(node: &Value) -> Option<Configured> {
    let c = condition(node, CONDITION_TYPE)?;
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    Some(Configured {
        status: s(&c["status"]),
        reason: s(&c["reason"]),
        message: s(&c["message"]),
        bundle: s(&node["metadata"]["annotations"][BUNDLE_ANNOTATION]),
        payload: s(&node["metadata"]["annotations"][PAYLOAD_ANNOTATION]),
    })
}

pub fn tainted(node: &Value) -> bool {
    taints(node).iter().any(|t| t["key"] == TAINT_KEY && t["effect"] == TAINT_EFFECT)
}

pub fn taints(node: &Value) -> Vec<Value> {
    node["spec"]["taints"].as_array().cloned().unwrap_or_default()
}

/// Whether `name` can be a Node's name (a DNS-1123 subdomain), so that it can go into a URL path as it is. Names come
/// from the inventory, the BYOH list (addresses) and the agent, not all of which are.
pub fn can_be_node_name(name: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    !name.is_empty()
        && name.len() <= 253
        && name.chars().all(ok_char)
        && name.split('.').all(|l| !l.is_empty() && l.len() <= 63 && !l.starts_with('-') && !l.ends_with('-'))
}

/// The node names the pending CSRs among `csrs` claim ([`super::csr::claimed`]): the nodes whose join has something
/// to approve.
#[cfg(feature = "cluster")]
pub fn claimed_by_pending_csr(csrs: &[Value]) -> Vec<String> {
    use base64::Engine;
    csrs.iter()
        .filter(|c| c["status"]["conditions"].is_null())
        .flat_map(|c| {
            let request = c["spec"]["request"]
                .as_str()
                .and_then(|r| base64::engine::general_purpose::STANDARD.decode(r).ok())
                .unwrap_or_default();
            super::csr::claimed(&request, c["spec"]["username"].as_str().unwrap_or(""))
        })
        .collect()
}
