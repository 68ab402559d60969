//! Cluster-wide settings: infrastructure ID, API URL, proxy, pause image, operator install settings.

use super::Decoded;
use super::checked::KubernetesVersion;
use super::names;
use super::{has_control_chars, is_dns1123_label};
use crate::diagnostics::Diagnostics;
use crate::inputs::schema;
use crate::inputs::schema::ClusterInputs;
use crate::inputs::yaml::Located;

pub fn check(inputs: &ClusterInputs, _decoded: &Decoded, d: &mut Diagnostics) {
    let spec = &inputs.spec;
    let id = &spec.infrastructure_id;
    if id.is_empty() || id.len() > 27 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        d.push(
            id.error(format!("`{}` is not a valid infrastructure ID", id.value))
                .expected("1 to 27 letters, digits or `-` (status.infrastructureName of infrastructure/cluster)")
                .hint("read it with `oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`"),
        );
    }
    let url = &spec.api_server_internal_url;
    let ok = url.strip_prefix("https://").is_some_and(|rest| {
        !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    });
    if !ok {
        d.push(
            url.error(format!("`{}` is not an API server URL", url.value.escape_debug()))
                .expected("https://<host>:<port>, e.g. https://api-int.prod-east.example.com:6443"),
        );
    } else if let Some(Err(why)) = url.strip_prefix("https://").map(names::check_host_port) {
        d.push(
            url.error(format!("`{}` is not an API server URL: {why}", url.value.escape_debug()))
                .expected("https://<host>:<port> with a DNS name of at most 253 characters and a port from 1 to 65535"),
        );
    }
    if let Some(v) = &spec.kubernetes_version
        && KubernetesVersion::parse(v).is_none()
    {
        d.push(
            v.error(format!("unsupported Kubernetes version `{}`", v.value.escape_debug()))
                .expected(KubernetesVersion::SUPPORTED)
                .hint("the cluster's minor version: `oc version` shows it as Kubernetes Version: v1.35.x"),
        );
    }
    let name = &inputs.metadata.name;
    if !is_dns1123_label(name) {
        d.push(
            name.error(format!("`{}` is not a valid name", name.value.escape_debug()))
                .expected("lower-case letters, digits and `-`, at most 63 characters"),
        );
    }
    if let Some(proxy) = &spec.proxy {
        for url in [&proxy.http_proxy, &proxy.https_proxy].into_iter().flatten() {
            check_proxy_url(url, d);
        }
        for entry in &proxy.no_proxy {
            if let Err(why) = names::check_no_proxy_entry(entry) {
                d.push(
                    entry
                        .error(format!("`{}` is not a noProxy entry: {why}", entry.value.escape_debug()))
                        .expected("one host name, domain suffix (.example.com), IP address or CIDR per list item"),
                );
            }
        }
    }
    if let Some(image) = &spec.pause_image
        && let Err(why) = names::check_image_reference(image)
    {
        d.push(
            image
                .error(format!("`{}` is not an image reference: {why}", image.value.escape_debug()))
                .expected("registry/repository:tag or @digest, e.g. mcr.microsoft.com/oss/kubernetes/pause:3.9"),
        );
    }
    if let Some(controller) = &spec.controller {
        check_controller(controller, spec.operator.install, d);
    }
    if spec.machine_sets.is_empty() && spec.byoh.is_none() && !spec.operator.install {
        // An empty render would make Argo CD prune the whole application.
        d.push(
            spec.platform
                .error("nothing to render: no machineSets, no byoh list and no operator install")
                .expected("at least one of `machineSets`, `byoh` (an empty list deconfigures every BYOH host) or `operator.install: true`"),
        );
    }
    let op = &spec.operator;
    for v in [&op.namespace, &op.source_namespace, &op.package, &op.source].into_iter().flatten() {
        if !is_dns1123_label(v) {
            d.push(v.error(format!("`{}` is not a valid name", v.value.escape_debug())).expected("a DNS-1123 label"));
        }
    }
    if let Some(channel) = &op.channel
        && (channel.is_empty() || has_control_chars(channel))
    {
        d.push(channel.error("the channel is empty or has control characters").expected("e.g. stable"));
    }
    if let Some(a) = &op.install_plan_approval
        && !matches!(a.as_str(), "Automatic" | "Manual")
    {
        d.push(a.error(format!("unknown installPlanApproval `{}`", a.value)).expected("Automatic or Manual"));
    }
}

fn check_proxy_url(url: &Located<String>, d: &mut Diagnostics) {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    let ok =
        rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) && !has_control_chars(url) && !url.contains(' ');
    if !ok {
        d.push(
            url.error(format!("`{}` is not a proxy URL", url.value.escape_debug()))
                .expected("http://host:port or https://host:port, with no spaces or control characters"),
        );
    } else if let Some(Err(why)) = rest
        .map(|r| r.split('/').next().unwrap_or(""))
        .filter(|authority| !authority.contains('@'))
        .map(names::check_host_port)
    {
        d.push(
            url.error(format!("`{}` is not a proxy URL: {why}", url.value.escape_debug()))
                .expected("http://host:port with a DNS name of at most 253 characters and a port from 1 to 65535"),
        );
    } else if rest.is_some_and(|r| r.split('/').next().unwrap_or("").contains('@')) {
        // Rendered output is committed to Git; credentials must never be part of it.
        d.push(
            url.error("the proxy URL carries credentials (user:password@)")
                .expected("http://host:port without user information")
                .hint("wmrender keeps secrets out of the inputs and the rendered files; use a proxy that authorises the nodes by address"),
        );
    }
}

/// The most replicas `controller.replicas` takes: one leads, the others wait on the Lease.
pub const MAX_CONTROLLER_REPLICAS: u32 = 5;

/// `controller`: its images are image references; it exists only without the operator (with it, WMCO configures
/// the nodes, and two controllers of one node fight).
fn check_controller(controller: &schema::Controller, operator_install: bool, d: &mut Diagnostics) {
    if operator_install {
        d.push(
            controller
                .image
                .error("`controller` configures the Windows nodes without the operator, but `operator.install` is true")
                .expected("either `operator.install: true` (WMCO configures the nodes) or `controller`, not both"),
        );
    }
    for image in [Some(&controller.image), controller.payload_image.as_ref()].into_iter().flatten() {
        if let Err(why) = names::check_image_reference(&image.value) {
            d.push(
                image
                    .error(format!("`{}` is not an image reference: {why}", image.value.escape_debug()))
                    .expected("registry/repository:tag or @digest, e.g. quay.io/example/wmrender:0.1.0"),
            );
        }
    }
    let repositories = [
        (&controller.pull_from, "registry.example.com/fleet/windows-bundle"),
        (&controller.pull_payload_from, "registry.example.com/fleet/windows-payload"),
    ];
    for (repository, example) in repositories {
        if let Some(repository) = repository
            && let Err(why) = wmrender_contract::bundle_artifact::parse_repository(&repository.value)
        {
            d.push(repository.error(why).expected(format!("registry/repository, e.g. {example}")));
        }
    }
    // The payload nodes pull is the one the controller holds: without it, there is nothing to name.
    if let Some(repository) = &controller.pull_payload_from
        && controller.payload_image.is_none()
    {
        d.push(
            repository
                .error("nodes pull the controller's payload, and it has none: `payloadImage` is not set")
                .expected("`payloadImage` beside `pullPayloadFrom`: the image of the payload CI publishes there"),
        );
    }
    if let Some(r) = &controller.replicas
        && !(1..=MAX_CONTROLLER_REPLICAS).contains(&r.value)
    {
        d.push(r.error(format!("{} controller replicas", r.value)).expected(format!(
            "1 to {MAX_CONTROLLER_REPLICAS}: one leads through the Lease, the others take over when it stops"
        )));
    }
}
