//! The objects the stand-in holds, and the kinds it knows (which resource, whether namespaced, whether `.status` is
//! a subresource). Every write goes through [`Store::create`] or [`Store::replace`], which stamp
//! `metadata.resourceVersion` from one counter, as etcd's revision does.

use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Where an object lives: `/api[s]/{api_version}/[namespaces/{namespace}/]{resource}/{name}`. `namespace` is empty
/// for cluster-scoped objects.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub api_version: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(api_version: &str, resource: &str, namespace: &str, name: &str) -> Key {
        Key {
            api_version: api_version.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `plural` for core objects, `plural.group` otherwise: how the API names a resource in its messages.
    pub fn qualified_resource(&self) -> String {
        qualified(&self.api_version, &self.resource)
    }
}

pub(crate) fn qualified(api_version: &str, resource: &str) -> String {
    match api_version.split_once('/') {
        Some((group, _)) => format!("{resource}.{group}"),
        None => resource.to_string(),
    }
}

/// How a kind treats `.status` (the API's strategies): with a status subresource, writes to the object leave its
/// status as it was, and only `…/status` (or a dedicated subresource) changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusRule {
    /// No status subresource: the whole object is written (ConfigMap, Secret, ServiceAccount).
    None,
    /// Status through `…/status` only; a create keeps the status it was given (Node).
    Subresource,
    /// Status through subresources only, and cleared on create (CertificateSigningRequest, Pod, Machine).
    SubresourceClearedOnCreate,
}

/// A kind the stand-in serves.
#[derive(Clone, Debug)]
pub struct Kind {
    /// `v1` or `group/version`.
    pub api_version: String,
    pub kind: String,
    /// The plural resource name in URLs.
    pub resource: String,
    pub namespaced: bool,
    pub status: StatusRule,
    /// Fields a fieldSelector may name besides `metadata.name` and `metadata.namespace` (the API refuses others).
    pub field_selectors: Vec<String>,
}

impl Kind {
    pub fn new(api_version: &str, kind: &str, resource: &str, namespaced: bool, status: StatusRule) -> Kind {
        Kind {
            api_version: api_version.into(),
            kind: kind.into(),
            resource: resource.into(),
            namespaced,
            status,
            field_selectors: vec![],
        }
    }

    pub fn with_field_selectors(mut self, fields: &[&str]) -> Kind {
        self.field_selectors = fields.iter().map(|f| f.to_string()).collect();
        self
    }
}

/// The kinds wmrender's cluster code touches. Others are added with [`Store::register_kind`].
fn builtin_kinds() -> Vec<Kind> {
    use StatusRule::*;
    vec![
        Kind::new("v1", "Namespace", "namespaces", false, Subresource),
        Kind::new("v1", "Node", "nodes", false, Subresource),
        Kind::new("v1", "Pod", "pods", true, SubresourceClearedOnCreate)
            .with_field_selectors(&["spec.nodeName", "status.phase"]),
        Kind::new("v1", "ConfigMap", "configmaps", true, None),
        Kind::new("v1", "Secret", "secrets", true, None).with_field_selectors(&["type"]),
        Kind::new("v1", "ServiceAccount", "serviceaccounts", true, None),
        Kind::new(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
            SubresourceClearedOnCreate,
        )
        .with_field_selectors(&["spec.signerName"]),
        Kind::new("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", true, Subresource),
        Kind::new("apps/v1", "DaemonSet", "daemonsets", true, Subresource),
        Kind::new("apps/v1", "ReplicaSet", "replicasets", true, Subresource),
        Kind::new("apps/v1", "Deployment", "deployments", true, Subresource),
        Kind::new("apps/v1", "StatefulSet", "statefulsets", true, Subresource),
        Kind::new("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false, None),
        Kind::new("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false, None),
        Kind::new("config.openshift.io/v1", "Infrastructure", "infrastructures", false, Subresource),
        Kind::new("config.openshift.io/v1", "Network", "networks", false, Subresource),
        Kind::new("config.openshift.io/v1", "Proxy", "proxies", false, Subresource),
        Kind::new("config.openshift.io/v1", "ImageDigestMirrorSet", "imagedigestmirrorsets", false, Subresource),
        Kind::new("config.openshift.io/v1", "ImageTagMirrorSet", "imagetagmirrorsets", false, Subresource),
        Kind::new("operator.openshift.io/v1", "Network", "networks", false, Subresource),
        Kind::new("machineconfiguration.openshift.io/v1", "ControllerConfig", "controllerconfigs", false, Subresource),
        Kind::new("machine.openshift.io/v1beta1", "MachineSet", "machinesets", true, Subresource),
        Kind::new("machine.openshift.io/v1beta1", "Machine", "machines", true, SubresourceClearedOnCreate),
    ]
}

pub struct Store {
    kinds: Vec<Kind>,
    objects: BTreeMap<Key, Value>,
    revision: u64,
}

impl Default for Store {
    fn default() -> Store {
        Store { kinds: builtin_kinds(), objects: BTreeMap::new(), revision: 1 }
    }
}

impl Store {
    pub fn register_kind(&mut self, kind: Kind) {
        self.kinds.retain(|k| !(k.api_version == kind.api_version && k.resource == kind.resource));
        self.kinds.push(kind);
    }

    pub fn kind_for_resource(&self, api_version: &str, resource: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.api_version == api_version && k.resource == resource)
    }

    pub fn kind_for(&self, api_version: &str, kind: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.api_version == api_version && k.kind == kind)
    }

    /// The key of an object from its apiVersion, kind and metadata; `None` for a kind the stand-in does not know.
    pub fn key_of(&self, object: &Value) -> Option<Key> {
        let kind = self.kind_for(object["apiVersion"].as_str()?, object["kind"].as_str()?)?;
        let namespace =
            if kind.namespaced { object["metadata"]["namespace"].as_str().unwrap_or("default") } else { "" };
        Some(Key::new(&kind.api_version, &kind.resource, namespace, object["metadata"]["name"].as_str()?))
    }

    /// The last revision written (the list's `metadata.resourceVersion`).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Objects of one resource, in one namespace or (`None`) in all, sorted by namespace and name as etcd lists them.
    pub fn list(&self, api_version: &str, resource: &str, namespace: Option<&str>) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|(k, _)| {
                k.api_version == api_version && k.resource == resource && namespace.is_none_or(|n| n == k.namespace)
            })
            .map(|(_, v)| v)
            .collect()
    }

    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    /// Stores a new object: uid, creationTimestamp and resourceVersion are the server's. The caller has checked that
    /// the key is free.
    pub fn create(&mut self, key: Key, mut object: Value) -> Value {
        let revision = self.next_revision();
        let meta = metadata(&mut object);
        meta.insert("name".into(), key.name.clone().into());
        if !key.namespace.is_empty() {
            meta.insert("namespace".into(), key.namespace.clone().into());
        }
        meta.insert("uid".into(), format!("00000000-0000-4000-8000-{:012}", self.revision).into());
        meta.insert("creationTimestamp".into(), now_rfc3339().into());
        meta.insert("resourceVersion".into(), revision.into());
        self.objects.insert(key, object.clone());
        object
    }

    /// Replaces a stored object, keeping what the server owns (uid, creationTimestamp) and bumping resourceVersion.
    pub fn replace(&mut self, key: &Key, mut object: Value) -> Value {
        let old = self.objects.get(key).cloned().unwrap_or(Value::Null);
        let revision = self.next_revision();
        let meta = metadata(&mut object);
        for owned in ["uid", "creationTimestamp", "name", "namespace"] {
            match old["metadata"].get(owned) {
                Some(v) => meta.insert(owned.into(), v.clone()),
                None => meta.remove(owned),
            };
        }
        meta.insert("resourceVersion".into(), revision.into());
        self.objects.insert(key.clone(), object.clone());
        object
    }

    pub fn remove(&mut self, key: &Key) -> Option<Value> {
        self.revision += 1;
        self.objects.remove(key)
    }
}

/// `metadata` as a map, created if absent or not an object.
pub(crate) fn metadata(object: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    object["metadata"].as_object_mut().expect("just made an object")
}

/// The current UTC time in RFC 3339 (seconds), as metadata timestamps are written.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339_at(secs as i64)
}

/// A time given in seconds since the Unix epoch, in RFC 3339 (UTC, seconds).
pub fn rfc3339_at(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
