//! Which kubelet CSRs sync approves: WMCO's checks (pkg/csr/csr.go and pkg/csr/validation), applied only to the
//! nodes this sync configured, plus the signer and requester checks cluster-machine-approver makes. A CSR is
//! approved through the `/approval` subresource with an `Approved` condition, as `oc adm certificate approve` does;
//! anything else is left alone and its reason reported.
//!
//! - **Client** (kubelet's TLS bootstrap): signer `kubernetes.io/kube-apiserver-client-kubelet`, requested by the
//!   bootstrap identity (`system:serviceaccount:openshift-machine-config-operator:node-bootstrapper`, whose token the
//!   bootstrap kubeconfig carries), subject `CN=system:node:<node>`, `O=system:nodes` only, no SANs, usages within
//!   {digital signature, key encipherment, client auth} with client auth, and — WMCO's rule — no Node of that name
//!   yet. A node that exists renews its certificate with its own identity; kube-controller-manager approves those
//!   (`selfnodeclient`), so sync leaves them alone without reporting them.
//! - **Serving**: signer `kubernetes.io/kubelet-serving`, requested by `system:node:<node>` in groups `system:nodes`
//!   and `system:authenticated`, the same subject, usages within {digital signature, key encipherment, server auth}
//!   with server auth, and every DNS and IP SAN one of the names vouched for the node (below); no e-mail or URI SANs.
//!
//! The names vouched for a node ([`Expected::addresses`]) come only from what the node cannot write: its Machine's
//! `status.addresses` (cluster-machine-approver's rule), the address Git gives for a BYOH or inventory host, and its
//! node name ([`crate::lifecycle::targets::Target::vouched_names`]). Never the Node's own `status.addresses`, nor
//! what its agent reports: a node writes both, and could name a neighbour's address in them.

use std::net::IpAddr;
use x509_cert::der::asn1::ObjectIdentifier;
use x509_cert::der::oid::AssociatedOid;
use x509_cert::der::{Decode, DecodePem};
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::request::{CertReq, ExtensionReq};

pub use super::{CLIENT_SIGNER, SERVING_SIGNER};
pub const BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";

const CN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
const O: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");

/// A node wmrender configured, as its CSRs must name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The Kubernetes node name.
    pub name: String,
    /// The DNS names and IPs its serving certificate may carry: those vouched for it, never its Node's own.
    pub addresses: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Client,
    Serving,
}

/// What a pending CSR is, for one node this sync configured.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Approve it: it is this node's client or serving CSR.
    Approve { node: String, kind: Kind },
    /// It claims a node this sync configured but fails a check: left alone, reported.
    Refuse { node: String, why: String },
    /// Not a kubelet CSR for a node this sync configured: not sync's business.
    NotOurs,
}

/// What the CSR object says, besides its request.
pub struct Spec<'a> {
    pub signer: &'a str,
    pub username: &'a str,
    pub groups: Vec<&'a str>,
    pub usages: Vec<&'a str>,
    /// The PEM `CERTIFICATE REQUEST` (spec.request, base64-decoded).
    pub request: &'a [u8],
}

/// The parts of a PKCS#10 request the checks read.
struct Request {
    common_names: Vec<String>,
    organizations: Vec<String>,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    /// E-mail, URI and other SANs.
    other_sans: usize,
}

fn parse(pem: &[u8]) -> Result<Request, String> {
    let req = CertReq::from_pem(pem).map_err(|_| "its request is not a PEM CERTIFICATE REQUEST".to_string())?;
    let strings = |oid: ObjectIdentifier| -> Result<Vec<String>, String> {
        req.info
            .subject
            .iter()
            .filter(|atv| atv.oid == oid)
            .map(|atv| {
                x509_cert::ext::pkix::name::DirectoryString::try_from(&atv.value)
                    .map(|d| d.value().into_owned())
                    .map_err(|_| "its subject is not text".to_string())
            })
            .collect()
    };
    let mut r =
        Request { common_names: strings(CN)?, organizations: strings(O)?, dns: vec![], ips: vec![], other_sans: 0 };
    for attr in req.info.attributes.iter().filter(|a| a.oid == ExtensionReq::OID) {
        for value in attr.values.iter() {
            let extensions: Vec<Extension> =
                value.decode_as().map_err(|_| "its extension request cannot be read".to_string())?;
            for ext in extensions.iter().filter(|e| e.extn_id == SubjectAltName::OID) {
                let san = SubjectAltName::from_der(ext.extn_value.as_bytes())
                    .map_err(|_| "its subjectAltName cannot be read".to_string())?;
                for name in san.0 {
                    match name {
                        GeneralName::DnsName(d) => r.dns.push(d.to_string()),
                        GeneralName::IpAddress(ip) => match ip.as_bytes().len() {
                            4 => r.ips.push(IpAddr::from(<[u8; 4]>::try_from(ip.as_bytes()).unwrap_or_default())),
                            16 => r.ips.push(IpAddr::from(<[u8; 16]>::try_from(ip.as_bytes()).unwrap_or_default())),
                            _ => r.other_sans += 1,
                        },
                        _ => r.other_sans += 1,
                    }
                }
            }
        }
    }
    Ok(r)
}

/// All `usages` in `allowed`, at least two (WMCO's hasUsages), and `required` among them.
fn usages_ok(usages: &[&str], allowed: &[&str], required: &str) -> bool {
    usages.len() >= 2 && usages.iter().all(|u| allowed.contains(u)) && usages.contains(&required)
}

/// The node names a CSR claims, as [`judge`] finds its node: `system:node:<name>` among its request's common
/// names, or, when the request cannot be read, its requester's. A CSR can only be judged for a node it claims, so a
/// caller may leave every other node out of the `expected` it judges against.
pub fn claimed(request: &[u8], username: &str) -> Vec<String> {
    match parse(request) {
        Ok(req) => {
            req.common_names.iter().filter_map(|cn| cn.strip_prefix("system:node:")).map(str::to_string).collect()
        }
        Err(_) => username.strip_prefix("system:node:").map(str::to_string).into_iter().collect(),
    }
}

/// Judges one pending CSR against the nodes wmrender configured. `node_exists(name)`: whether the cluster has a
/// Node of that name.
pub fn judge(spec: &Spec, expected: &[Expected], node_exists: &dyn Fn(&str) -> bool) -> Verdict {
    let Ok(req) = parse(spec.request) else {
        // A request that cannot be read names no node; if its requester is one of ours, say so.
        return match spec.username.strip_prefix("system:node:").and_then(|n| expected.iter().find(|e| e.name == n)) {
            Some(e) => {
                Verdict::Refuse { node: e.name.clone(), why: "its request is not a readable PKCS#10 request".into() }
            }
            None => Verdict::NotOurs,
        };
    };
    let Some(node) = req
        .common_names
        .iter()
        .filter_map(|cn| cn.strip_prefix("system:node:"))
        .find_map(|n| expected.iter().find(|e| e.name == n))
    else {
        return Verdict::NotOurs;
    };
    let refuse = |why: String| Verdict::Refuse { node: node.name.clone(), why };
    if req.common_names.len() != 1 {
        return refuse(format!("its subject has {} common names; one is expected", req.common_names.len()));
    }
    if req.organizations != ["system:nodes"] {
        return refuse(format!(
            "its subject organizations are {:?}, not exactly [\"system:nodes\"]",
            req.organizations
        ));
    }
    match spec.signer {
        // A renewal, asked by the node with its current certificate: the cluster approves those itself
        // (kube-controller-manager's CSR approver, `selfnodeclient`).
        CLIENT_SIGNER if spec.username == format!("system:node:{}", node.name) => Verdict::NotOurs,
        CLIENT_SIGNER => {
            if spec.username != BOOTSTRAPPER {
                return refuse(format!("a client CSR requested by {:?}, not by the node bootstrapper", spec.username));
            }
            if !req.dns.is_empty() || !req.ips.is_empty() || req.other_sans > 0 {
                return refuse("a client CSR with subject alternative names".into());
            }
            let allowed = ["digital signature", "key encipherment", "client auth"];
            if !usages_ok(&spec.usages, &allowed, "client auth") {
                return refuse(format!("client CSR usages {:?} are not kubelet's", spec.usages));
            }
            if node_exists(&node.name) {
                return refuse(format!(
                    "node {} already exists; a bootstrap client CSR is approved only before the node registers (WMCO's rule)",
                    node.name
                ));
            }
            Verdict::Approve { node: node.name.clone(), kind: Kind::Client }
        }
        SERVING_SIGNER => {
            if spec.username != format!("system:node:{}", node.name) {
                return refuse(format!(
                    "a serving CSR requested by {:?}, not by system:node:{}",
                    spec.username, node.name
                ));
            }
            if !(spec.groups.contains(&"system:nodes") && spec.groups.contains(&"system:authenticated")) {
                return refuse("a serving CSR whose requester is not in system:nodes and system:authenticated".into());
            }
            let allowed = ["digital signature", "key encipherment", "server auth"];
            if !usages_ok(&spec.usages, &allowed, "server auth") {
                return refuse(format!("serving CSR usages {:?} are not kubelet's", spec.usages));
            }
            if req.other_sans > 0 {
                return refuse("a serving CSR with e-mail, URI or other non-DNS, non-IP names".into());
            }
            if req.dns.is_empty() && req.ips.is_empty() {
                return refuse("a serving CSR without subject alternative names".into());
            }
            let mut known: Vec<String> = node.addresses.clone();
            known.push(node.name.clone());
            let known_ips: Vec<IpAddr> = known.iter().filter_map(|a| a.parse().ok()).collect();
            // DNS names as the approver compares them: without a trailing dot, in any case.
            let same = |a: &str, b: &str| a.trim_end_matches('.').eq_ignore_ascii_case(b.trim_end_matches('.'));
            let stray: Vec<String> = req
                .dns
                .iter()
                .filter(|d| !known.iter().any(|k| same(k, d)))
                .cloned()
                .chain(req.ips.iter().filter(|ip| !known_ips.contains(ip)).map(|ip| ip.to_string()))
                .collect();
            if !stray.is_empty() {
                return refuse(format!(
                    "its subject alternative names {stray:?} are not among the names vouched for node {} (its \
                     Machine's addresses, its address in Git, its name; never the Node's own addresses)",
                    node.name
                ));
            }
            Verdict::Approve { node: node.name.clone(), kind: Kind::Serving }
        }
        other => refuse(format!("signer {other:?} is neither kubelet's client nor its serving signer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl req -new -subj /O=system:nodes/CN=system:node:win-a` (P-256).
    const WIN_A: &str = "-----BEGIN CERTIFICATE REQUEST-----
MIHtMIGVAgEAMDMxFTATBgNVBAoMDHN5c3RlbTpub2RlczEaMBgGA1UEAwwRc3lz
dGVtOm5vZGU6d2luLWEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASgjPCWKTur
R/CMFrdFxhwokRDOKh0UKLENCNQLfveMznaOsLBoTT+9WXUm5z7EFhijKjSEY/iu
VKxnllKQLNKOoAAwCgYIKoZIzj0EAwIDRwAwRAIgS253sgHW7JCZgUvFKyU4KhZr
//h3HzCWjHhwzWcc/qwCIHUaNkNlUeS7yYwhLWtaeK3rJ7Rx9V995Lon8nzA/PuJ
-----END CERTIFICATE REQUEST-----
";

    #[test]
    fn a_csr_claims_the_node_its_subject_names_or_else_its_requester() {
        assert_eq!(claimed(WIN_A.as_bytes(), BOOTSTRAPPER), ["win-a"]);
        assert_eq!(claimed(WIN_A.as_bytes(), "system:node:win-b"), ["win-a"], "the subject, as judge reads it");
        assert_eq!(claimed(b"not a request", "system:node:win-b"), ["win-b"]);
        assert!(claimed(b"not a request", "jane").is_empty());
        // What judge says of a CSR: the same whether the nodes it does not claim are expected or not.
        let spec = Spec {
            signer: CLIENT_SIGNER,
            username: BOOTSTRAPPER,
            groups: vec![],
            usages: vec!["digital signature", "client auth"],
            request: WIN_A.as_bytes(),
        };
        let node = |n: &str| Expected { name: n.into(), addresses: vec![] };
        let none = |_: &str| false;
        let all = [node("win-0"), node("win-a"), node("win-z")];
        let claimed_only: Vec<Expected> =
            all.iter().filter(|e| claimed(spec.request, spec.username).contains(&e.name)).cloned().collect();
        assert_eq!(judge(&spec, &all, &none), judge(&spec, &claimed_only, &none));
        assert_eq!(judge(&spec, &claimed_only, &none), Verdict::Approve { node: "win-a".into(), kind: Kind::Client });
    }
}
