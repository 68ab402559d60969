//! Stage 4: pure functions from the [`Plan`] to files. No clock, environment or I/O; maps are BTreeMaps, so the
//! same plan gives the same bytes on every machine.

mod byoh;
pub mod cloud_node_manager;
mod containerd;
pub mod controller;
pub mod exporter;
mod kustomization;
pub mod machineset;
pub mod manifest;
pub mod monitoring;
pub mod node;
mod object;
mod operator;
pub mod registries;
mod runtimeclass;
mod templates;
pub mod user_data;
pub mod yaml;

use crate::plan::Plan;
pub use object::{ClusterObject, MANAGED_BY};

/// One rendered file. `path` is relative to the output directory and always uses `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Everything one render produces.
#[derive(Clone, Debug)]
pub struct ArtifactSet {
    /// Cluster objects in apply order (see [`ClusterObject::order`]); the `--stdout` stream prints these.
    pub objects: Vec<ClusterObject>,
    /// Every file of the output tree except `manifest.json`, sorted by path: `cluster/…` and the node bundle
    /// `node/…` (path under `node/` = path on the Windows node).
    pub files: Vec<Artifact>,
}

/// Renders every artifact of the plan.
pub fn render(plan: &Plan) -> ArtifactSet {
    let mut objects = Vec::new();
    objects.extend(operator::render(plan));
    objects.extend(runtimeclass::render(plan));
    objects.extend(user_data::render(plan));
    objects.extend(machineset::render(plan));
    objects.extend(byoh::render(plan));
    objects.extend(exporter::namespace(plan));
    objects.extend(exporter::render(plan));
    objects.extend(monitoring::render(plan));
    objects.extend(cloud_node_manager::render(plan));

    let cluster_files = |objects: &[ClusterObject]| -> Vec<Artifact> {
        objects
            .iter()
            .map(|o| Artifact { path: format!("cluster/{}", o.file_name()), bytes: o.yaml.clone().into_bytes() })
            .collect()
    };
    let mut files = cluster_files(&objects);
    files.push(containerd::render(plan));
    files.extend(registries::render(plan));
    files.extend(node::render(plan));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    // The controller's bundle ConfigMaps carry the node bundle rendered above.
    let controller = controller::render(plan, &files);
    files.extend(cluster_files(&controller));
    objects.extend(controller);
    objects.sort_by(|a, b| (a.order, &a.name, &a.namespace).cmp(&(b.order, &b.name, &b.namespace)));
    files.push(kustomization::render(&objects));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    ArtifactSet { objects, files }
}

/// The cluster objects as one `---`-separated YAML stream, in apply order: what Argo CD's plugin reads.
pub fn stream(objects: &[ClusterObject]) -> String {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&o.yaml);
    }
    out
}
