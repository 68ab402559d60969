//! The support matrix: which Windows Server versions each platform runs, as data.
//! Source: ../shared/reference/wmco-cluster-objects.md §2 (OpenShift 4.22 documentation and WMCO).

use crate::windows::WindowsVersion::{self, *};

pub struct PlatformSupport {
    pub platform: &'static str,
    /// The name the documentation uses, for messages.
    pub display: &'static str,
    pub versions: &'static [WindowsVersion],
    pub machine_sets: bool,
    /// vSphere needs a custom hybrid-overlay VXLAN port; every other platform must not set one.
    pub custom_vxlan_port: bool,
    /// Azure and vSphere: Windows computer names are at most 15 characters, and Machine names add `-xxxxx`.
    pub max_machine_set_name: usize,
    /// Why a version is missing, for the error message.
    pub note: &'static str,
}

pub const SUPPORT: &[PlatformSupport] = &[
    PlatformSupport {
        platform: "aws",
        display: "AWS",
        versions: &[V2019, V2022, V2025],
        machine_sets: true,
        custom_vxlan_port: false,
        max_machine_set_name: 63,
        note: "",
    },
    PlatformSupport {
        platform: "azure",
        display: "Azure",
        versions: &[V2019, V2022, V2025],
        machine_sets: true,
        custom_vxlan_port: false,
        max_machine_set_name: 9,
        note: "",
    },
    PlatformSupport {
        platform: "gcp",
        display: "GCP",
        versions: &[V2022, V2025],
        machine_sets: true,
        custom_vxlan_port: false,
        max_machine_set_name: 63,
        note: "Windows Server 2019 is supported only on AWS and Azure",
    },
    PlatformSupport {
        platform: "nutanix",
        display: "Nutanix",
        versions: &[V2022, V2025],
        machine_sets: true,
        custom_vxlan_port: false,
        max_machine_set_name: 63,
        note: "Windows Server 2019 is supported only on AWS and Azure",
    },
    PlatformSupport {
        platform: "vsphere",
        display: "vSphere",
        versions: &[V2022, V2025],
        machine_sets: true,
        custom_vxlan_port: true,
        max_machine_set_name: 9,
        note: "vSphere needs a custom hybrid-overlay VXLAN port, which Windows Server 2019 lacks (KB4565351)",
    },
    PlatformSupport {
        platform: "none",
        display: "platform none (bare metal / provider agnostic)",
        versions: &[V2022, V2025],
        machine_sets: false,
        custom_vxlan_port: false,
        max_machine_set_name: 63,
        note: "Windows Server 2019 is supported only on AWS and Azure",
    },
];

pub fn support(platform: &str) -> &'static PlatformSupport {
    // Every Platform variant has a row; the fallback only keeps this total.
    SUPPORT.iter().find(|s| s.platform == platform).unwrap_or(&SUPPORT[SUPPORT.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::schema::Platform;

    #[test]
    fn every_platform_has_a_row() {
        for name in Platform::NAMES {
            assert_eq!(support(name).platform, name);
        }
    }
}
