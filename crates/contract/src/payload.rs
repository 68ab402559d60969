//! `payload.json`: the digest list of a payload directory (`sync --payload DIR`), written by `wmrender payload`
//! beside the node paths (`DIR/payload.json`, `DIR/C/k/kubelet.exe`, …). One line per file: its path in the
//! directory, sha256, size, and the version the program says it is where it says one. `sync` checks the directory
//! against it before anything is pushed; kept in Git or shown by `diff`, it is what a review of an upgrade reads.

use crate::NodePath;
use serde::{Deserialize, Serialize};

/// The list's file name, at the top of a payload directory.
pub const PAYLOAD_LIST: &str = "payload.json";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PayloadList {
    /// Where the files came from: the image by digest (`registry/repo@sha256:…`) of `payload pull`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Sorted by path.
    pub files: Vec<PayloadFile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PayloadFile {
    /// The file's path in the payload directory, `/`-separated: `C/k/kubelet.exe` (the node's `C:\k\kubelet.exe`).
    pub path: String,
    pub sha256: String,
    pub size: u64,
    /// The version the program carries (a Go program's build information), when it carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PayloadListError {
    #[error("not a payload list: {0}")]
    Json(String),
    #[error("`{path}` is not a payload path: {why}")]
    Path { path: String, why: String },
    #[error("`{path}`: `{sha256}` is not a sha256 (64 lower-case hex digits)")]
    Digest { path: String, sha256: String },
    #[error("`{path}` is listed twice")]
    Twice { path: String },
}

impl PayloadFile {
    /// The node path this file is delivered to.
    pub fn node_path(&self) -> Result<NodePath, PayloadListError> {
        let bad = |why: String| PayloadListError::Path { path: self.path.clone(), why };
        let below = self.path.strip_prefix("C/").ok_or_else(|| bad("it does not start with `C/`".into()))?;
        if below.contains('\\') {
            return Err(bad("`\\` in a name".into()));
        }
        NodePath::parse_delivered(&format!("C:\\{}", below.replace('/', "\\"))).map_err(|e| bad(e.to_string()))
    }
}

impl PayloadList {
    pub fn to_json(&self) -> Vec<u8> {
        crate::pretty_json(self)
    }

    /// A list read from a file, checked: every path a node path under `C/`, every digest a sha256, no path twice.
    pub fn parse(bytes: &[u8]) -> Result<PayloadList, PayloadListError> {
        let list: PayloadList = serde_json::from_slice(bytes).map_err(|e| PayloadListError::Json(e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for f in &list.files {
            f.node_path()?;
            if f.sha256.len() != 64 || !f.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return Err(PayloadListError::Digest { path: f.path.clone(), sha256: f.sha256.clone() });
            }
            if !seen.insert(f.path.to_ascii_lowercase()) {
                return Err(PayloadListError::Twice { path: f.path.clone() });
            }
        }
        Ok(list)
    }
}

/// The node files a payload can never be: the cluster's credentials and CAs sync delivers, kubelet's own
/// kubeconfig.
const NOT_PROGRAMS: &[&str] = &[
    crate::paths::TRUSTED_CA_BUNDLE,
    crate::paths::BOOTSTRAP_KUBECONFIG,
    crate::paths::KUBELET_CA,
    crate::paths::BOOTSTRAP_CA,
    crate::paths::EXPORTER_TLS_CERT,
    crate::paths::EXPORTER_TLS_KEY,
    crate::paths::CLOUD_NODE_MANAGER_KUBECONFIG,
    crate::paths::CLOUD_NODE_MANAGER_TOKEN,
    crate::paths::KUBECONFIG,
];

/// What a pulled payload may hold: programs, their libraries and PowerShell modules (WMCO's payload is `.exe` files
/// and `hns.psm1`).
const PROGRAM_EXTENSIONS: &[&str] = &[".exe", ".dll", ".psm1"];

/// Whether a payload pulled from a registry may put a file at `path`: a program, library or PowerShell module below
/// `C:\k` with a plain ASCII name, and none of what only sync or the agent writes — wmrender's folder (the agent's
/// own files; its executable comes with sync), containerd's registry configuration, the credentials and CAs,
/// kubelet's kubeconfig, a name with one of wmrender's working suffixes, or an 8.3 short name (`KUBELE~1.EXE`),
/// which Windows may resolve to another file's long name. Compared without case, as Windows does. The reason, if
/// not.
pub fn pulled_program_refusal(path: &NodePath) -> Option<String> {
    let under = |dir: &str| path.is_within(&NodePath::known(dir));
    let name = path.file_name().to_ascii_lowercase();
    let why = if !path.as_str().is_ascii() {
        "its name is not plain ASCII"
    } else if !PROGRAM_EXTENSIONS.iter().any(|e| name.ends_with(e)) {
        "it is not a program, a library or a PowerShell module (.exe, .dll, .psm1)"
    } else if under(crate::paths::WMRENDER_DIR) {
        "it is in wmrender's own folder"
    } else if under(crate::paths::CONTAINERD_REGISTRIES) {
        "it is containerd's registry configuration, which comes with the bundle"
    } else if NOT_PROGRAMS.iter().any(|p| p.eq_ignore_ascii_case(path.as_str())) {
        "it is a credential, a CA or the node's kubeconfig"
    } else if [crate::TEMP_SUFFIX, crate::STAGED_SUFFIX, crate::ASIDE_SUFFIX].iter().any(|s| name.ends_with(s)) {
        "its name ends in one of wmrender's working suffixes"
    } else if path.components().any(|c| c.split('~').skip(1).any(|rest| rest.starts_with(|c: char| c.is_ascii_digit())))
    {
        "it has an 8.3 short name (`~` and a digit), which Windows may resolve to another file"
    } else {
        return None;
    };
    Some(why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> PayloadFile {
        PayloadFile { path: path.into(), sha256: "a".repeat(64), size: 3, version: Some("v1.35.2".into()) }
    }

    #[test]
    fn a_list_reads_back_as_written() {
        let list =
            PayloadList { source: Some("r.example/wmco@sha256:00".into()), files: vec![file("C/k/kubelet.exe")] };
        assert_eq!(PayloadList::parse(&list.to_json()).unwrap(), list);
        assert_eq!(list.files[0].node_path().unwrap().to_string(), r"C:\k\kubelet.exe");
    }

    #[test]
    fn a_pulled_payload_holds_programs_and_nothing_only_sync_or_the_agent_writes() {
        for ok in
            [r"C:\k\kubelet.exe", r"C:\k\containerd\containerd.exe", r"C:\k\cni\win-overlay.exe", r"C:\k\hns.psm1"]
        {
            assert_eq!(pulled_program_refusal(&NodePath::known(ok)), None, "{ok}");
        }
        for bad in [
            r"C:\k\wmrender\services.json",
            r"C:\k\WMRENDER\node.json",
            r"C:\k\containerd\registries\quay.io\hosts.toml",
            r"C:\k\kubeconfig",
            r"C:\k\Bootstrap-Kubeconfig",
            r"C:\k\ca-bundle.crt",
            r"C:\k\tls\certs\tls.key",
            r"C:\k\kubelet.exe.wmrender-staged",
            r"C:\k\kubelet.exe.WMRENDER-TMP",
            r"C:\k\KUBELE~1.EXE",
            r"C:\k\CONTAI~1\x.exe",
            r"C:\k\wmrender\wmrender-node.exe",
            r"C:\k\containerd\registries\quay.io\x.exe",
            r"C:\k\kubelet.conf",
            r"C:\k\cni\config\ovnkube-client.pem",
            r"C:\k\kubélet.exe",
        ] {
            assert!(pulled_program_refusal(&NodePath::known(bad)).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_list_is_untrusted_input() {
        let json = |files: Vec<PayloadFile>| PayloadList { source: None, files }.to_json();
        for path in ["k/kubelet.exe", "C/../Windows/x.exe", r"C/k\x.exe", "C/"] {
            let err = PayloadList::parse(&json(vec![file(path)])).unwrap_err();
            assert!(matches!(err, PayloadListError::Path { .. }), "{path}: {err}");
        }
        let bad = PayloadFile { sha256: "XYZ".into(), ..file("C/k/a.exe") };
        assert!(matches!(PayloadList::parse(&json(vec![bad])), Err(PayloadListError::Digest { .. })));
        let twice = json(vec![file("C/k/a.exe"), file("C/k/A.exe")]);
        assert!(matches!(PayloadList::parse(&twice), Err(PayloadListError::Twice { .. })));
        assert!(matches!(PayloadList::parse(b"{\"files\": [], \"extra\": 1}"), Err(PayloadListError::Json(_))));
    }
}
