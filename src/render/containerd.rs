//! `C:\k\containerd\containerd_conf.toml`: WMCO's containerd settings with the registries directory and the
//! sandbox image from the inputs.

use super::Artifact;
use crate::plan::Plan;

pub fn render(plan: &Plan) -> Artifact {
    let ctx = minijinja::context! { sandbox_image => &plan.pause_image };
    Artifact {
        path: "node/C/k/containerd/containerd_conf.toml".into(),
        bytes: super::templates::render("containerd_conf.toml.j2", ctx).into_bytes(),
    }
}
