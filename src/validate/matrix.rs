//! The support matrix: which Windows Server versions each platform runs, as data, one row per platform.
//! Source: ../shared/reference/wmco-cluster-objects.md §2 (OpenShift 4.22 documentation and WMCO).

use crate::inputs::schema::PlatformKind;
use crate::windows::WindowsVersion::{self, *};

pub struct PlatformSupport {
    /// The name the documentation uses, for messages.
    pub display: &'static str,
    pub versions: &'static [WindowsVersion],
    pub machine_sets: bool,
    /// vSphere's own networking holds the default VXLAN port, so hybrid-overlay needs a custom one there.
    pub requires_custom_vxlan_port: bool,
    /// Azure and vSphere: Windows computer names are at most 15 characters, and Machine names add `-xxxxx`.
    pub max_machine_set_name: usize,
    /// Why a version is missing, for the error message.
    pub note: &'static str,
}

const ONLY_AWS_AND_AZURE_RUN_2019: &str = "Windows Server 2019 is supported only on AWS and Azure";

/// The row of a platform; the match is exhaustive, so a new platform cannot go without one.
pub fn support(platform: PlatformKind) -> &'static PlatformSupport {
    match platform {
        PlatformKind::Aws => &PlatformSupport {
            display: "AWS",
            versions: &[V2019, V2022, V2025],
            machine_sets: true,
            requires_custom_vxlan_port: false,
            max_machine_set_name: 63,
            note: "",
        },
        PlatformKind::Azure => &PlatformSupport {
            display: "Azure",
            versions: &[V2019, V2022, V2025],
            machine_sets: true,
            requires_custom_vxlan_port: false,
            max_machine_set_name: 9,
            note: "",
        },
        PlatformKind::Gcp => &PlatformSupport {
            display: "GCP",
            versions: &[V2022, V2025],
            machine_sets: true,
            requires_custom_vxlan_port: false,
            max_machine_set_name: 63,
            note: ONLY_AWS_AND_AZURE_RUN_2019,
        },
        PlatformKind::Nutanix => &PlatformSupport {
            display: "Nutanix",
            versions: &[V2022, V2025],
            machine_sets: true,
            requires_custom_vxlan_port: false,
            max_machine_set_name: 63,
            note: ONLY_AWS_AND_AZURE_RUN_2019,
        },
        PlatformKind::Vsphere => &PlatformSupport {
            display: "vSphere",
            versions: &[V2022, V2025],
            machine_sets: true,
            requires_custom_vxlan_port: true,
            max_machine_set_name: 9,
            note: "vSphere needs a custom hybrid-overlay VXLAN port, which Windows Server 2019 lacks (KB4565351)",
        },
        PlatformKind::None => &PlatformSupport {
            display: "platform none (bare metal / provider agnostic)",
            versions: &[V2022, V2025],
            machine_sets: false,
            requires_custom_vxlan_port: false,
            max_machine_set_name: 63,
            note: ONLY_AWS_AND_AZURE_RUN_2019,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_runs_2022_and_2025() {
        for kind in PlatformKind::ALL {
            assert!(support(kind).versions.contains(&V2022) && support(kind).versions.contains(&V2025));
        }
    }
}
