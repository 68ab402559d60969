//! `C:\k\wmrender\node.json`: what the node agent does besides the services (folders, the cluster proxy as
//! machine-level variables, how the node's name is found) and the steps only PowerShell can do, each a rendered
//! script the agent runs and checks by its result line. The types are the node contract's.

use super::paths::{self, node};
use crate::plan::{Plan, PlatformPlan};
use crate::render::Artifact;
use std::collections::BTreeMap;
use wmrender_contract::settings::MACHINE_NAME;
use wmrender_contract::{NodeNameSource, NodeSettings, NodeVariable, RotatedFiles, Step, When};

/// The step that completes the network configuration before kube-proxy starts.
pub const NETWORK_STEP: &str = "network";
const AWS_HOSTNAME_STEP: &str = "aws-hostname";
const GCP_HOSTNAME_STEP: &str = "gcp-hostname";
/// Renames a Machine's host to the Machine's name (vSphere, Nutanix).
const RENAME_HOST_STEP: &str = "rename-host";
/// Run by `wmrender-node deconfigure` only (the name is the contract's).
pub use wmrender_contract::settings::REMOVE_HNS_NETWORKS_STEP;

fn step(name: &str, script: &str, args: &[&str], when: When) -> Step {
    Step { name: name.into(), script: node(script), args: args.iter().map(|a| a.to_string()).collect(), when }
}

pub fn settings(plan: &Plan) -> NodeSettings {
    let mut steps = vec![
        step("containers-feature", paths::CONTAINERS_FEATURE_PS1, &[], When::Once),
        // WICD applies the exclusion on every reconcile: an administrator or a Defender policy may remove it.
        step("defender-exclusion", paths::DEFENDER_PS1, &["-BinPath", paths::CONTAINERD_EXE], When::EveryPass),
        step("firewall", paths::FIREWALL_PS1, &[], When::Once),
    ];
    let node_name = match plan.platform {
        PlatformPlan::Aws(_) => {
            steps.push(step("aws-routes", paths::AWS_ROUTES_PS1, &[], When::EveryBoot));
            steps.push(step(AWS_HOSTNAME_STEP, paths::AWS_HOSTNAME_PS1, &[], When::OnDemand));
            NodeNameSource::Step { step: AWS_HOSTNAME_STEP.into() }
        }
        PlatformPlan::Gcp(_) => {
            steps.push(step(GCP_HOSTNAME_STEP, paths::GCP_HOSTNAME_PS1, &[], When::OnDemand));
            NodeNameSource::Step { step: GCP_HOSTNAME_STEP.into() }
        }
        PlatformPlan::Vsphere(_) => NodeNameSource::DnsFullyQualified,
        _ => NodeNameSource::DnsHostName,
    };
    steps.push(step(
        NETWORK_STEP,
        paths::NETWORK_CONF_PS1,
        &["-NodeName", NodeVariable::NodeName.placeholder()],
        When::OnDemand,
    ));
    steps.push(step(REMOVE_HNS_NETWORKS_STEP, paths::REMOVE_HNS_NETWORKS_PS1, &[], When::OnDemand));
    // The Machine API names vSphere and Nutanix VMs after their Machines but not the Windows inside: WMCO renames
    // the host (and reboots) so that its Node matches its Machine.
    let rename_to_machine = renames_hosts(plan).then(|| {
        steps.push(step(RENAME_HOST_STEP, paths::RENAME_HOST_PS1, &["-MachineName", MACHINE_NAME], When::OnDemand));
        RENAME_HOST_STEP.to_string()
    });
    let proxy = &plan.node.proxy;
    // Every variable is listed: an empty value removes one that an earlier bundle set.
    let environment = BTreeMap::from([
        ("HTTP_PROXY".to_string(), proxy.http.clone().unwrap_or_default()),
        ("HTTPS_PROXY".to_string(), proxy.https.clone().unwrap_or_default()),
        ("NO_PROXY".to_string(), proxy.no_proxy.clone().unwrap_or_default()),
    ]);
    NodeSettings {
        platform: plan.platform.name().into(),
        node_name,
        directories: paths::DIRECTORIES.iter().map(|d| node(d)).collect(),
        environment,
        steps,
        rename_to_machine,
        rotated_files: vec![RotatedFiles {
            // hybrid-overlay-node's client certificates (`--cert-duration=24h`): a new one about once a day. WICD
            // keeps the newest two.
            directory: node(HYBRID_OVERLAY_CERT_DIR),
            prefix: "ovnkube-client-".into(),
            suffix: ".pem".into(),
            keep: 2,
            keep_always: vec!["ovnkube-client-current.pem".into()],
        }],
        bundle_keys: plan.node.bundle_keys.clone(),
    }
}

/// Where hybrid-overlay-node keeps its certificates (`--cert-dir`).
pub const HYBRID_OVERLAY_CERT_DIR: &str = r"C:\k\cni\config";

/// Whether the platform's Machine API leaves the Windows host with its template's name (vSphere, Nutanix).
pub fn renames_hosts(plan: &Plan) -> bool {
    matches!(plan.platform, PlatformPlan::Vsphere(_) | PlatformPlan::Nutanix(_))
}

pub fn render(settings: &NodeSettings) -> Artifact {
    Artifact { path: paths::bundle(paths::SETTINGS_JSON), bytes: settings.to_json() }
}
