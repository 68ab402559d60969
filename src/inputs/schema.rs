//! The cluster-inputs file (`wmrender.yaml`) as typed values: ../shared/spec/inputs.md, field for field.
//!
//! Each struct is declared once, in a [`schema!`] block: its Rust field, the YAML key, whether the key is required
//! and what is expected there. The block generates the struct, its [`Decode`] impl (anything not listed is an
//! unknown-field error), its `Serialize` impl (the inputs digest reads it, under the same keys) and its written
//! form ([`Written`]: what `import` writes, unset fields left out). `import` builds these same types, so the spec
//! is written here only.
//!
//! Decoding is best effort: a required field that is missing or of the wrong type gets its error and a
//! [`Placeholder`] value, a list keeps the items that could be read, so that validation still runs every rule on
//! what did decode and the user sees every error in one run (validation knows which fields failed from those
//! errors, see `validate::Decoded`). Defaults are not filled in here: validation resolves them, so that "not
//! written" stays visible to its rules. docs/inputs.md documents every field; keep the two in step.

use super::yaml::{Decode, Fields, Located, Node, OddWholeNumber, Value, item_path};
use crate::diagnostics::{Diagnostic, Diagnostics, Loc};
use crate::windows::WindowsVersion;
use serde::Serialize;
use serde::ser::SerializeStruct;

pub const API_VERSION: &str = "wmrender.dev/v1alpha1";
pub const KIND: &str = "ClusterInputs";

/// What a required field holds when it could not be read: an empty value at the enclosing mapping, under the
/// field's own path. Its error is already reported; validation skips rules on it.
pub trait Placeholder {
    fn placeholder(at: &Loc, field: &str) -> Self;
}

impl<T: Default> Placeholder for Located<T> {
    fn placeholder(at: &Loc, field: &str) -> Self {
        Located { value: T::default(), loc: at.clone(), field: field.into() }
    }
}

/// The inputs as a person writes them, for `import`: keys in declaration order, unset fields left out. The
/// `Serialize` impls are the inputs digest's form (every field, `null` included) and must not change with this one;
/// both come from the same [`schema!`] declarations.
pub trait Written {
    /// Left out when written: `None`, an empty list, `false`, a section with nothing set.
    fn is_unset(&self) -> bool {
        false
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;
}

/// A value in its written form, for any serde serializer.
pub struct AsWritten<'a, T: ?Sized>(pub &'a T);

impl<T: Written + ?Sized> Serialize for AsWritten<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write(s)
    }
}

/// Scalars are written as the digest has them.
macro_rules! written_as_serialized {
    ($($t:ty),*) => {$(
        impl Written for $t {
            fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.serialize(s)
            }
        }
    )*};
}
written_as_serialized!(String, u32, WindowsVersion, Replicas);

impl Written for bool {
    fn is_unset(&self) -> bool {
        !*self
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(*self)
    }
}

/// `Some(vec![])` is written (`tags: []` means something); `None` is not.
impl<T: Written> Written for Option<T> {
    fn is_unset(&self) -> bool {
        self.is_none()
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Some(v) => v.write(s),
            None => s.serialize_none(),
        }
    }
}

impl<T: Written> Written for Vec<T> {
    fn is_unset(&self) -> bool {
        self.is_empty()
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(AsWritten))
    }
}

impl<T: Written> Written for Box<T> {
    fn is_unset(&self) -> bool {
        (**self).is_unset()
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).write(s)
    }
}

impl<T: Written> Written for Located<T> {
    fn is_unset(&self) -> bool {
        self.value.is_unset()
    }
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.write(s)
    }
}

/// Where a value is that no file holds: one `import` made up or copied from a cluster object. Line 0 reads as
/// "the whole source" in messages, which names what generated it.
pub fn generated(by: &str) -> Loc {
    Loc::file_only(&std::sync::Arc::from(by))
}

/// A list read item by item: the items that decode are kept, each bad one has its error.
fn best_effort_list<T: Decode>(node: Node, field: &str, diags: &mut Diagnostics) -> Vec<T> {
    match node.value {
        Value::Seq(items) => {
            // Sized up front: a long list (mirror entries) collected from `filter_map` grows to twice its size.
            let mut list = Vec::with_capacity(items.len());
            list.extend(
                items.into_iter().enumerate().filter_map(|(i, item)| T::decode(item, &item_path(field, i), diags)),
            );
            list
        }
        value => Vec::<T>::decode(Node { value, ..node }, field, diags).unwrap_or_default(),
    }
}

fn decode_or_placeholder<T: Decode + Placeholder>(node: Node, field: &str, diags: &mut Diagnostics) -> T {
    let at = node.loc.clone();
    T::decode(node, field, diags).unwrap_or_else(|| T::placeholder(&at, field))
}

/// How one field is read from its mapping; see [`schema!`].
macro_rules! read_field {
    // Must be written; a placeholder when it cannot be read.
    ($f:ident, $d:ident, required($key:literal, $expected:expr)) => {
        match $f.req($key, $expected, $d) {
            Some(v) => v,
            None => Placeholder::placeholder($f.loc(), &$f.path($key)),
        }
    };
    // May be left out: `None`.
    ($f:ident, $d:ident, optional($key:literal)) => {
        $f.opt($key, $d)
    };
    // May be left out: the type's default (`false`, an empty list).
    ($f:ident, $d:ident, or_default($key:literal)) => {
        $f.opt($key, $d).unwrap_or_default()
    };
    // A list, read item by item; left out: empty.
    ($f:ident, $d:ident, list($key:literal)) => {
        match $f.node($key) {
            Some(n) => best_effort_list(n, &$f.path($key), $d),
            None => Vec::new(),
        }
    };
    // A list where "written, even empty" differs from "left out" (`byoh: []` deconfigures every host).
    ($f:ident, $d:ident, written_list($key:literal)) => {{
        let written = $f.has($key);
        let list = match $f.node($key) {
            Some(n) => best_effort_list(n, &$f.path($key), $d),
            None => Vec::new(),
        };
        written.then_some(list)
    }};
    // A mapping of optional settings; left out reads as an empty one, placed at the enclosing mapping.
    ($f:ident, $d:ident, section($key:literal)) => {{
        let node = $f.node($key).unwrap_or_else(|| Node { value: Value::Null, loc: $f.loc().clone() });
        Decode::decode(node, &$f.path($key), $d).unwrap_or_else(|| Placeholder::placeholder($f.loc(), &$f.path($key)))
    }};
    // Where this mapping itself is, for rules about it as a whole.
    ($f:ident, $d:ident, here) => {
        $f.at()
    };
}

/// The key a field is read from; `here` has none.
macro_rules! field_key {
    (here) => {
        None::<&'static str>
    };
    ($how:ident($key:literal $(, $rest:tt)*)) => {
        Some($key)
    };
}

/// The place of `key` among `keys` in byte order (how many of them sort before it), or `usize::MAX` for a field
/// without a key (`here`, which is not written). For the schema's `Serialize`, evaluated when compiling.
const fn key_rank(keys: &[Option<&str>], key: Option<&str>) -> usize {
    let Some(key) = key else { return usize::MAX };
    let mut rank = 0;
    let mut i = 0;
    while i < keys.len() {
        if let Some(other) = keys[i]
            && bytes_before(other.as_bytes(), key.as_bytes())
        {
            rank += 1;
        }
        i += 1;
    }
    rank
}

/// `a < b`, byte by byte, as `str`'s order has it (a `const fn`, which `Ord` is not).
const fn bytes_before(a: &[u8], b: &[u8]) -> bool {
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

/// How one field is written to the digest's JSON: under its key; `here` is a position, not a value.
/// A field as the inputs digest reads it: left out when unset, so that inputs which do not use a field a later
/// wmrender learns keep their digest.
macro_rules! serialize_field {
    ($s:ident, $v:expr, here) => {};
    ($s:ident, $v:expr, $how:ident($key:literal $(, $rest:tt)*)) => {
        if field_unset!($v, $how($key $(, $rest)*)) {
            $s.skip_field($key)?;
        } else {
            $s.serialize_field($key, $v)?;
        }
    };
}

/// Whether a field is left out of the written form: a required field is always written, `here` never.
macro_rules! field_unset {
    ($v:expr, here) => {
        true
    };
    ($v:expr, required $args:tt) => {
        false
    };
    ($v:expr, $how:ident $args:tt) => {
        Written::is_unset($v)
    };
}

/// How one field is written by `import`: under its key, unless it is unset.
macro_rules! write_field {
    ($s:ident, $v:expr, here) => {};
    ($s:ident, $v:expr, $how:ident($key:literal $(, $rest:tt)*)) => {
        if field_unset!($v, $how($key)) {
            $s.skip_field($key)?;
        } else {
            $s.serialize_field($key, &AsWritten($v))?;
        }
    };
}

/// One declaration per inputs mapping: `field: Type = how(key, ...)`, in the order the keys are listed in messages
/// and written by `import` (the order of docs/inputs.md).
/// `ignoring [...]` names keys that are accepted and not read.
macro_rules! schema {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $how:ident $( ( $($arg:tt),* ) )? ),* $(,)?
        }
        $( ignoring [$($ignored:literal),*] )?
    )*) => {$(
        $(#[$meta])*
        #[derive(Clone, Debug)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Decode for $name {
            fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
                let mut f = Fields::new(node, field, diags)?;
                let value = $name { $( $field: read_field!(f, diags, $how $( ( $($arg),* ) )?), )* };
                $($( f.node($ignored); )*)?
                f.finish(diags);
                Some(value)
            }
        }

        impl Placeholder for $name {
            /// Every field a placeholder or empty; the errors of reading `null` as this mapping are not repeated.
            fn placeholder(at: &Loc, field: &str) -> Self {
                let empty = Node { value: Value::Null, loc: at.clone() };
                let mut ignored = Diagnostics::default();
                match Self::decode(empty, field, &mut ignored) {
                    Some(v) => v,
                    None => unreachable!("null reads as an empty mapping"),
                }
            }
        }

        impl Serialize for $name {
            /// Keys in byte order, as canonical JSON has them, so the inputs digest streams instead of sorting.
            /// Each field's place in that order is worked out when compiling ([`key_rank`]): writing a struct,
            /// done for every item of every list, compares small numbers only.
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                const KEYS: &[Option<&str>] = &[$(field_key!($how $( ( $($arg),* ) )?)),*];
                let mut s = s.serialize_struct(stringify!($name), KEYS.len())?;
                for place in 0..KEYS.len() {
                    $( if const { key_rank(KEYS, field_key!($how $( ( $($arg),* ) )?)) } == place {
                        serialize_field!(s, &self.$field, $how $( ( $($arg),* ) )?);
                    } )*
                }
                s.end()
            }
        }

        impl Written for $name {
            /// A section with nothing set (`mirrors`, `operator`) is left out; one with a required field never is.
            fn is_unset(&self) -> bool {
                true $( && field_unset!(&self.$field, $how $( ( $($arg),* ) )?) )*
            }

            fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut s = s.serialize_struct(stringify!($name), [$(stringify!($field)),*].len())?;
                $( write_field!(s, &self.$field, $how $( ( $($arg),* ) )?); )*
                s.end()
            }
        }
    )*};
}

schema! {

    pub struct Metadata {
        name: Located<String> = required("name", "a short name for this cluster, e.g. prod-east"),
    }
    // Tools that carry the inputs as a Kubernetes-style object (kustomize, kpt) add labels and annotations such as
    // config.kubernetes.io/local-config; they mean nothing to the render.
    ignoring ["labels", "annotations"]

    pub struct Spec {
        infrastructure_id: Located<String> =
            required("infrastructureID", "status.infrastructureName of infrastructure/cluster"),
        api_server_internal_url: Located<String> = required(
            "apiServerInternalURL",
            "status.apiServerInternalURI of infrastructure/cluster, e.g. https://api-int.prod.example.com:6443"
        ),
        /// Kubernetes minor version of the cluster (`"1.35"`): selects version-dependent kubelet and kube-proxy
        /// fields.
        kubernetes_version: Option<Located<String>> = optional("kubernetesVersion"),
        platform: Located<Platform> =
            required("platform", "a mapping with exactly one of: aws, azure, gcp, nutanix, vsphere, none"),
        windows_version: Option<Located<WindowsVersion>> = optional("windowsVersion"),
        machine_sets: Vec<MachineSetInput> = list("machineSets"),
        /// `None` when the key is absent; `Some(vec![])` renders an empty `windows-instances` ConfigMap, which is
        /// how a user deconfigures the last BYOH host.
        byoh: Option<Vec<ByohHost>> = written_list("byoh"),
        network: Network = section("network"),
        proxy: Option<Proxy> = optional("proxy"),
        mirrors: Mirrors = section("mirrors"),
        pause_image: Option<Located<String>> = optional("pauseImage"),
        operator: Operator = section("operator"),
        /// OpenSSH public key authorised on Machine-backed nodes by the rendered `windows-user-data` Secret
        /// (mode without the operator).
        ssh_public_key: Option<Located<String>> = optional("sshPublicKey"),
        /// `wmrender controller` in the cluster (mode without the operator): its Deployment, RBAC and the node
        /// bundle as ConfigMaps, rendered into `cluster/`.
        controller: Option<Controller> = optional("controller"),
        /// How the node services' log files are rotated.
        node_logs: Option<NodeLogs> = optional("nodeLogs"),
        /// The keys a node trusts on a bundle it pulls (`wmrender publish --sign-key`, cosign).
        bundle_signing: Option<BundleSigning> = optional("bundleSigning"),
    }

    pub struct BundleSigning {
        at: Located<()> = here,
        public_keys: Vec<Located<String>> = list("publicKeys"),
    }

    pub struct NodeLogs {
        max_size: Option<Located<String>> = optional("maxSize"),
        max_age: Option<Located<String>> = optional("maxAge"),
        flush_interval: Option<Located<String>> = optional("flushInterval"),
    }

    pub struct Controller {
        image: Located<String> =
            required("image", "the wmrender container image, e.g. quay.io/example/wmrender@sha256:…"),
        payload_image: Option<Located<String>> = optional("payloadImage"),
        replicas: Option<Located<u32>> = optional("replicas"),
        pull_from: Option<Located<String>> = optional("pullFrom"),
        pull_payload_from: Option<Located<String>> = optional("pullPayloadFrom"),
    }

    pub struct Aws {
        region: Located<String> = required("region", "the AWS region, e.g. us-east-1"),
        ami: Option<Located<String>> = optional("ami"),
        instance_type: Option<Located<String>> = optional("instanceType"),
        volume_size: Option<Located<u32>> = optional("volumeSize"),
        volume_type: Option<Located<String>> = optional("volumeType"),
        iam_instance_profile: Option<Located<String>> = optional("iamInstanceProfile"),
        security_groups: Option<Vec<Located<String>>> = optional("securityGroups"),
        subnet: Option<Located<String>> = optional("subnet"),
        tags: Vec<NameValue> = list("tags"),
    }

    pub struct NameValue {
        name: Located<String> = required("name", "a tag name"),
        value: Located<String> = required("value", "a tag value"),
    }

    pub struct Azure {
        location: Located<String> = required("location", "the Azure region, e.g. centralus"),
        resource_group: Option<Located<String>> = optional("resourceGroup"),
        network_resource_group: Option<Located<String>> = optional("networkResourceGroup"),
        vnet: Option<Located<String>> = optional("vnet"),
        subnet: Option<Located<String>> = optional("subnet"),
        vm_size: Option<Located<String>> = optional("vmSize"),
        image: Option<Located<String>> = optional("image"),
        os_disk_size_gb: Option<Located<u32>> = optional("osDiskSizeGB"),
        os_disk_storage_account_type: Option<Located<String>> = optional("osDiskStorageAccountType"),
        public_load_balancer: Option<Located<String>> = optional("publicLoadBalancer"),
        managed_identity: Option<Located<String>> = optional("managedIdentity"),
    }

    pub struct Gcp {
        project_id: Located<String> = required("projectID", "the GCP project ID"),
        region: Located<String> = required("region", "the GCP region, e.g. us-central1"),
        machine_type: Option<Located<String>> = optional("machineType"),
        image: Option<Located<String>> = optional("image"),
        disk_size_gb: Option<Located<u32>> = optional("diskSizeGb"),
        disk_type: Option<Located<String>> = optional("diskType"),
        network: Option<Located<String>> = optional("network"),
        subnetwork: Option<Located<String>> = optional("subnetwork"),
        service_account_email: Option<Located<String>> = optional("serviceAccountEmail"),
        tags: Option<Vec<Located<String>>> = optional("tags"),
    }

    pub struct Nutanix {
        cluster: NutanixId = required("cluster", "the Prism Element cluster as {uuid: ...} or {name: ...}"),
        /// Image name as uploaded to Prism.
        image: Option<Located<String>> = optional("image"),
        subnets: Located<Vec<NutanixId>> =
            required("subnets", "a list with exactly one subnet, {uuid: ...} or {name: ...}"),
        project: Option<NutanixId> = optional("project"),
        vcpu_sockets: Option<Located<u32>> = optional("vcpuSockets"),
        vcpus_per_socket: Option<Located<u32>> = optional("vcpusPerSocket"),
        memory_size: Option<Located<String>> = optional("memorySize"),
        system_disk_size: Option<Located<String>> = optional("systemDiskSize"),
        boot_type: Option<Located<String>> = optional("bootType"),
        categories: Vec<KeyValue> = list("categories"),
    }

    /// A Nutanix resource named by exactly one of `uuid` or `name`.
    pub struct NutanixId {
        uuid: Option<Located<String>> = optional("uuid"),
        name: Option<Located<String>> = optional("name"),
        at: Located<()> = here,
    }

    pub struct KeyValue {
        key: Located<String> = required("key", "a category key"),
        value: Located<String> = required("value", "a category value"),
    }

    pub struct Vsphere {
        server: Located<String> = required("server", "the vCenter server name or address"),
        datacenter: Located<String> = required("datacenter", "the vCenter datacenter"),
        datastore: Located<String> = required("datastore", "the vCenter datastore"),
        folder: Option<Located<String>> = optional("folder"),
        resource_pool: Option<Located<String>> = optional("resourcePool"),
        network: Located<String> = required("network", "the VM network name of the Linux workers"),
        template: Option<Located<String>> = optional("template"),
        num_cpus: Option<Located<u32>> = optional("numCPUs"),
        num_cores_per_socket: Option<Located<u32>> = optional("numCoresPerSocket"),
        memory_mib: Option<Located<u32>> = optional("memoryMiB"),
        disk_gib: Option<Located<u32>> = optional("diskGiB"),
    }

    pub struct MachineSetInput {
        name: Option<Located<String>> = optional("name"),
        zone: Option<Located<String>> = optional("zone"),
        replicas: Option<Located<Replicas>> = optional("replicas"),
        windows_version: Option<Located<WindowsVersion>> = optional("windowsVersion"),
        image: Option<Located<String>> = optional("image"),
        at: Located<()> = here,
    }

    pub struct ByohHost {
        address: Located<String> = required("address", "an IPv4 address or DNS name the operator can reach"),
        username: Located<String> = required("username", "the Windows administrator user, e.g. Administrator"),
        windows_version: Option<Located<WindowsVersion>> = optional("windowsVersion"),
    }

    pub struct Network {
        service_network: Option<Vec<Located<String>>> = optional("serviceNetwork"),
        cluster_network: Option<Vec<Located<String>>> = optional("clusterNetwork"),
        hybrid_cluster_network: Option<Vec<Located<String>>> = optional("hybridClusterNetwork"),
        hybrid_overlay_vxlan_port: Option<Located<u32>> = optional("hybridOverlayVXLANPort"),
        at: Located<()> = here,
    }

    pub struct Proxy {
        http_proxy: Option<Located<String>> = optional("httpProxy"),
        https_proxy: Option<Located<String>> = optional("httpsProxy"),
        no_proxy: Vec<Located<String>> = list("noProxy"),
    }

    pub struct Mirrors {
        files: Vec<Located<String>> = list("files"),
        image_digest_mirrors: Vec<MirrorEntry> = list("imageDigestMirrors"),
        image_tag_mirrors: Vec<MirrorEntry> = list("imageTagMirrors"),
    }

    /// One entry of `imageDigestMirrors` / `imageTagMirrors`, same shape as the openshift/api type.
    pub struct MirrorEntry {
        source: Located<String> = required("source", "a registry or repository, e.g. registry.redhat.io/ubi9"),
        mirrors: Vec<Located<String>> = list("mirrors"),
        /// Boxed: rarely written, and a long mirror list would otherwise hold room for it in every entry.
        mirror_source_policy: Option<Box<Located<String>>> = optional("mirrorSourcePolicy"),
    }

    pub struct Operator {
        install: bool = or_default("install"),
        namespace: Option<Located<String>> = optional("namespace"),
        package: Option<Located<String>> = optional("package"),
        channel: Option<Located<String>> = optional("channel"),
        source: Option<Located<String>> = optional("source"),
        source_namespace: Option<Located<String>> = optional("sourceNamespace"),
        install_plan_approval: Option<Located<String>> = optional("installPlanApproval"),
    }
}

/// The whole document. `apiVersion` and `kind` are checked here and not kept: they name the format, not the
/// cluster, so the inputs digest does not read them.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterInputs {
    pub metadata: Metadata,
    pub spec: Spec,
}

/// Reads the whole document, as far as it can be read; `diags` says what could not. `None` only when the
/// document is not a mapping at all.
pub fn decode_document(node: Node, diags: &mut Diagnostics) -> Option<ClusterInputs> {
    let mut f = Fields::new(node, "", diags)?;
    let api_version: Option<Located<String>> = f.req("apiVersion", API_VERSION, diags);
    let kind: Option<Located<String>> = f.req("kind", KIND, diags);
    let metadata = read_field!(f, diags, required("metadata", "a mapping with `name`"));
    let spec = read_field!(f, diags, required("spec", "a mapping"));
    f.finish(diags);
    if let Some(v) = &api_version
        && v.value != API_VERSION
    {
        diags.push(v.error(format!("unsupported apiVersion `{}`", v.value)).expected(API_VERSION));
    }
    if let Some(k) = &kind
        && k.value != KIND
    {
        diags.push(k.error(format!("unsupported kind `{}`", k.value)).expected(KIND));
    }
    Some(ClusterInputs { metadata, spec })
}

/// The written document: `apiVersion` and `kind` first, as every example has them.
impl Written for ClusterInputs {
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut s = s.serialize_struct("ClusterInputs", 4)?;
        s.serialize_field("apiVersion", API_VERSION)?;
        s.serialize_field("kind", KIND)?;
        s.serialize_field("metadata", &AsWritten(&self.metadata))?;
        s.serialize_field("spec", &AsWritten(&self.spec))?;
        s.end()
    }
}

/// The platforms, as one list: the support matrix, the decoder and the messages all read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlatformKind {
    Aws,
    Azure,
    Gcp,
    Nutanix,
    Vsphere,
    None,
}

impl PlatformKind {
    pub const ALL: [PlatformKind; 6] = [
        PlatformKind::Aws,
        PlatformKind::Azure,
        PlatformKind::Gcp,
        PlatformKind::Nutanix,
        PlatformKind::Vsphere,
        PlatformKind::None,
    ];

    /// The key under `spec.platform`.
    pub fn key(self) -> &'static str {
        match self {
            PlatformKind::Aws => "aws",
            PlatformKind::Azure => "azure",
            PlatformKind::Gcp => "gcp",
            PlatformKind::Nutanix => "nutanix",
            PlatformKind::Vsphere => "vsphere",
            PlatformKind::None => "none",
        }
    }

    /// `aws, azure, gcp, nutanix, vsphere, none`, for messages.
    pub fn listed() -> String {
        PlatformKind::ALL.map(PlatformKind::key).join(", ")
    }
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Platform {
    Aws(Aws),
    Azure(Azure),
    Gcp(Gcp),
    Nutanix(Nutanix),
    Vsphere(Vsphere),
    /// Also the placeholder of a platform that could not be read; validation skips platform rules then.
    #[default]
    None,
}

impl Platform {
    pub fn kind(&self) -> PlatformKind {
        match self {
            Platform::Aws(_) => PlatformKind::Aws,
            Platform::Azure(_) => PlatformKind::Azure,
            Platform::Gcp(_) => PlatformKind::Gcp,
            Platform::Nutanix(_) => PlatformKind::Nutanix,
            Platform::Vsphere(_) => PlatformKind::Vsphere,
            Platform::None => PlatformKind::None,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().key()
    }

    fn decode_kind(kind: PlatformKind, node: Node, field: &str, diags: &mut Diagnostics) -> Option<Platform> {
        match kind {
            // A platform block of the wrong type (`aws: 5`) is still that platform, with placeholder settings
            // below its failed path: the rules know the platform and skip its settings.
            PlatformKind::Aws => Some(Platform::Aws(decode_or_placeholder(node, field, diags))),
            PlatformKind::Azure => Some(Platform::Azure(decode_or_placeholder(node, field, diags))),
            PlatformKind::Gcp => Some(Platform::Gcp(decode_or_placeholder(node, field, diags))),
            PlatformKind::Nutanix => Some(Platform::Nutanix(decode_or_placeholder(node, field, diags))),
            PlatformKind::Vsphere => Some(Platform::Vsphere(decode_or_placeholder(node, field, diags))),
            // `none: {}` takes no settings; reading it as a mapping reports any keys under it.
            PlatformKind::None => Fields::new(node, field, diags).map(|f| {
                f.finish(diags);
                Platform::None
            }),
        }
    }
}

impl Decode for Platform {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let mut f = Fields::new(node, field, diags)?;
        let mut found: Vec<(PlatformKind, Option<Platform>)> = Vec::new();
        for kind in PlatformKind::ALL {
            if !f.has(kind.key()) {
                f.node(kind.key()); // known, for the unknown-key check
                continue;
            }
            // `aws:` with nothing after it is an empty mapping: its required fields are reported missing.
            let path = f.path(kind.key());
            let platform = f.node_or_null(kind.key()).and_then(|n| Platform::decode_kind(kind, n, &path, diags));
            found.push((kind, platform));
        }
        let loc = f.loc().clone();
        f.finish(diags);
        let expected = format!("exactly one of: {}", PlatformKind::listed());
        match found.len() {
            1 => found.pop().and_then(|(_, p)| p),
            0 => {
                diags.push(Diagnostic::error(&loc, field, "no platform given").expected(expected));
                None
            }
            _ => {
                let names: Vec<&str> = found.iter().map(|(k, _)| k.key()).collect();
                diags.push(
                    Diagnostic::error(&loc, field, format!("more than one platform given: {}", names.join(", ")))
                        .expected(expected),
                );
                None
            }
        }
    }
}

/// `aws: {...}`; `none: {}`.
impl Written for Platform {
    fn write<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        match self {
            Platform::Aws(p) => m.serialize_entry(self.name(), &AsWritten(p))?,
            Platform::Azure(p) => m.serialize_entry(self.name(), &AsWritten(p))?,
            Platform::Gcp(p) => m.serialize_entry(self.name(), &AsWritten(p))?,
            Platform::Nutanix(p) => m.serialize_entry(self.name(), &AsWritten(p))?,
            Platform::Vsphere(p) => m.serialize_entry(self.name(), &AsWritten(p))?,
            Platform::None => m.serialize_entry(self.name(), &std::collections::BTreeMap::<(), ()>::new())?,
        }
        m.end()
    }
}

/// `replicas` of a MachineSet: a count, or `auto`: `spec.replicas` is left out of the rendered MachineSet so that a
/// MachineAutoscaler (or a person) owns it and a GitOps sync never resets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replicas {
    /// At most `i32::MAX`: MachineSet `spec.replicas` is an int32.
    Count(u32),
    Auto,
}

/// As written: a number, or the string `auto` (the inputs digest reads this).
impl Serialize for Replicas {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Replicas::Count(n) => s.serialize_u32(*n),
            Replicas::Auto => s.serialize_str("auto"),
        }
    }
}

impl Decode for Replicas {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let expected = format!(
            "a whole number of Machines from 0 to {} (MachineSet replicas is an int32), or `auto` (an autoscaler owns the count)",
            i32::MAX
        );
        let written = || node.plain().unwrap_or_default().to_string();
        let problem = match &node.value {
            Value::Str(s) if s == "auto" => return Some(Replicas::Auto),
            Value::Int(i, _) => match u32::try_from(*i) {
                Ok(n) if n <= i32::MAX as u32 => return Some(Replicas::Count(n)),
                _ if *i < 0 => format!("{i} is negative"),
                _ => format!("{i} is more than a MachineSet can hold"),
            },
            // Whole numbers beyond 64 bits arrive as floats; the digits written say what the user meant.
            v if OddWholeNumber::of(v).is_some() => {
                OddWholeNumber::of(v).map(|o| o.problem("is more than a MachineSet can hold")).unwrap_or_default()
            }
            Value::Str(s) => format!("`{}` is not a whole number", s.escape_debug()),
            Value::Seq(_) => "expected a number or `auto`, found a list".to_string(),
            Value::Map(_) => "expected a number or `auto`, found a mapping".to_string(),
            Value::Null => "expected a number or `auto`, found null".to_string(),
            Value::Tagged(t) => {
                let d = Diagnostic::error(
                    &node.loc,
                    field,
                    format!("expected a number or `auto`, found a value tagged `{}`", t.tag),
                );
                diags.push(d.expected(expected).hint(super::yaml::tag_hint(&t.tag)));
                return None;
            }
            Value::Bool(..) | Value::Float(..) => format!("`{}` is not a whole number", written()),
        };
        diags.push(Diagnostic::error(&node.loc, field, problem).expected(expected));
        None
    }
}

impl Decode for WindowsVersion {
    fn decode(node: Node, field: &str, diags: &mut Diagnostics) -> Option<Self> {
        let loc = node.loc.clone();
        let s = String::decode(node, field, diags)?;
        let v = WindowsVersion::parse(&s);
        if v.is_none() {
            diags.push(
                Diagnostic::error(&loc, field, format!("unknown Windows Server version `{s}`"))
                    .expected("\"2019\", \"2022\" or \"2025\""),
            );
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn decode(name: &str, text: &str) -> ClusterInputs {
        let file: Arc<str> = Arc::from(name);
        let node = super::super::yaml::parse(&file, &Arc::from(text)).unwrap();
        let mut diags = Diagnostics::default();
        let inputs = decode_document(node, &mut diags).unwrap();
        assert!(!diags.has_errors(), "{name}: {}", diags.render_human());
        inputs
    }

    /// The written form loses nothing: every example, written and read back, means the same (the digest's form),
    /// and keeps the keys in declaration order.
    #[test]
    fn every_example_reads_back_the_same_once_written() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for kind in PlatformKind::ALL {
            let path = root.join("examples").join(kind.key()).join("wmrender.yaml");
            let inputs = decode(kind.key(), &std::fs::read_to_string(&path).unwrap());
            let written = serde_saphyr::to_string(&AsWritten(&inputs)).unwrap();
            assert!(written.starts_with("apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n"));
            let again = decode("written", &written);
            assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(&inputs).unwrap(), "{written}");
        }
    }

    /// What "unset" leaves out, and what it keeps: an empty list that means something is written.
    #[test]
    fn unset_fields_are_left_out_and_meaningful_empty_lists_kept() {
        let text = "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n  name: x\nspec:\n  \
                    infrastructureID: x-1\n  apiServerInternalURL: https://api-int.x:6443\n  platform:\n    gcp:\n      \
                    projectID: p\n      region: r\n      tags: []\n  byoh: []\n  operator:\n    install: false\n";
        let written = serde_saphyr::to_string(&AsWritten(&decode("t", text))).unwrap();
        assert_eq!(
            written,
            "apiVersion: wmrender.dev/v1alpha1\nkind: ClusterInputs\nmetadata:\n  name: x\nspec:\n  \
             infrastructureID: x-1\n  apiServerInternalURL: https://api-int.x:6443\n  platform:\n    gcp:\n      \
             projectID: p\n      region: r\n      tags: []\n  byoh: []\n"
        );
    }
}
