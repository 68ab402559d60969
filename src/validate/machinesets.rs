//! MachineSets: the support matrix, names, zones, images and each platform's identifiers. The Machine API
//! webhook's rules on platform values are in `webhook.rs`.

use super::Decoded;
use super::checked::DEFAULT_WINDOWS_VERSION;
use super::matrix::support;
use super::names;
use super::{has_control_chars, is_dns1123_subdomain};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::inputs::schema::{ClusterInputs, MachineSetInput, NutanixId, Platform};
use crate::inputs::yaml::Located;
use std::collections::BTreeMap;

/// The MachineSet name used when the inputs give none: the installer's convention for Linux workers,
/// `<infrastructureID>-windows-worker-<zone>` (GCP: the zone's letter). Azure and vSphere have no derived name:
/// their 9-character limit leaves no room for the infrastructure ID, so validation asks for an explicit one.
pub(super) fn derived_machine_set_name(
    infrastructure_id: &str,
    platform: &Platform,
    zone: Option<&str>,
) -> Option<String> {
    let base = format!("{infrastructure_id}-windows-worker");
    match (platform, zone) {
        (Platform::Azure(_) | Platform::Vsphere(_) | Platform::None, _) => None,
        (Platform::Gcp(_), Some(z)) => Some(format!("{base}-{}", z.rsplit('-').next().unwrap_or(z))),
        (_, Some(z)) => Some(format!("{base}-{z}")),
        (_, None) => Some(base),
    }
}

pub(super) fn check(inputs: &ClusterInputs, decoded: &Decoded, d: &mut Diagnostics) {
    let spec = &inputs.spec;
    // Every rule here is about the platform; a platform that could not be read has its own error.
    let Some(platform) = decoded.get(&spec.platform) else { return };
    let row = support(platform.kind());
    // The platform's own fields (the region a zone must be in, a shared image) only where they were read.
    let platform_field_failed = |key: &str| {
        decoded.failed(&spec.platform.loc.file, &format!("{}.{}.{key}", spec.platform.field, platform.name()))
    };

    if let Some(v) = &spec.windows_version
        && !row.versions.contains(&v.value)
    {
        d.push(unsupported_version(v.value, row, v.error(String::new())));
    }
    if !row.machine_sets {
        for m in &spec.machine_sets {
            d.push(
                m.at.error(format!("MachineSets are not supported on {}", row.display))
                    .expected("no machineSets; Windows nodes come from `byoh` hosts only")
                    .hint("list the Windows hosts under `spec.byoh` instead"),
            );
        }
        if spec.byoh.as_ref().is_none_or(|b| b.is_empty()) {
            d.push(
                spec.platform
                    .error("platform `none` needs at least one BYOH host")
                    .expected("a `spec.byoh` list with the Windows hosts to configure"),
            );
        }
        return;
    }

    let default_version = spec.windows_version.as_ref().map(|v| v.value).unwrap_or(DEFAULT_WINDOWS_VERSION);
    let mut names: BTreeMap<String, &MachineSetInput> = BTreeMap::new();
    for m in &spec.machine_sets {
        if let Some(v) = &m.windows_version
            && !row.versions.contains(&v.value)
        {
            d.push(unsupported_version(v.value, row, v.error(String::new())));
        }
        if m.windows_version.is_none() && spec.windows_version.is_none() && !row.versions.contains(&default_version) {
            d.push(unsupported_version(default_version, row, m.at.error(String::new())));
        }
        check_zone(platform, decoded, m, d);
        if !platform_image_key(platform).is_some_and(platform_field_failed) {
            check_image(platform, m, d);
        }
        if let (Some(v), None, Some(shared)) = (&m.windows_version, &m.image, platform_image(platform))
            && v.value != default_version
        {
            d.push(
                v.warning(format!(
                    "this MachineSet runs Windows Server {} but takes the platform-wide image `{}`, meant for {}",
                    v.value, shared.value, default_version
                ))
                .expected(format!("an `image` on this MachineSet for Windows Server {}", v.value))
                .hint("each Windows Server version needs its own image; a mismatch gives nodes whose build does not match their RuntimeClass"),
            );
        }

        let derived = decoded
            .get(&spec.infrastructure_id)
            .map(|infra| derived_machine_set_name(infra, platform, m.zone.as_ref().map(|z| z.as_str())));
        let (name, at) = match (&m.name, derived) {
            (Some(n), _) => (n.value.clone(), n.error(String::new())),
            // The infrastructure ID has its own error; a name derived from it would only repeat it.
            (None, None) => continue,
            (None, Some(Some(n))) => (n, m.at.error(String::new())),
            (None, Some(None)) => {
                d.push(
                    m.at.error(format!("a MachineSet on {} needs an explicit `name`", row.display))
                        .expected(format!("a name of at most {} characters", row.max_machine_set_name))
                        .hint("e.g. `name: winworker`; Windows computer names are limited to 15 characters, and Machines add `-xxxxx`"),
                );
                continue;
            }
        };
        let explain =
            if m.name.is_some() { String::new() } else { " (derived from infrastructureID and zone)".to_string() };
        if name.len() > row.max_machine_set_name {
            let mut e = at.clone();
            e.message = format!(
                "MachineSet name `{name}`{explain} is {} characters; {} allows at most {}",
                name.len(),
                row.display,
                row.max_machine_set_name
            );
            e = e.expected(format!("at most {} characters", row.max_machine_set_name));
            if row.max_machine_set_name == 9 {
                e = e.hint("Windows computer names are limited to 15 characters: the name, `-` and 5 random characters; try `winworker`");
            } else {
                e = e.hint("set a shorter `name`");
            }
            d.push(e);
        } else if !is_dns1123_subdomain(&name) {
            let mut e = at.clone();
            e.message = format!("MachineSet name `{}`{explain} is not a valid Kubernetes name", name.escape_debug());
            d.push(e.expected("lower-case letters, digits, `-` and `.`, starting and ending with a letter or digit"));
        }
        if let Some(first) = names.insert(name.clone(), m) {
            let mut e = at.clone();
            e.message = format!("MachineSet name `{name}` is used twice (first at line {})", first.at.loc.line);
            d.push(e.expected("a unique name per MachineSet").hint("give one of them an explicit `name`"));
        }
    }
    check_platform(platform, decoded, d);
    super::webhook::check(inputs, platform, d);
}

fn unsupported_version(
    v: crate::windows::WindowsVersion,
    row: &super::matrix::PlatformSupport,
    mut at: Diagnostic,
) -> Diagnostic {
    let allowed: Vec<String> = row.versions.iter().map(|v| format!("\"{v}\"")).collect();
    at.message = format!("Windows Server {v} is not supported on {}", row.display);
    let at = at.expected(allowed.join(" or "));
    if row.note.is_empty() { at } else { at.hint(row.note) }
}

fn check_zone(platform: &Platform, decoded: &Decoded, m: &MachineSetInput, d: &mut Diagnostics) {
    let zone = m.zone.as_ref();
    match (platform, zone) {
        (Platform::Aws(_), None) | (Platform::Gcp(_), None) => d.push(
            m.at.error(format!("missing required field `zone` for a MachineSet on {}", platform.name()))
                .expected("the availability zone, e.g. us-east-1a (AWS) or us-central1-a (GCP)"),
        ),
        // AWS zones are the region and a letter (us-east-1a); local and wavelength zones add more after a `-`.
        (Platform::Aws(a), Some(z)) => {
            if let Some(region) = decoded.get(&a.region)
                && !z.strip_prefix(region.as_str()).is_some_and(|rest| {
                    rest.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                        || rest.starts_with('-') && rest.len() > 1
                })
            {
                d.push(
                    z.error(format!("zone `{}` is not in region `{region}`", z.value.escape_debug()))
                        .expected(format!("a zone of {region}, e.g. {region}a")),
                );
            } else {
                check_zone_name(z, d);
            }
        }
        (Platform::Gcp(g), Some(z)) => {
            if let Some(region) = decoded.get(&g.region)
                && !z.strip_prefix(region.as_str()).is_some_and(|rest| rest.starts_with('-') && rest.len() > 1)
            {
                d.push(
                    z.error(format!("zone `{}` is not in region `{region}`", z.value.escape_debug()))
                        .expected(format!("a zone of {region}, e.g. {region}-a")),
                );
            } else {
                check_zone_name(z, d);
            }
        }
        (Platform::Azure(_), Some(z)) if !matches!(z.as_str(), "" | "1" | "2" | "3") => d.push(
            z.error(format!("`{}` is not an Azure availability zone", z.value.escape_debug()))
                .expected("\"1\", \"2\" or \"3\", or no zone")
                .hint("Azure zones are numbers; the region goes in `platform.azure.location`"),
        ),
        (Platform::Vsphere(_), Some(z)) => d.push(
            z.error("vSphere MachineSets have no zone")
                .expected("no `zone`; placement comes from `platform.vsphere` (datacenter, datastore, folder)"),
        ),
        (_, Some(z)) => check_zone_name(z, d),
        _ => {}
    }
}

fn check_zone_name(z: &Located<String>, d: &mut Diagnostics) {
    if z.is_empty() || !z.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        d.push(z.error(format!("`{}` is not a zone name", z.value.escape_debug())).expected("letters, digits and `-`"));
    }
}

fn check_image(platform: &Platform, m: &MachineSetInput, d: &mut Diagnostics) {
    let own = m.image.as_ref();
    match platform {
        Platform::Aws(a) => match own.or(a.ami.as_ref()) {
            None => d.push(
                m.at.error("no AMI for this MachineSet")
                    .expected("`platform.aws.ami`, or `image` on the MachineSet")
                    .hint("find one with: aws ec2 describe-images --owners amazon --filters \"Name=name,Values=Windows_Server-2022-English-Core-Base-*\""),
            ),
            Some(ami) if !is_ami_id(ami) => {
                d.push(ami.error(format!("`{}` is not an AMI ID", ami.value.escape_debug())).expected("ami- followed by 8 or 17 hex digits"))
            }
            Some(_) => {}
        },
        Platform::Azure(a) => {
            if let Some(img) = own.or(a.image.as_ref()) {
                let urn: Vec<&str> = img.split(':').collect();
                let ok = (img.starts_with('/') && !img.contains(char::is_whitespace))
                    || (urn.len() == 4 && urn.iter().all(|p| !p.is_empty() && !p.contains(char::is_whitespace)));
                if !ok {
                    d.push(
                        img.error(format!("`{}` is not an Azure image", img.value.escape_debug()))
                            .expected("publisher:offer:sku:version (e.g. MicrosoftWindowsServer:WindowsServer:2022-datacenter:latest) or a resource ID starting with /"),
                    );
                }
            }
        }
        Platform::Gcp(g) => {
            if let Some(img) = own.or(g.image.as_ref())
                && (img.is_empty() || img.contains(char::is_whitespace) || has_control_chars(img))
            {
                d.push(img.error("the GCP image is empty or has spaces").expected("projects/<project>/global/images/<image or family/name>"));
            }
        }
        Platform::Nutanix(n) => {
            if own.or(n.image.as_ref()).is_none_or(|i| i.is_empty()) {
                d.push(
                    m.at.error("no Nutanix image for this MachineSet")
                        .expected("`platform.nutanix.image` (the image name in Prism), or `image` on the MachineSet"),
                );
            }
        }
        Platform::Vsphere(v) => {
            if own.or(v.template.as_ref()).is_none_or(|i| i.is_empty()) {
                d.push(
                    m.at.error("no vSphere template for this MachineSet")
                        .expected("`platform.vsphere.template`, or `image` on the MachineSet: the Windows golden-image template"),
                );
            }
        }
        Platform::None => {}
    }
}

fn is_ami_id(s: &str) -> bool {
    s.strip_prefix("ami-").is_some_and(|h| {
        (h.len() == 8 || h.len() == 17) && h.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// The platform's plain identifiers (regions, projects, datastores, …), which go verbatim into MachineSets.
fn platform_identifiers(platform: &Platform) -> Vec<&Located<String>> {
    let required: Vec<&Located<String>>;
    let optional: Vec<Option<&Located<String>>>;
    match platform {
        Platform::Aws(a) => {
            required = vec![&a.region];
            optional = vec![a.ami.as_ref(), a.instance_type.as_ref(), a.volume_type.as_ref()];
            return required
                .into_iter()
                .chain(optional.into_iter().flatten())
                .chain(a.iam_instance_profile.as_ref())
                .chain(a.subnet.as_ref())
                .collect();
        }
        Platform::Azure(a) => {
            required = vec![&a.location];
            optional = vec![
                a.resource_group.as_ref(),
                a.network_resource_group.as_ref(),
                a.vnet.as_ref(),
                a.subnet.as_ref(),
                a.vm_size.as_ref(),
                a.image.as_ref(),
                a.os_disk_storage_account_type.as_ref(),
                a.managed_identity.as_ref(),
            ];
        }
        Platform::Gcp(g) => {
            required = vec![&g.project_id, &g.region];
            optional = vec![
                g.machine_type.as_ref(),
                g.image.as_ref(),
                g.disk_type.as_ref(),
                g.network.as_ref(),
                g.subnetwork.as_ref(),
                g.service_account_email.as_ref(),
            ];
        }
        Platform::Vsphere(v) => {
            required = vec![&v.server, &v.datacenter, &v.datastore, &v.network];
            optional = vec![v.folder.as_ref(), v.resource_pool.as_ref(), v.template.as_ref()];
        }
        Platform::Nutanix(n) => {
            required = vec![];
            optional = vec![n.image.as_ref(), n.boot_type.as_ref().filter(|b| !b.is_empty())];
        }
        Platform::None => return Vec::new(),
    }
    required.into_iter().chain(optional.into_iter().flatten()).collect()
}

fn check_platform(platform: &Platform, decoded: &Decoded, d: &mut Diagnostics) {
    for value in platform_identifiers(platform) {
        if let Err(why) = names::check_identifier(value) {
            d.push(
                value
                    .error(if value.is_empty() {
                        "the value is empty".to_string()
                    } else {
                        format!("`{}` cannot be used here: {why}", value.value.escape_debug())
                    })
                    .expected("a non-empty value without surrounding spaces or control characters"),
            );
        }
    }
    match platform {
        Platform::Nutanix(n) => {
            check_nutanix_id(&n.cluster, d);
            if n.subnets.len() != 1 {
                d.push(
                    n.subnets
                        .error(format!("{} subnets given; Nutanix Windows machines take exactly one", n.subnets.len()))
                        .expected("a list with exactly one subnet"),
                );
            }
            n.subnets.iter().for_each(|s| check_nutanix_id(s, d));
            if let Some(p) = &n.project {
                check_nutanix_id(p, d);
            }
            if let Some(b) = &n.boot_type
                && !matches!(b.as_str(), "" | "Legacy")
            {
                d.push(
                    b.error(format!("boot type `{}` is not supported for Windows", b.value))
                        .expected("\"Legacy\" (or empty, which means Legacy)"),
                );
            }
        }
        Platform::Vsphere(v) => {
            if v.server.trim().is_empty() {
                d.push(v.server.error("the vCenter server is empty").expected("the vCenter host name or address"));
            }
            if let (Some(folder), Some(_)) = (&v.folder, decoded.get(&v.datacenter)) {
                let prefix = format!("/{}/vm/", v.datacenter.value);
                if !folder.starts_with(&prefix) || folder.len() == prefix.len() {
                    d.push(
                        folder
                            .error(format!(
                                "folder `{}` is not under datacenter `{}`",
                                folder.value, v.datacenter.value
                            ))
                            .expected(format!("a path starting with {prefix}, e.g. {prefix}windows")),
                    );
                }
            }
        }
        _ => {}
    }
}

fn check_nutanix_id(id: &NutanixId, d: &mut Diagnostics) {
    let n = usize::from(id.uuid.is_some()) + usize::from(id.name.is_some());
    if n != 1 || id.uuid.as_ref().or(id.name.as_ref()).is_some_and(|v| v.is_empty()) {
        d.push(
            id.at
                .error("a Nutanix resource needs exactly one of `uuid` or `name`")
                .expected("{uuid: <uuid>} or {name: <name>}"),
        );
    }
}

/// The key of the image written once for every MachineSet of the platform.
fn platform_image_key(platform: &Platform) -> Option<&'static str> {
    match platform {
        Platform::Aws(_) => Some("ami"),
        Platform::Azure(_) | Platform::Gcp(_) | Platform::Nutanix(_) => Some("image"),
        Platform::Vsphere(_) => Some("template"),
        Platform::None => None,
    }
}

/// The image written once for every MachineSet of the platform, if any.
fn platform_image(platform: &Platform) -> Option<&Located<String>> {
    match platform {
        Platform::Aws(a) => a.ami.as_ref(),
        Platform::Azure(a) => a.image.as_ref(),
        Platform::Gcp(g) => g.image.as_ref(),
        Platform::Nutanix(n) => n.image.as_ref(),
        Platform::Vsphere(v) => v.template.as_ref(),
        Platform::None => None,
    }
}
