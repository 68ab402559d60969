//! The WMCO operator image's `/payload` and where each of its files goes on a node wmrender configures. WMCO's
//! layout is its Containerfile's (`COPY … /payload/…`; paths in its pkg/nodeconfig/payload/payload.go): one folder
//! per component. From WMCO 10.21.1 every file is stored gzipped as `<name>.tar.gz` beside a `/payload/sha256sum`
//! listing each file's uncompressed sha256 by its build path; before, the files are stored as they are and the image
//! carries no checksums (WMCO hashed them itself).
//!
//! wmrender takes the programs and `hns.psm1`. It leaves WMCO's configuration and scripts (it renders its own:
//! `containerd_conf.toml`, the exporter's web configuration, the PowerShell), WICD (`wmrender-node` does its work)
//! and `generated/` (written by the running operator).

/// One file wmrender takes from the image.
#[derive(Clone, Copy, Debug)]
pub struct Taken {
    /// Its paths under `/payload`, the current one first (older images put some files elsewhere).
    pub image: &'static [&'static str],
    /// Its node path.
    pub node: &'static str,
    /// Every node needs it; the others only on some platforms.
    pub required: bool,
}

pub const FILES: &[Taken] = &[
    Taken { image: &["kube-node/kubelet.exe"], node: r"C:\k\kubelet.exe", required: true },
    Taken { image: &["kube-node/kube-proxy.exe"], node: r"C:\k\kube-proxy.exe", required: true },
    Taken { image: &["kube-node/kube-log-runner.exe"], node: r"C:\k\kube-log-runner.exe", required: true },
    Taken { image: &["containerd/containerd.exe"], node: r"C:\k\containerd\containerd.exe", required: true },
    Taken {
        image: &["containerd/containerd-shim-runhcs-v1.exe"],
        node: r"C:\k\containerd\containerd-shim-runhcs-v1.exe",
        required: true,
    },
    Taken { image: &["cni/host-local.exe"], node: r"C:\k\cni\host-local.exe", required: true },
    Taken { image: &["cni/win-bridge.exe"], node: r"C:\k\cni\win-bridge.exe", required: true },
    Taken { image: &["cni/win-overlay.exe"], node: r"C:\k\cni\win-overlay.exe", required: true },
    Taken { image: &["hybrid-overlay-node.exe"], node: r"C:\k\hybrid-overlay-node.exe", required: true },
    Taken {
        image: &["windows-exporter/windows_exporter.exe", "windows_exporter.exe"],
        node: r"C:\k\windows_exporter.exe",
        required: true,
    },
    Taken { image: &["csi-proxy/csi-proxy.exe"], node: r"C:\k\csi-proxy.exe", required: true },
    Taken { image: &["powershell/hns.psm1"], node: r"C:\k\hns.psm1", required: true },
    // Azure's cloud-node-manager and AWS's kubelet credential provider.
    Taken { image: &["azure-cloud-node-manager.exe"], node: r"C:\k\azure-cloud-node-manager.exe", required: false },
    Taken { image: &["ecr-credential-provider.exe"], node: r"C:\k\ecr-credential-provider.exe", required: false },
];

/// The checksum list of images from WMCO 10.21.1 on.
pub const SHA256SUM: &str = "sha256sum";
/// How a compressed file is stored.
pub const COMPRESSED: &str = ".tar.gz";

/// The file a `/payload`-relative path is, and whether it is stored compressed (`kube-node/kubelet.exe.tar.gz`).
pub fn taken(path: &str) -> Option<(&'static Taken, bool)> {
    let (plain, compressed) = match path.strip_suffix(COMPRESSED) {
        Some(p) => (p, true),
        None => (path, false),
    };
    FILES.iter().find(|t| t.image.contains(&plain)).map(|t| (t, compressed))
}

/// `/payload/sha256sum`: the sha256 of each file by its file name (WMCO names build paths, not `/payload` ones, so
/// only the name can be matched). A name listed twice with different digests matches either.
pub fn checksums(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (digest, path) = line
            .split_once("  ")
            .or_else(|| line.split_once(" *"))
            .ok_or_else(|| format!("line {}: not `<sha256>  <path>`", n + 1))?;
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("line {}: `{}` is not a sha256", n + 1, digest.escape_debug()));
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        out.push((name.to_string(), digest.to_ascii_lowercase()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmrender_contract::NodePath;

    #[test]
    fn every_file_lands_on_a_node_path() {
        for t in FILES {
            NodePath::parse_delivered(t.node).unwrap();
            assert!(!t.image.is_empty());
        }
    }

    #[test]
    fn files_are_found_plain_or_compressed() {
        assert_eq!(taken("kube-node/kubelet.exe").map(|(t, c)| (t.node, c)), Some((r"C:\k\kubelet.exe", false)));
        assert_eq!(
            taken("cni/win-bridge.exe.tar.gz").map(|(t, c)| (t.node, c)),
            Some((r"C:\k\cni\win-bridge.exe", true))
        );
        assert_eq!(taken("windows_exporter.exe").map(|(t, _)| t.node), Some(r"C:\k\windows_exporter.exe"));
        assert!(taken("containerd/containerd_conf.toml").is_none());
        assert!(taken("windows-instance-config-daemon.exe").is_none());
    }

    #[test]
    fn the_checksum_list_is_read_by_file_name() {
        let sums = format!(
            "{}  /build/windows-machine-config-operator/kubelet/_output/local/bin/windows/amd64/kubelet.exe\n\n{} *cni/win-bridge.exe\n",
            "A".repeat(64),
            "b".repeat(64)
        );
        let parsed = checksums(&sums).unwrap();
        assert_eq!(
            parsed,
            [("kubelet.exe".to_string(), "a".repeat(64)), ("win-bridge.exe".to_string(), "b".repeat(64))]
        );
        assert!(checksums("abc  x\n").unwrap_err().contains("line 1"));
        assert!(checksums("no separator\n").is_err());
    }
}
