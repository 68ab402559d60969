//! The Machine API's own rules on platform values (openshift/machine-api-operator, pkg/webhooks/
//! machine_webhook.go), checked at validate time so that a MachineSet the API server would refuse, warn about or
//! rewrite is caught here, with its field and line:
//! - what the webhook refuses is an error;
//! - what it warns about is a warning;
//! - what it rewrites (vSphere zero values, which it drops) is an error: the stored object would differ from the
//!   rendered one and Argo CD would show a diff forever. (GCP `tags: []`, which it replaces with the default, is
//!   rendered as that default instead: see `checked.rs`.)

use crate::diagnostics::Diagnostics;
use crate::inputs::schema::{ClusterInputs, Platform};
use crate::inputs::yaml::Located;
use crate::quantity::Quantity;

/// GCP persistent disk types the webhook accepts.
const GCP_DISK_TYPES: [&str; 4] = ["pd-standard", "pd-ssd", "pd-balanced", "hyperdisk-balanced"];
const GCP_MIN_DISK_GB: u32 = 16;
/// Azure managed disks: more than 0 and less than 32768 GB.
const AZURE_MAX_OS_DISK_GB: u32 = 32768;
const VSPHERE_MIN_CPUS: u32 = 2;
const VSPHERE_MIN_MEMORY_MIB: u32 = 2048;
const VSPHERE_MIN_DISK_GIB: u32 = 120;
const NUTANIX_MIN_MEMORY: u64 = 2 << 30;
const NUTANIX_MIN_SYSTEM_DISK: u64 = 20 << 30;

pub(super) fn check(inputs: &ClusterInputs, platform: &Platform, d: &mut Diagnostics) {
    match platform {
        Platform::Aws(a) => {
            // The Machine API adds this tag itself; a second copy from the inputs is reported by the webhook.
            let owned = format!("kubernetes.io/cluster/{}", inputs.spec.infrastructure_id.value);
            for tag in a.tags.iter().filter(|t| t.name.value == owned) {
                d.push(
                    tag.name
                        .warning(format!("the tag `{owned}` is set by the Machine API already"))
                        .expected("extra tags other than kubernetes.io/cluster/<infrastructureID>")
                        .hint("remove this tag; the Machine API webhook warns about the duplicate"),
                );
            }
        }
        Platform::Gcp(g) => {
            if let Some(size) = &g.disk_size_gb
                && size.value < GCP_MIN_DISK_GB
            {
                d.push(
                    size.error(format!("a GCP disk of {} GB is too small", size.value))
                        .expected(format!("at least {GCP_MIN_DISK_GB} (the Machine API refuses smaller disks)")),
                );
            }
            if let Some(kind) = &g.disk_type
                && !GCP_DISK_TYPES.contains(&kind.as_str())
            {
                d.push(
                    kind.error(format!(
                        "`{}` is not a GCP disk type the Machine API accepts",
                        kind.value.escape_debug()
                    ))
                    .expected(GCP_DISK_TYPES.join(", ")),
                );
            }
        }
        Platform::Azure(a) => {
            if let Some(size) = &a.os_disk_size_gb
                && (size.value == 0 || size.value >= AZURE_MAX_OS_DISK_GB)
            {
                d.push(
                    size.error(format!("an Azure OS disk of {} GB is not allowed", size.value))
                        .expected(format!("more than 0 and less than {AZURE_MAX_OS_DISK_GB}")),
                );
            }
        }
        Platform::Vsphere(v) => {
            for value in [&v.num_cpus, &v.num_cores_per_socket, &v.memory_mib, &v.disk_gib].into_iter().flatten() {
                if value.value == 0 {
                    d.push(
                        value
                            .error("0 is dropped by the Machine API: the stored MachineSet would differ from the rendered one")
                            .expected("a number above 0, or no value for wmrender's default"),
                    );
                }
            }
            minimum(&v.num_cpus, VSPHERE_MIN_CPUS, "CPUs", d);
            minimum(&v.memory_mib, VSPHERE_MIN_MEMORY_MIB, "MiB of memory", d);
            minimum(&v.disk_gib, VSPHERE_MIN_DISK_GIB, "GiB of disk", d);
        }
        Platform::Nutanix(n) => {
            for (size, least, what) in [
                (&n.memory_size, NUTANIX_MIN_MEMORY, "memory"),
                (&n.system_disk_size, NUTANIX_MIN_SYSTEM_DISK, "system disk"),
            ] {
                let Some(size) = size else { continue };
                match Quantity::parse(size) {
                    Err(why) => d.push(
                        size.error(format!("`{}` is not a size: {why}", size.value.escape_debug()))
                            .expected("a whole number with a suffix, such as 16Gi or 4096Mi"),
                    ),
                    Ok(q) if q.bytes() < least => d.push(
                        size.warning(format!("{} of {what} is below the Machine API's minimum", size.value))
                            .expected(format!("at least {}", Quantity::from_bytes(least, true).canonical())),
                    ),
                    Ok(_) => {}
                }
            }
        }
        Platform::None => {}
    }
}

/// The webhook's warning for a vSphere value above 0 but below its recommended minimum.
fn minimum(value: &Option<Located<u32>>, least: u32, what: &str, d: &mut Diagnostics) {
    if let Some(v) = value
        && v.value != 0
        && v.value < least
    {
        d.push(
            v.warning(format!("{} {what} is below the Machine API's recommended minimum", v.value))
                .expected(format!("at least {least}")),
        );
    }
}
