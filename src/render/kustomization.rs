//! `cluster/kustomization.yaml`: lists every object file, sorted, so Flux and Argo CD apply exactly these files
//! and nothing else that might sit in the directory.

use super::{Artifact, ClusterObject};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Kustomization {
    api_version: &'static str,
    kind: &'static str,
    resources: Vec<String>,
}

pub fn render(objects: &[ClusterObject]) -> Artifact {
    let mut resources: Vec<String> = objects.iter().map(ClusterObject::file_name).collect();
    resources.sort();
    let k = Kustomization { api_version: "kustomize.config.k8s.io/v1beta1", kind: "Kustomization", resources };
    let yaml = super::yaml::to_string(&k).unwrap_or_default();
    Artifact { path: "cluster/kustomization.yaml".into(), bytes: yaml.into_bytes() }
}
