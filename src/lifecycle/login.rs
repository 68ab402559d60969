//! Every configured node can be undone: before wmrender first contacts a host it records how it logs in there — a
//! Secret in wmrender's namespace per host (`wmrender-login-<hash of its name>`, labelled `wmrender.dev/login`),
//! which a node cannot write (a Node can write its own annotations and addresses; it can read no Secret that no pod
//! of its mounts) and which outlives the controller's pod, its leader and the host's Node. After the sync it adds
//! the node name the agent reported and the host keys the connection verified, so that:
//!
//! - a host that leaves (its BYOH entry or inventory line removed from Git) is reached for its deconfigure at the
//!   address, port, user and host key recorded, whether or not its Node ever registered ([`super::prune`]);
//! - a restarted or rescheduled controller verifies each host's key instead of trusting every host anew;
//! - a target's node name is known before its Node is seen again.
//!
//! Both `sync --kubeconfig` and the controller write the same records. What a record says is checked as inventory
//! input before it is used: the cluster is untrusted input too.

#[cfg(feature = "cluster")]
pub use with_cluster::Logins;

use crate::delivery::inventory::{Node, address_problem, user_problem};
use crate::delivery::profile::Profile;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wmrender_contract::cluster_names::NAMESPACE;

/// The label every login record carries (value `true`).
pub const LABEL: &str = "wmrender.dev/login";
/// The record's key in the Secret.
pub const KEY: &str = "login.json";
/// Attempts at a write when another writer keeps changing the record (409 Conflict).
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
const WRITE_ATTEMPTS: u32 = 5;

/// How wmrender logs in to one host, and what it learned there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Login {
    /// The target's name (its Machine's, the BYOH host's address, the inventory's name).
    pub target: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    /// The folder standing for `C:\` on a posix host; absent for Windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The Machine whose instance this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The node name its agent reported (what kubelet runs as).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The host keys its connections verified, as OpenSSH writes them (`type base64`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_keys: Vec<String>,
}

impl Login {
    /// How a target is reached, before anything is learned there; what an earlier record learned is kept.
    pub fn of(target: &str, node: &Node, earlier: Option<&Login>) -> Login {
        let root = match &node.profile {
            Profile::Windows => None,
            Profile::Posix { root } => Some(root.clone()),
        };
        let same_host = earlier.filter(|e| e.address == node.address && e.port == node.port);
        Login {
            target: target.to_string(),
            address: node.address.clone(),
            port: node.port,
            user: node.user.clone(),
            root,
            machine: node.machine.clone(),
            node_name: earlier.and_then(|e| e.node_name.clone()),
            host_keys: same_host.map(|e| e.host_keys.clone()).unwrap_or_default(),
        }
    }

    /// How to reach the host, each value checked as inventory input (the record is cluster data).
    pub fn reach(&self) -> Result<Node, String> {
        if let Some(p) = address_problem(&self.address) {
            return Err(format!("the address `{}` in its login record {p}", self.address.escape_debug()));
        }
        if let Some(p) = user_problem(&self.user) {
            return Err(format!("the user `{}` in its login record {p}", self.user.escape_debug()));
        }
        if self.port == 0 {
            return Err("port 0 in its login record".into());
        }
        let profile = match &self.root {
            None => Profile::Windows,
            Some(r) if r.starts_with('/') && !r.contains("..") && !r.chars().any(char::is_control) => {
                Profile::Posix { root: r.clone() }
            }
            Some(_) => return Err("the posix root in its login record is not an absolute path".into()),
        };
        Ok(Node {
            name: self.node_name.clone().unwrap_or_else(|| self.target.clone()),
            address: self.address.clone(),
            port: self.port,
            user: self.user.clone(),
            profile,
            machine: self.machine.clone(),
            reach_only: false,
        })
    }
}

/// A record as stored.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
struct Stored {
    login: Login,
    resource_version: String,
}

/// The Secret name of a target's record: DNS-safe whatever the target's name is.
pub fn secret_name(target: &str) -> String {
    format!("wmrender-login-{}", &wmrender_contract::sha256_hex(target.as_bytes())[..16])
}

#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
fn collection() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/secrets")
}

/// Without the `cluster` feature there are no records: no value of this type exists.
#[cfg(not(feature = "cluster"))]
pub enum Logins {}

#[cfg(feature = "cluster")]
mod with_cluster {
    use super::{KEY, LABEL, Login, Stored, WRITE_ATTEMPTS, collection, parse, secret_name};
    use crate::cluster::{API_TIMEOUT, Body, Cluster, ClusterError};
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Instant;
    use wmrender_contract::cluster_names::NAMESPACE;

    /// The login records, read from the cluster once and kept current by every write made through them.
    pub struct Logins {
        cluster: Cluster,
        records: Mutex<BTreeMap<String, Stored>>,
        /// Records that could not be read (not wmrender's format): named, never used.
        pub unreadable: Vec<String>,
    }

    impl Logins {
        /// Lists the records. A Secret whose record does not parse is set aside (and named in `unreadable`).
        pub async fn load(cluster: &Cluster) -> Result<Logins, ClusterError> {
            let path = format!("{}?labelSelector={}%3Dtrue", collection(), LABEL.replace('/', "%2F"));
            let items = cluster.list(&path).await?;
            let mut records = BTreeMap::new();
            let mut unreadable = Vec::new();
            for item in &items {
                match parse(item) {
                    Some(stored) => {
                        records.insert(stored.login.target.clone(), stored);
                    }
                    None => unreadable.push(item["metadata"]["name"].as_str().unwrap_or("").to_string()),
                }
            }
            Ok(Logins { cluster: cluster.clone(), records: Mutex::new(records), unreadable })
        }

        fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Stored>) -> T) -> T {
            f(&mut self.records.lock().unwrap_or_else(|p| p.into_inner()))
        }

        pub fn get(&self, target: &str) -> Option<Login> {
            self.with(|r| r.get(target).map(|s| s.login.clone()))
        }

        /// Every record, by target name.
        pub fn all(&self) -> Vec<Login> {
            self.with(|r| r.values().map(|s| s.login.clone()).collect())
        }

        /// The node name each target's agent last reported.
        pub fn reported_node_names(&self) -> BTreeMap<String, String> {
            self.with(|r| r.iter().filter_map(|(t, s)| s.login.node_name.clone().map(|n| (t.clone(), n))).collect())
        }

        /// Writes `login` unless the record already says exactly that.
        pub async fn write(&self, login: Login) -> Result<(), ClusterError> {
            let name = secret_name(&login.target);
            let mut last = String::new();
            for _ in 0..WRITE_ATTEMPTS {
                let current = self.with(|r| r.get(&login.target).cloned());
                if current.as_ref().is_some_and(|c| c.login == login) {
                    return Ok(());
                }
                let mut secret = json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {
                        "name": name, "namespace": NAMESPACE,
                        "labels": { LABEL: "true", "app.kubernetes.io/managed-by": "wmrender" },
                        "annotations": { "wmrender.dev/target": login.target },
                    },
                    "data": { KEY: STANDARD.encode(serde_json::to_vec(&login).unwrap_or_default()) },
                });
                let deadline = Instant::now() + API_TIMEOUT;
                let answer = match &current {
                    None => {
                        self.cluster.call(http::Method::POST, &collection(), Some(Body::json(&secret)), deadline).await
                    }
                    Some(c) => {
                        secret["metadata"]["resourceVersion"] = c.resource_version.clone().into();
                        let path = format!("{}/{name}", collection());
                        self.cluster.call(http::Method::PUT, &path, Some(Body::json(&secret)), deadline).await
                    }
                };
                match answer {
                    Ok(stored) => {
                        let version = stored["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
                        self.with(|r| r.insert(login.target.clone(), Stored { login, resource_version: version }));
                        return Ok(());
                    }
                    // Written by another writer since it was read (or created by one): read it again and retry.
                    Err(e) if e.is(409) => {
                        last = e.to_string();
                        self.reread(&login.target).await?;
                    }
                    Err(e) if e.is(404) && current.is_none() => {
                        return Err(ClusterError::Api {
                            what: format!("writing the login record of {}", login.target),
                            why: format!(
                                "the namespace {NAMESPACE} does not exist: apply the rendered cluster/ objects first \
                             (they hold it)"
                            ),
                        });
                    }
                    Err(e) => return Err(self.cluster.failed(&http::Method::POST, &collection(), e)),
                }
            }
            Err(ClusterError::Api {
                what: format!("writing the login record of {}", login.target),
                why: format!("it kept changing under {WRITE_ATTEMPTS} attempts (409 Conflict): {last}"),
            })
        }

        async fn reread(&self, target: &str) -> Result<(), ClusterError> {
            let path = format!("{}/{}", collection(), secret_name(target));
            let found = self.cluster.get(&path).await?;
            self.with(|r| match found.as_ref().and_then(parse) {
                Some(stored) => {
                    r.insert(target.to_string(), stored);
                }
                None => {
                    r.remove(target);
                }
            });
            Ok(())
        }

        /// Deletes a target's record (its host was deconfigured, or its Machine and Node are gone). Gone already is
        /// what was wanted.
        pub async fn remove(&self, target: &str) -> Result<(), ClusterError> {
            let path = format!("{}/{}", collection(), secret_name(target));
            match self.cluster.call(http::Method::DELETE, &path, None, Instant::now() + API_TIMEOUT).await {
                Ok(_) => {}
                Err(e) if e.is(404) => {}
                Err(e) => return Err(self.cluster.failed(&http::Method::DELETE, &path, e)),
            }
            self.with(|r| r.remove(target));
            Ok(())
        }
    }
}

/// A record Secret as read; `None` when its record is not wmrender's or names another Secret's target.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
fn parse(item: &Value) -> Option<Stored> {
    let data = item["data"][KEY].as_str()?;
    let login: Login = serde_json::from_slice(&STANDARD.decode(data).ok()?).ok()?;
    // A record copied under another target's name would make one host stand for another.
    if item["metadata"]["name"].as_str()? != secret_name(&login.target) {
        return None;
    }
    Some(Stored { login, resource_version: item["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn login(target: &str) -> Login {
        Login {
            target: target.into(),
            address: "10.0.0.5".into(),
            port: 22,
            user: "capi".into(),
            root: None,
            machine: None,
            node_name: Some("win-a".into()),
            host_keys: vec!["ssh-ed25519 AAAA".into()],
        }
    }

    fn secret(name: &str, login: &Login) -> Value {
        json!({"metadata": {"name": name, "resourceVersion": "7"},
               "data": {KEY: STANDARD.encode(serde_json::to_vec(login).unwrap())}})
    }

    #[test]
    fn a_record_is_read_only_under_its_own_targets_name() {
        let l = login("10.0.0.5");
        assert_eq!(parse(&secret(&secret_name("10.0.0.5"), &l)).unwrap().login, l);
        assert!(parse(&secret(&secret_name("other"), &l)).is_none(), "copied under another name");
        assert!(parse(&json!({"metadata": {"name": secret_name("x")}, "data": {KEY: "bm90IGpzb24="}})).is_none());
    }

    #[test]
    fn what_a_record_says_is_checked_like_inventory_input() {
        let ok = login("b1").reach().unwrap();
        assert_eq!((ok.name.as_str(), ok.user.as_str(), ok.profile), ("win-a", "capi", Profile::Windows));
        for bad in [
            Login { user: "-oProxyCommand=x".into(), ..login("b1") },
            Login { address: "$(reboot)".into(), ..login("b1") },
            Login { root: Some("../x".into()), ..login("b1") },
            Login { port: 0, ..login("b1") },
        ] {
            assert!(bad.reach().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_new_reach_keeps_the_node_name_and_the_host_keys_only_of_the_same_host() {
        let earlier = login("b1");
        let node = login("b1").reach().unwrap();
        let same = Login::of("b1", &node, Some(&earlier));
        assert_eq!((same.node_name.as_deref(), same.host_keys.len()), (Some("win-a"), 1));
        let moved = Login::of("b1", &Node { address: "10.0.0.6".into(), ..node }, Some(&earlier));
        assert!(moved.host_keys.is_empty(), "another address is another host");
    }
}
