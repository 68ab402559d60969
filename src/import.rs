//! `wmrender import`: a starting `wmrender.yaml` from `oc get -o yaml` dumps of a cluster (`--from-dir`), or from
//! the same objects read from a live cluster (`--kubeconfig`, see `cluster.rs`):
//! Infrastructure, the Network config and operator objects, Proxy, IDMS/ITMS (written beside the inputs and
//! referenced as files), and the Linux worker MachineSets, whose network, placement and identity settings the
//! Windows MachineSets copy. The result is a starting point to review, not a finished file.

use crate::diagnostics::Loc;
use crate::error::Error;
use crate::inputs::schema::{
    self, AsWritten, Aws, Azure, ClusterInputs, Gcp, MachineSetInput, Metadata, Nutanix, NutanixId, Placeholder,
    Platform, Proxy, Replicas, Spec, Vsphere,
};
use crate::inputs::yaml::Located;
use crate::windows::WindowsVersion;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub struct ImportOptions {
    /// Where the objects came from, for the header comment and messages (a directory or a kubeconfig).
    pub source: String,
    /// The Windows image: AMI ID, Azure image, GCP image, Nutanix image name or vSphere template.
    pub image: Option<String>,
    /// The public key (one OpenSSH line) the rendered `windows-user-data` Secret authorises; no cluster object
    /// holds it. Checked by validation like any typed-in value.
    pub ssh_public_key: Option<String>,
}

/// What import writes: the inputs text and the mirror files it references (relative path → text).
pub struct Imported {
    pub inputs: String,
    pub mirror_files: Vec<(String, String)>,
}

/// Every object of every YAML/JSON file in `dir`, Lists flattened, in file-name order.
pub fn objects_from_dir(dir: &Path) -> Result<Vec<Value>, Error> {
    // The dump directory as `oc get` writes it: its own files (symlinks followed), not its subdirectories.
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).min_depth(1).max_depth(1).follow_links(true).sort_by_file_name() {
        let entry = entry.map_err(|e| match e.io_error().map(std::io::Error::kind) {
            // A directory that is not there is a wrong command line, not a failure.
            Some(std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
                Error::Usage(format!("--from-dir {}: no such directory", dir.display()))
            }
            _ => Error::Operational(format!(
                "reading {}: {}",
                dir.display(),
                e.io_error().map_or_else(|| "its symbolic links form a loop".into(), crate::error::io_reason)
            )),
        })?;
        let path = entry.path();
        if entry.file_type().is_file() && path.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json") {
            files.push(path.to_path_buf());
        }
    }
    let mut out = Vec::new();
    for f in files {
        // Read as every other YAML wmrender reads (comments, tags and aliases alike); a dump that is not text or
        // not YAML is bad input, said in wmrender's words at its place.
        let file: std::sync::Arc<str> = std::sync::Arc::from(f.display().to_string());
        let mut diags = crate::diagnostics::Diagnostics::default();
        let bytes = std::fs::read(&f).map_err(|e| Error::io(format!("reading {}", f.display()), e))?;
        let text = crate::inputs::yaml::utf8_text(&file, bytes, &mut diags).map_err(|e| {
            let mut diags = diags.clone();
            diags.push(e.diagnostic(&f.display().to_string(), &Loc::file_only(&file), ""));
            Error::Invalid(diags)
        })?;
        let docs = crate::inputs::yaml::parse_all(&file, &text).map_err(|d| {
            let mut diags = diags.clone();
            diags.push(d);
            Error::Invalid(diags)
        })?;
        let docs: Vec<Value> = docs.iter().map(json).collect();
        for doc in docs {
            if doc["kind"] == "List" {
                out.extend(doc["items"].as_array().cloned().unwrap_or_default());
            } else if doc.is_object() {
                out.push(doc);
            }
        }
    }
    Ok(out)
}

/// A dumped object as JSON, the form import reads objects in (also what `--kubeconfig` fetches). A tagged value
/// counts as what it tags: `oc get` writes no tags, and import only copies plain fields.
fn json(node: &crate::inputs::yaml::Node) -> Value {
    use crate::inputs::yaml::Value as Y;
    fn of(value: &Y) -> Value {
        match value {
            Y::Null => Value::Null,
            Y::Bool(b, _) => Value::Bool(*b),
            Y::Int(i, _) => Value::from(*i),
            Y::Float(f, _) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Y::Str(s) => Value::String(s.clone()),
            Y::Seq(items) => Value::Array(items.iter().map(|i| of(&i.value)).collect()),
            // A key given twice keeps its first value, as the inputs' readers report it.
            Y::Map(entries) => {
                let mut object = serde_json::Map::new();
                for (k, v) in entries {
                    object.entry(k.name.to_string()).or_insert_with(|| of(&v.value));
                }
                Value::Object(object)
            }
            Y::Tagged(t) => of(&t.value),
        }
    }
    of(&node.value)
}

fn find<'a>(objs: &'a [Value], group: &str, kind: &str) -> Option<&'a Value> {
    objs.iter().find(|o| o["kind"] == kind && o["apiVersion"].as_str().is_some_and(|a| a.starts_with(group)))
}

fn s(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn cidrs(v: &Value) -> Option<Vec<String>> {
    let list: Vec<String> = v.as_array()?.iter().filter_map(|e| s(&e["cidr"]).or_else(|| s(e))).collect();
    (!list.is_empty()).then_some(list)
}

/// The first `tag:Name` filter value of an AWS resource reference.
fn tag_name(reference: &Value) -> Option<String> {
    reference["filters"].as_array()?.iter().find(|f| f["name"] == "tag:Name").and_then(|f| s(&f["values"][0]))
}

/// Where what import writes comes from: every value is at one generated location, under its own field path.
struct Make {
    loc: Loc,
}

impl Make {
    fn at<T>(&self, field: impl Into<String>, value: T) -> Located<T> {
        Located { value, loc: self.loc.clone(), field: field.into().into() }
    }

    /// A value import may lack: `None` stays unset.
    fn opt<T>(&self, field: impl Into<String>, value: Option<T>) -> Option<Located<T>> {
        value.map(|v| self.at(field, v))
    }

    /// A mapping with every field unset, its fields at their paths under `field`; import then sets what it knows,
    /// so a field the schema gains stays unset here without import naming it.
    fn unset<T: Placeholder>(&self, field: &str) -> T {
        T::placeholder(&self.loc, field)
    }

    fn strings(&self, field: &str, values: Option<Vec<String>>) -> Option<Vec<Located<String>>> {
        values.map(|v| v.into_iter().enumerate().map(|(i, s)| self.at(format!("{field}[{i}]"), s)).collect())
    }
}

/// A number the schema holds as `u32`, from a cluster object.
fn small(v: &Value, what: &str, source: &str) -> Result<Option<u32>, Error> {
    match v.as_u64() {
        None => Ok(None),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| Error::Usage(format!("{source}: the cluster's {what} is {n}, more than wmrender can hold"))),
    }
}

/// The proxy settings of one half (spec or status) of the cluster's Proxy object.
struct ProxyFields {
    http: Option<String>,
    https: Option<String>,
    no_proxy: Vec<String>,
}

impl ProxyFields {
    fn read(v: &Value) -> ProxyFields {
        let no_proxy = s(&v["noProxy"])
            .map(|n| n.split(',').map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect())
            .unwrap_or_default();
        ProxyFields { http: s(&v["httpProxy"]), https: s(&v["httpsProxy"]), no_proxy }
    }

    fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none() && self.no_proxy.is_empty()
    }
}

/// The cluster's proxy: its status when the dump has one (the network operator's result, which WMCO gives its
/// services: the spec plus the cluster's own addresses), else its spec. Also the header lines that say how the
/// status differs from the spec; they never show a proxy URL, which may carry credentials.
fn proxy(objs: &[Value], make: &Make) -> (Option<Proxy>, Vec<String>) {
    let Some(object) = find(objs, "config.openshift.io/", "Proxy") else { return (None, vec![]) };
    let spec = ProxyFields::read(&object["spec"]);
    let status = ProxyFields::read(&object["status"]);
    // Differences in what the entries are, not in their order (the status is sorted).
    let mut notes = Vec::new();
    if !status.is_empty() {
        for (key, differs) in [("httpProxy", status.http != spec.http), ("httpsProxy", status.https != spec.https)] {
            if differs {
                notes.push(format!("#   {key}: the status differs from the spec; the status is written"));
            }
        }
        let listed = |of: &[String], less: &[String]| -> String {
            let missing: BTreeSet<&String> = of.iter().filter(|e| !less.contains(e)).collect();
            missing.into_iter().map(String::as_str).collect::<Vec<_>>().join(", ")
        };
        for (what, entries) in [
            ("adds", listed(&status.no_proxy, &spec.no_proxy)),
            ("leaves out", listed(&spec.no_proxy, &status.no_proxy)),
        ] {
            if !entries.is_empty() {
                notes.push(format!("#   noProxy: the status {what} {entries}"));
            }
        }
        if !notes.is_empty() {
            notes.insert(
                0,
                "# proxy: from the cluster Proxy's status, which the cluster's services (and WMCO's) use; it differs \
                 from the Proxy's spec:"
                    .to_string(),
            );
        }
    }
    let used = if status.is_empty() { spec } else { status };
    if used.http.is_none() && used.https.is_none() {
        return (None, notes);
    }
    let mut proxy: Proxy = make.unset("spec.proxy");
    proxy.http_proxy = make.opt("spec.proxy.httpProxy", used.http);
    proxy.https_proxy = make.opt("spec.proxy.httpsProxy", used.https);
    proxy.no_proxy =
        used.no_proxy.into_iter().enumerate().map(|(i, e)| make.at(format!("spec.proxy.noProxy[{i}]"), e)).collect();
    (Some(proxy), notes)
}

pub fn import(objs: &[Value], opts: &ImportOptions) -> Result<Imported, Error> {
    let infra = find(objs, "config.openshift.io/", "Infrastructure").ok_or_else(|| {
        Error::Usage(format!("{}: no Infrastructure object (oc get infrastructure cluster -o yaml)", opts.source))
    })?;
    let infra_id = s(&infra["status"]["infrastructureName"])
        .ok_or_else(|| Error::Usage(format!("{}: the Infrastructure has no status.infrastructureName", opts.source)))?;
    let api_url = s(&infra["status"]["apiServerInternalURI"]).ok_or_else(|| {
        Error::Usage(format!("{}: the Infrastructure has no status.apiServerInternalURI", opts.source))
    })?;
    let kind =
        s(&infra["status"]["platformStatus"]["type"]).or_else(|| s(&infra["status"]["platform"])).unwrap_or_default();
    let workers: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "MachineSet")
        .filter(|o| {
            o["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/cluster-api-machine-role"] == "worker"
        })
        .filter(|o| o["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] != "Windows")
        .collect();
    let worker = workers.first().map(|w| &w["spec"]["template"]["spec"]["providerSpec"]["value"]);
    let need_worker = || {
        Error::Usage(format!(
            "{}: no Linux worker MachineSet to copy network settings from (oc get machinesets -n openshift-machine-api -o yaml)",
            opts.source
        ))
    };
    let need_image = |what: &str| Error::Usage(format!("platform {kind} needs --image: the Windows {what}"));
    let missing = |what: &str| Error::Usage(format!("{}: the {kind} cluster's objects give no {what}", opts.source));
    let zones = |path: &[&str]| -> Vec<String> {
        let mut z: Vec<String> = workers
            .iter()
            .filter_map(|w| s(path.iter().fold(&w["spec"]["template"]["spec"]["providerSpec"]["value"], |v, k| &v[*k])))
            .collect();
        z.sort();
        z.dedup();
        z
    };
    let make = Make { loc: schema::generated(&format!("wmrender import from {}", opts.source)) };
    // One Windows MachineSet per entry: (name, zone).
    let mut sets: Vec<(Option<String>, Option<String>)> = Vec::new();

    let platform = match kind.as_str() {
        "AWS" => {
            let w = worker.ok_or_else(need_worker)?;
            let zone = s(&w["placement"]["availabilityZone"]).unwrap_or_default();
            let at = |key: &str| format!("spec.platform.aws.{key}");
            let mut p: Aws = make.unset("spec.platform.aws");
            p.region.value = s(&infra["status"]["platformStatus"]["aws"]["region"])
                .or_else(|| s(&w["placement"]["region"]))
                .ok_or_else(|| {
                    missing(
                        "region (Infrastructure status.platformStatus.aws.region, or the workers' placement.region)",
                    )
                })?;
            let ami =
                opts.image.clone().ok_or_else(|| need_image("AMI ID (Windows_Server-2022-English-Core-Base-*)"))?;
            p.ami = Some(make.at(at("ami"), ami));
            p.instance_type = make.opt(at("instanceType"), s(&w["instanceType"]));
            p.iam_instance_profile = make.opt(at("iamInstanceProfile"), s(&w["iamInstanceProfile"]["id"]));
            let groups: Vec<String> =
                w["securityGroups"].as_array().into_iter().flatten().filter_map(tag_name).collect();
            p.security_groups = make.strings(&at("securityGroups"), (!groups.is_empty()).then_some(groups));
            p.subnet = make.opt(
                at("subnet"),
                tag_name(&w["subnet"]).map(|t| if zone.is_empty() { t } else { t.replace(&zone, "{zone}") }),
            );
            sets.extend(zones(&["placement", "availabilityZone"]).into_iter().map(|z| (None, Some(z))));
            Platform::Aws(p)
        }
        "Azure" => {
            let w = worker.ok_or_else(need_worker)?;
            let azure = &infra["status"]["platformStatus"]["azure"];
            let at = |key: &str| format!("spec.platform.azure.{key}");
            let mut p: Azure = make.unset("spec.platform.azure");
            p.location.value = s(&w["location"]).ok_or_else(|| missing("location (the worker's providerSpec)"))?;
            p.resource_group =
                make.opt(at("resourceGroup"), s(&w["resourceGroup"]).or_else(|| s(&azure["resourceGroupName"])));
            p.network_resource_group = make.opt(
                at("networkResourceGroup"),
                s(&w["networkResourceGroup"]).or_else(|| s(&azure["networkResourceGroupName"])),
            );
            p.vnet = make.opt(at("vnet"), s(&w["vnet"]));
            p.subnet = make.opt(at("subnet"), s(&w["subnet"]));
            p.vm_size = make.opt(at("vmSize"), s(&w["vmSize"]));
            p.image = make.opt(at("image"), opts.image.clone());
            p.public_load_balancer = make.opt(at("publicLoadBalancer"), s(&w["publicLoadBalancer"]));
            p.managed_identity = make.opt(at("managedIdentity"), s(&w["managedIdentity"]));
            let zs = zones(&["zone"]);
            if zs.is_empty() {
                sets.push((Some("winworker".into()), None));
            }
            // At most 9 characters on Azure.
            sets.extend(zs.into_iter().map(|z| (Some(format!("winwork{z}").chars().take(9).collect()), Some(z))));
            Platform::Azure(p)
        }
        "GCP" => {
            let gcp = &infra["status"]["platformStatus"]["gcp"];
            let at = |key: &str| format!("spec.platform.gcp.{key}");
            let mut p: Gcp = make.unset("spec.platform.gcp");
            p.project_id.value = s(&gcp["projectID"])
                .ok_or_else(|| missing("project (Infrastructure status.platformStatus.gcp.projectID)"))?;
            p.region.value =
                s(&gcp["region"]).ok_or_else(|| missing("region (Infrastructure status.platformStatus.gcp.region)"))?;
            if let Some(w) = worker {
                p.machine_type = make.opt(at("machineType"), s(&w["machineType"]));
                p.network = make.opt(at("network"), s(&w["networkInterfaces"][0]["network"]));
                p.subnetwork = make.opt(at("subnetwork"), s(&w["networkInterfaces"][0]["subnetwork"]));
                p.service_account_email = make.opt(at("serviceAccountEmail"), s(&w["serviceAccounts"][0]["email"]));
                let tags = w["tags"].as_array().map(|a| a.iter().filter_map(s).collect());
                p.tags = make.strings(&at("tags"), tags);
            }
            p.image = make.opt(at("image"), opts.image.clone());
            sets.extend(zones(&["zone"]).into_iter().map(|z| (None, Some(z))));
            Platform::Gcp(p)
        }
        "VSphere" => {
            let w = worker.ok_or_else(need_worker)?;
            let ws = &w["workspace"];
            let at = |key: &str| format!("spec.platform.vsphere.{key}");
            let mut p: Vsphere = make.unset("spec.platform.vsphere");
            p.server.value = s(&ws["server"]).ok_or_else(|| missing("vCenter server (the worker's workspace)"))?;
            p.datacenter.value = s(&ws["datacenter"]).ok_or_else(|| missing("datacenter (the worker's workspace)"))?;
            p.datastore.value = s(&ws["datastore"]).ok_or_else(|| missing("datastore (the worker's workspace)"))?;
            p.folder = make.opt(at("folder"), s(&ws["folder"]));
            p.resource_pool = make.opt(at("resourcePool"), s(&ws["resourcePool"]));
            p.network.value = s(&w["network"]["devices"][0]["networkName"])
                .ok_or_else(|| missing("VM network (the worker's network.devices)"))?;
            let template = opts
                .image
                .clone()
                .ok_or_else(|| need_image("golden-image template (see WMCO's vsphere-golden-image docs)"))?;
            p.template = Some(make.at(at("template"), template));
            p.num_cpus = make.opt(at("numCPUs"), small(&w["numCPUs"], "numCPUs", &opts.source)?);
            p.num_cores_per_socket =
                make.opt(at("numCoresPerSocket"), small(&w["numCoresPerSocket"], "numCoresPerSocket", &opts.source)?);
            p.memory_mib = make.opt(at("memoryMiB"), small(&w["memoryMiB"], "memoryMiB", &opts.source)?);
            p.disk_gib = make.opt(at("diskGiB"), small(&w["diskGiB"], "diskGiB", &opts.source)?);
            sets.push((Some("winworker".into()), None));
            Platform::Vsphere(p)
        }
        "Nutanix" => {
            let w = worker.ok_or_else(need_worker)?;
            let id = |v: &Value, field: String| -> Option<NutanixId> {
                let mut id: NutanixId = make.unset(&field);
                match v["type"].as_str()? {
                    "uuid" => id.uuid = Some(make.at(format!("{field}.uuid"), s(&v["uuid"])?)),
                    _ => id.name = Some(make.at(format!("{field}.name"), s(&v["name"])?)),
                }
                Some(id)
            };
            let mut p: Nutanix = make.unset("spec.platform.nutanix");
            p.cluster = id(&w["cluster"], "spec.platform.nutanix.cluster".into())
                .ok_or_else(|| missing("Prism Element cluster (the worker's providerSpec cluster)"))?;
            p.subnets.value = w["subnets"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(i, v)| id(v, format!("spec.platform.nutanix.subnets[{i}]")))
                .collect();
            let image = opts.image.clone().ok_or_else(|| need_image("image name in Prism"))?;
            p.image = Some(make.at("spec.platform.nutanix.image", image));
            sets.push((None, None));
            Platform::Nutanix(p)
        }
        other => {
            return Err(Error::Usage(format!(
                "{}: platform `{}`: import handles AWS, Azure, GCP, vSphere and Nutanix; for BYOH-only clusters start \
                 from examples/none/wmrender.yaml",
                opts.source,
                other.escape_debug()
            )));
        }
    };

    let mut spec: Spec = make.unset("spec");
    spec.infrastructure_id.value = infra_id.clone();
    spec.api_server_internal_url.value = api_url;
    spec.platform.value = platform;
    spec.windows_version = Some(make.at("spec.windowsVersion", WindowsVersion::V2022));
    // Every platform import handles has Machines, whose user data authorises this key (without the operator,
    // which is what import writes).
    let key = opts.ssh_public_key.clone().ok_or_else(|| {
        Error::Usage(format!(
            "platform {kind} needs --ssh-public-key: the public key (e.g. ~/.ssh/id_ed25519.pub) the Windows Machines' \
             user data authorises, the public half of the key sync connects with"
        ))
    })?;
    spec.ssh_public_key = Some(make.at("spec.sshPublicKey", key));
    spec.machine_sets = sets
        .into_iter()
        .enumerate()
        .map(|(i, (name, zone))| {
            let field = format!("spec.machineSets[{i}]");
            let mut set: MachineSetInput = make.unset(&field);
            set.name = make.opt(format!("{field}.name"), name);
            set.zone = make.opt(format!("{field}.zone"), zone);
            set.replicas = Some(make.at(format!("{field}.replicas"), Replicas::Count(1)));
            set
        })
        .collect();

    let net_config = find(objs, "config.openshift.io/", "Network");
    let net_operator = find(objs, "operator.openshift.io/", "Network");
    let hybrid = net_operator.map(|n| &n["spec"]["defaultNetwork"]["ovnKubernetesConfig"]["hybridOverlayConfig"]);
    let network = &mut spec.network;
    network.service_network =
        make.strings("spec.network.serviceNetwork", net_config.and_then(|n| cidrs(&n["spec"]["serviceNetwork"])));
    network.cluster_network =
        make.strings("spec.network.clusterNetwork", net_config.and_then(|n| cidrs(&n["spec"]["clusterNetwork"])));
    network.hybrid_cluster_network =
        make.strings("spec.network.hybridClusterNetwork", hybrid.and_then(|h| cidrs(&h["hybridClusterNetwork"])));
    let port = match hybrid {
        Some(h) => small(&h["hybridOverlayVXLANPort"], "hybridOverlayVXLANPort", &opts.source)?,
        None => None,
    };
    network.hybrid_overlay_vxlan_port = make.opt("spec.network.hybridOverlayVXLANPort", port);
    let (proxy, proxy_notes) = proxy(objs, &make);
    spec.proxy = proxy;

    // Mirror sets go beside the inputs as real objects, trimmed to what the API defines.
    let mut mirror_files = Vec::new();
    for o in objs.iter().filter(|o| o["kind"] == "ImageDigestMirrorSet" || o["kind"] == "ImageTagMirrorSet") {
        let name = s(&o["metadata"]["name"]).unwrap_or_else(|| "mirrors".into());
        let clean = serde_json::json!({"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": {"name": name}, "spec": o["spec"]});
        let file = format!("mirrors/{}-{}.yaml", o["kind"].as_str().unwrap_or("").to_ascii_lowercase(), name);
        mirror_files.push((file, to_yaml(&clean)?));
    }
    mirror_files.sort();
    spec.mirrors.files = mirror_files
        .iter()
        .enumerate()
        .map(|(i, (f, _))| make.at(format!("spec.mirrors.files[{i}]"), f.clone()))
        .collect();

    // The infrastructure ID less its random suffix: `prod-east-7xk2p` → `prod-east`.
    let mut metadata: Metadata = make.unset("metadata");
    metadata.name.value = infra_id.rsplit_once('-').map(|(n, _)| n).unwrap_or(&infra_id).to_ascii_lowercase();
    let inputs = ClusterInputs { metadata, spec };
    let mut header = format!(
        "# Imported by `wmrender import` from {} ({} Linux worker MachineSet(s) copied).\n\
         # A starting point: review every value, set replicas and windowsVersion, then `wmrender validate`.\n",
        opts.source,
        workers.len()
    );
    for line in proxy_notes {
        header.push_str(&line);
        header.push('\n');
    }
    Ok(Imported { inputs: header + &to_yaml(&AsWritten(&inputs))?, mirror_files })
}

/// YAML text of what import builds: plain strings, numbers and lists, which always serialise.
fn to_yaml(value: &impl Serialize) -> Result<String, Error> {
    // Plain scalars: a long one-line value (a public key) stays on one line rather than folded into a block.
    let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
    serde_saphyr::to_string_with_options(value, options)
        .map_err(|e| Error::Operational(format!("cannot write YAML: {e}")))
}

/// The key line of an OpenSSH public key file (`.pub`, or an authorized_keys file: its first key line). A private
/// key is refused before anything is written, and its bytes are never echoed.
pub fn read_public_key(path: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Usage(format!("--ssh-public-key {}: {}", path.display(), crate::error::io_reason(&e))))?;
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("PRIVATE KEY") {
        return Err(Error::Usage(format!(
            "--ssh-public-key {}: this is a private key; give its public half (the .pub file beside it)",
            path.display()
        )));
    }
    text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).ok_or_else(|| {
        Error::Usage(format!(
            "--ssh-public-key {}: no key line in the file (expected `ssh-ed25519 AAAA…`)",
            path.display()
        ))
    })
}

/// Writes the inputs file and its mirror files. Refuses to overwrite existing files unless `force`.
pub fn write(imported: &Imported, output: &Path, force: bool) -> Result<Vec<PathBuf>, Error> {
    let base = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut targets: Vec<(PathBuf, &str)> = vec![(output.to_path_buf(), imported.inputs.as_str())];
    targets.extend(imported.mirror_files.iter().map(|(rel, text)| (base.join(rel), text.as_str())));
    if !force && let Some((existing, _)) = targets.iter().find(|(p, _)| p.exists()) {
        return Err(Error::Usage(format!("{} exists; pass --force to overwrite it", existing.display())));
    }
    for (path, text) in &targets {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        std::fs::write(path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(targets.into_iter().map(|(p, _)| p).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy_of(object: Value) -> (Option<Proxy>, Vec<String>) {
        let make = Make { loc: schema::generated("test") };
        let mut object = object;
        object["apiVersion"] = "config.openshift.io/v1".into();
        object["kind"] = "Proxy".into();
        proxy(&[object], &make)
    }

    fn no_proxy(p: &Proxy) -> Vec<&str> {
        p.no_proxy.iter().map(|e| e.value.as_str()).collect()
    }

    #[test]
    fn without_a_status_the_spec_is_imported_and_nothing_is_said() {
        let (p, notes) =
            proxy_of(serde_json::json!({"spec": {"httpProxy": "http://p:3128", "noProxy": "a.example.com, .corp"}}));
        let p = p.unwrap();
        assert_eq!(p.http_proxy.as_ref().map(|v| v.value.as_str()), Some("http://p:3128"));
        assert_eq!(no_proxy(&p), ["a.example.com", ".corp"]);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(proxy_of(serde_json::json!({"spec": {"noProxy": "a"}})).0.map(|p| p.no_proxy.len()), None);
    }

    #[test]
    fn the_status_wins_and_its_differences_are_said_without_the_urls() {
        let (p, notes) = proxy_of(serde_json::json!({
            "spec": {"httpProxy": "http://user:secret@old:3128", "noProxy": "a,gone"},
            "status": {"httpProxy": "http://new:3128", "noProxy": "a,localhost"},
        }));
        let p = p.unwrap();
        assert_eq!(p.http_proxy.as_ref().map(|v| v.value.as_str()), Some("http://new:3128"));
        assert_eq!(no_proxy(&p), ["a", "localhost"]);
        let said = notes.join("\n");
        assert!(said.contains("httpProxy: the status differs from the spec"), "{said}");
        assert!(said.contains("the status adds localhost") && said.contains("leaves out gone"), "{said}");
        assert!(!said.contains("secret") && !said.contains("new:3128"), "no proxy URL in a comment: {said}");
        // An empty status (the network operator has not filled it yet) is no status: the spec is imported.
        let (p, notes) = proxy_of(serde_json::json!({"spec": {"httpProxy": "http://p:3128"}, "status": {}}));
        assert!(p.is_some() && notes.is_empty());
        // The status is sorted; the same entries in another order are no difference.
        let (_, notes) = proxy_of(serde_json::json!({
            "spec": {"httpProxy": "http://p:3128", "noProxy": "b,a"},
            "status": {"httpProxy": "http://p:3128", "noProxy": "a,b"},
        }));
        assert!(notes.is_empty(), "{notes:?}");
    }
}
