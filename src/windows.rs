//! Facts about the Windows Server versions wmrender supports: names, builds, default images.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum WindowsVersion {
    #[serde(rename = "2019")]
    V2019,
    #[serde(rename = "2022")]
    V2022,
    #[serde(rename = "2025")]
    V2025,
}

impl WindowsVersion {
    pub const ALL: [WindowsVersion; 3] = [WindowsVersion::V2019, WindowsVersion::V2022, WindowsVersion::V2025];

    /// What users write in the inputs: `"2019"`, `"2022"`, `"2025"`.
    pub fn as_str(self) -> &'static str {
        match self {
            WindowsVersion::V2019 => "2019",
            WindowsVersion::V2022 => "2022",
            WindowsVersion::V2025 => "2025",
        }
    }

    pub fn parse(s: &str) -> Option<WindowsVersion> {
        WindowsVersion::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The value kubelet puts in the node label `node.kubernetes.io/windows-build`: `10.0.<build>`, no revision.
    pub fn build(self) -> &'static str {
        match self {
            WindowsVersion::V2019 => "10.0.17763",
            WindowsVersion::V2022 => "10.0.20348",
            WindowsVersion::V2025 => "10.0.26100",
        }
    }

    /// The documented RuntimeClass name (`windows2022`), which workloads reference as `runtimeClassName`.
    pub fn runtime_class_name(self) -> String {
        format!("windows{}", self.as_str())
    }

    /// Azure Marketplace image (`publisher:offer:sku:version`) used when the inputs name none.
    /// 2022 is the documented SKU; 2019 and 2025 are the smalldisk SKUs WMCO's own tests use.
    pub fn azure_marketplace_image(self) -> &'static str {
        match self {
            WindowsVersion::V2019 => "MicrosoftWindowsServer:WindowsServer:2019-datacenter-smalldisk:latest",
            WindowsVersion::V2022 => "MicrosoftWindowsServer:WindowsServer:2022-datacenter:latest",
            WindowsVersion::V2025 => "MicrosoftWindowsServer:WindowsServer:2025-datacenter-smalldisk:latest",
        }
    }

    /// GCP public image family for this version (latest image of the family).
    pub fn gcp_image_family(self) -> String {
        format!("projects/windows-cloud/global/images/family/windows-{}-core", self.as_str())
    }
}

impl std::fmt::Display for WindowsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
