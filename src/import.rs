//! `wmrender import`: a starting `wmrender.yaml` from `oc get -o yaml` dumps of a cluster (`--from-dir`), or from
//! the same objects read from a live cluster (`--kubeconfig`, see `cluster.rs`):
//! Infrastructure, the Network config and operator objects, Proxy, IDMS/ITMS (written beside the inputs and
//! referenced as files), and the Linux worker MachineSets, whose network, placement and identity settings the
//! Windows MachineSets copy. The result is a starting point to review, not a finished file.

use crate::error::Error;
use crate::inputs::schema::PlatformKind;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct ImportOptions {
    /// Where the objects came from, for the header comment and messages (a directory or a kubeconfig).
    pub source: String,
    /// The Windows image: AMI ID, Azure image, GCP image, Nutanix image name or vSphere template.
    pub image: Option<String>,
}

/// What import writes: the inputs text and the mirror files it references (relative path → text).
pub struct Imported {
    pub inputs: String,
    pub mirror_files: Vec<(String, String)>,
}

/// Every object of every YAML/JSON file in `dir`, Lists flattened, in file-name order.
pub fn objects_from_dir(dir: &Path) -> Result<Vec<Value>, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| match e.kind() {
            // A dump that is not text is bad input, like any other malformed file the user hands over.
            std::io::ErrorKind::InvalidData => {
                Error::Usage(format!("{} is not UTF-8 text; give `oc get -o yaml` output (YAML or JSON)", f.display()))
            }
            _ => Error::io(format!("reading {}", f.display()), e),
        })?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|_| {
            // Say what is wrong in wmrender's words, at its place.
            let file: std::sync::Arc<str> = std::sync::Arc::from(f.display().to_string());
            let mut diags = crate::diagnostics::Diagnostics::default();
            diags.add_source(&file, &std::sync::Arc::from(text.as_str()));
            if let Err(d) = crate::inputs::yaml::parse_all(&file, &text) {
                diags.push(d);
            } else {
                diags.push(crate::diagnostics::Diagnostic::error(
                    &crate::diagnostics::Loc::file_only(&file),
                    "",
                    "the file holds YAML that cannot be read as Kubernetes objects",
                ));
            }
            Error::Invalid(diags)
        })?;
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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inputs {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: Spec,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(rename = "infrastructureID")]
    infrastructure_id: String,
    #[serde(rename = "apiServerInternalURL")]
    api_server_internal_url: String,
    platform: BTreeMap<&'static str, Value>,
    windows_version: &'static str,
    machine_sets: Vec<Value>,
    network: Network,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy: Option<Proxy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mirrors: Option<Mirrors>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Network {
    #[serde(skip_serializing_if = "Option::is_none")]
    service_network: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_network: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hybrid_cluster_network: Option<Vec<String>>,
    #[serde(rename = "hybridOverlayVXLANPort", skip_serializing_if = "Option::is_none")]
    hybrid_overlay_vxlan_port: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Proxy {
    #[serde(skip_serializing_if = "Option::is_none")]
    http_proxy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    https_proxy: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    no_proxy: Vec<String>,
}

#[derive(Serialize)]
struct Mirrors {
    files: Vec<String>,
}

/// Puts `key: value` into a JSON object when the value is known.
fn put(map: &mut serde_json::Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(v) = value {
        map.insert(key.into(), v.into());
    }
}

pub fn import(objs: &[Value], opts: &ImportOptions) -> Result<Imported, Error> {
    let infra = find(objs, "config.openshift.io/", "Infrastructure").ok_or_else(|| {
        Error::Usage(format!("{}: no Infrastructure object (oc get infrastructure cluster -o yaml)", opts.source))
    })?;
    let infra_id = s(&infra["status"]["infrastructureName"])
        .ok_or_else(|| Error::Usage("the Infrastructure has no status.infrastructureName".into()))?;
    let api_url = s(&infra["status"]["apiServerInternalURI"])
        .ok_or_else(|| Error::Usage("the Infrastructure has no status.apiServerInternalURI".into()))?;
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
    let zones = |path: &[&str]| -> Vec<String> {
        let mut z: Vec<String> = workers
            .iter()
            .filter_map(|w| s(path.iter().fold(&w["spec"]["template"]["spec"]["providerSpec"]["value"], |v, k| &v[*k])))
            .collect();
        z.sort();
        z.dedup();
        z
    };

    let mut p = serde_json::Map::new();
    let mut machine_sets = Vec::new();
    let platform_key = match kind.as_str() {
        "AWS" => {
            let w = worker.ok_or_else(need_worker)?;
            let zone = s(&w["placement"]["availabilityZone"]).unwrap_or_default();
            put(
                &mut p,
                "region",
                s(&infra["status"]["platformStatus"]["aws"]["region"]).or_else(|| s(&w["placement"]["region"])),
            );
            put(
                &mut p,
                "ami",
                Some(opts.image.clone().ok_or_else(|| need_image("AMI ID (Windows_Server-2022-English-Core-Base-*)"))?),
            );
            put(&mut p, "instanceType", s(&w["instanceType"]));
            put(&mut p, "iamInstanceProfile", s(&w["iamInstanceProfile"]["id"]));
            let groups: Vec<String> =
                w["securityGroups"].as_array().into_iter().flatten().filter_map(tag_name).collect();
            put(&mut p, "securityGroups", (!groups.is_empty()).then_some(groups));
            put(
                &mut p,
                "subnet",
                tag_name(&w["subnet"]).map(|t| if zone.is_empty() { t } else { t.replace(&zone, "{zone}") }),
            );
            for z in zones(&["placement", "availabilityZone"]) {
                machine_sets.push(serde_json::json!({"zone": z, "replicas": 1}));
            }
            PlatformKind::Aws.key()
        }
        "Azure" => {
            let w = worker.ok_or_else(need_worker)?;
            let azure = &infra["status"]["platformStatus"]["azure"];
            put(&mut p, "location", s(&w["location"]));
            put(&mut p, "resourceGroup", s(&w["resourceGroup"]).or_else(|| s(&azure["resourceGroupName"])));
            put(
                &mut p,
                "networkResourceGroup",
                s(&w["networkResourceGroup"]).or_else(|| s(&azure["networkResourceGroupName"])),
            );
            put(&mut p, "vnet", s(&w["vnet"]));
            put(&mut p, "subnet", s(&w["subnet"]));
            put(&mut p, "vmSize", s(&w["vmSize"]));
            put(&mut p, "image", opts.image.clone());
            put(&mut p, "publicLoadBalancer", s(&w["publicLoadBalancer"]));
            put(&mut p, "managedIdentity", s(&w["managedIdentity"]));
            let zs = zones(&["zone"]);
            if zs.is_empty() {
                machine_sets.push(serde_json::json!({"name": "winworker", "replicas": 1}));
            }
            for z in zs {
                // At most 9 characters on Azure.
                machine_sets.push(serde_json::json!({"name": format!("winwork{z}").chars().take(9).collect::<String>(), "zone": z, "replicas": 1}));
            }
            PlatformKind::Azure.key()
        }
        "GCP" => {
            let gcp = &infra["status"]["platformStatus"]["gcp"];
            put(&mut p, "projectID", s(&gcp["projectID"]));
            put(&mut p, "region", s(&gcp["region"]));
            if let Some(w) = worker {
                put(&mut p, "machineType", s(&w["machineType"]));
                put(&mut p, "network", s(&w["networkInterfaces"][0]["network"]));
                put(&mut p, "subnetwork", s(&w["networkInterfaces"][0]["subnetwork"]));
                put(&mut p, "serviceAccountEmail", s(&w["serviceAccounts"][0]["email"]));
                put(&mut p, "tags", w["tags"].as_array().cloned());
            }
            put(&mut p, "image", opts.image.clone());
            for z in zones(&["zone"]) {
                machine_sets.push(serde_json::json!({"zone": z, "replicas": 1}));
            }
            PlatformKind::Gcp.key()
        }
        "VSphere" => {
            let w = worker.ok_or_else(need_worker)?;
            let ws = &w["workspace"];
            for key in ["server", "datacenter", "datastore", "folder", "resourcePool"] {
                put(&mut p, key, s(&ws[key]));
            }
            put(&mut p, "network", s(&w["network"]["devices"][0]["networkName"]));
            put(
                &mut p,
                "template",
                Some(
                    opts.image
                        .clone()
                        .ok_or_else(|| need_image("golden-image template (see WMCO's vsphere-golden-image docs)"))?,
                ),
            );
            for key in ["numCPUs", "numCoresPerSocket", "memoryMiB", "diskGiB"] {
                put(&mut p, key, w[key].as_u64());
            }
            machine_sets.push(serde_json::json!({"name": "winworker", "replicas": 1}));
            PlatformKind::Vsphere.key()
        }
        "Nutanix" => {
            let w = worker.ok_or_else(need_worker)?;
            let id = |v: &Value| -> Option<Value> {
                match v["type"].as_str()? {
                    "uuid" => Some(serde_json::json!({"uuid": s(&v["uuid"])?})),
                    _ => Some(serde_json::json!({"name": s(&v["name"])?})),
                }
            };
            put(&mut p, "cluster", id(&w["cluster"]));
            put(&mut p, "subnets", w["subnets"].as_array().map(|a| a.iter().filter_map(id).collect::<Vec<_>>()));
            put(&mut p, "image", Some(opts.image.clone().ok_or_else(|| need_image("image name in Prism"))?));
            machine_sets.push(serde_json::json!({"replicas": 1}));
            PlatformKind::Nutanix.key()
        }
        other => {
            return Err(Error::Usage(format!(
                "platform `{other}`: import handles AWS, Azure, GCP, vSphere and Nutanix; for BYOH-only clusters start from examples/none/wmrender.yaml"
            )));
        }
    };

    let net_config = find(objs, "config.openshift.io/", "Network");
    let net_operator = find(objs, "operator.openshift.io/", "Network");
    let hybrid = net_operator.map(|n| &n["spec"]["defaultNetwork"]["ovnKubernetesConfig"]["hybridOverlayConfig"]);
    let network = Network {
        service_network: net_config.and_then(|n| cidrs(&n["spec"]["serviceNetwork"])),
        cluster_network: net_config.and_then(|n| cidrs(&n["spec"]["clusterNetwork"])),
        hybrid_cluster_network: hybrid.and_then(|h| cidrs(&h["hybridClusterNetwork"])),
        hybrid_overlay_vxlan_port: hybrid.and_then(|h| h["hybridOverlayVXLANPort"].as_u64()),
    };
    let proxy = find(objs, "config.openshift.io/", "Proxy").map(|p| &p["spec"]).and_then(|spec| {
        let proxy = Proxy {
            http_proxy: s(&spec["httpProxy"]),
            https_proxy: s(&spec["httpsProxy"]),
            no_proxy: s(&spec["noProxy"])
                .map(|n| n.split(',').map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect())
                .unwrap_or_default(),
        };
        (proxy.http_proxy.is_some() || proxy.https_proxy.is_some()).then_some(proxy)
    });

    // Mirror sets go beside the inputs as real objects, trimmed to what the API defines.
    let mut mirror_files = Vec::new();
    for o in objs.iter().filter(|o| o["kind"] == "ImageDigestMirrorSet" || o["kind"] == "ImageTagMirrorSet") {
        let name = s(&o["metadata"]["name"]).unwrap_or_else(|| "mirrors".into());
        let clean = serde_json::json!({"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": {"name": name}, "spec": o["spec"]});
        let file = format!("mirrors/{}-{}.yaml", o["kind"].as_str().unwrap_or("").to_ascii_lowercase(), name);
        mirror_files.push((file, serde_saphyr::to_string(&clean).map_err(|e| Error::Usage(e.to_string()))?));
    }
    mirror_files.sort();

    let inputs = Inputs {
        api_version: crate::inputs::schema::API_VERSION,
        kind: crate::inputs::schema::KIND,
        // The infrastructure ID less its random suffix: `prod-east-7xk2p` → `prod-east`.
        metadata: Metadata {
            name: infra_id.rsplit_once('-').map(|(n, _)| n).unwrap_or(&infra_id).to_ascii_lowercase(),
        },
        spec: Spec {
            infrastructure_id: infra_id.clone(),
            api_server_internal_url: api_url,
            platform: [(platform_key, Value::Object(p))].into(),
            windows_version: "2022",
            machine_sets,
            network,
            proxy,
            mirrors: (!mirror_files.is_empty())
                .then(|| Mirrors { files: mirror_files.iter().map(|(f, _)| f.clone()).collect() }),
        },
    };
    let body = serde_saphyr::to_string(&inputs).map_err(|e| Error::Usage(e.to_string()))?;
    let header = format!(
        "# Imported by `wmrender import` from {} ({} Linux worker MachineSet(s) copied).\n\
         # A starting point: review every value, set replicas and windowsVersion, then `wmrender validate`.\n",
        opts.source,
        workers.len()
    );
    Ok(Imported { inputs: header + &body, mirror_files })
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
