//! What a node should hold, and what must change on it: the rendered bundle (with sync-time secrets merged in),
//! the credential files, and the payload, each with its sha256, compared with the node's manifest.

use super::secrets::Secrets;
use crate::render::registries::REGISTRIES_DIR;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// On the node, the record of what wmrender pushed. Written last, so it never claims a file that is not there.
pub const NODE_MANIFEST: &str = r"C:\k\wmrender\manifest.json";

#[derive(Clone, Debug)]
pub enum Source {
    /// Small files, held in memory (the bundle, merged secrets).
    Bytes(Arc<Vec<u8>>),
    /// Payload binaries, streamed from disk.
    File(PathBuf),
}

#[derive(Clone, Debug)]
pub struct Desired {
    pub node_path: String,
    pub sha256: String,
    pub size: u64,
    pub source: Source,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeManifest {
    pub wmrender: String,
    pub files: Vec<ManifestEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ManifestEntry {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// `node/C/k/x` (bundle) → `C:\k\x`.
pub fn node_path(bundle_path: &str) -> Option<String> {
    let rest = bundle_path.strip_prefix("node/C/")?;
    Some(format!("C:\\{}", rest.replace('/', "\\")))
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex(&Sha256::digest(bytes))
}

fn from_bytes(node_path: String, bytes: Vec<u8>) -> Desired {
    Desired { sha256: sha256_hex(&bytes), size: bytes.len() as u64, source: Source::Bytes(Arc::new(bytes)), node_path }
}

/// Everything every node should hold, sorted by node path.
pub fn desired(
    bundle: &[(String, Vec<u8>)],
    secrets: &Secrets,
    payload: Option<&Path>,
) -> Result<Vec<Desired>, String> {
    let mut all: BTreeMap<String, Desired> = BTreeMap::new();
    for (path, bytes) in bundle {
        let Some(np) = node_path(path) else { continue };
        let bytes = if path.starts_with(REGISTRIES_DIR) && path.ends_with("/hosts.toml") {
            secrets.merge_into_hosts_toml(bytes)
        } else {
            bytes.clone()
        };
        all.insert(np.clone(), from_bytes(np, bytes));
    }
    for (np, secret) in &secrets.files {
        all.insert(np.to_string(), from_bytes(np.to_string(), secret.bytes().to_vec()));
    }
    if let Some(dir) = payload {
        for (np, file) in payload_files(dir)? {
            if all.contains_key(&np) {
                return Err(format!("{} would overwrite the rendered {np}", file.display()));
            }
            let (sha256, size) = hash_file(&file)?;
            all.insert(np.clone(), Desired { node_path: np, sha256, size, source: Source::File(file) });
        }
    }
    all.remove(NODE_MANIFEST);
    Ok(all.into_values().collect())
}

/// The payload directory is laid out by node path: `DIR/C/k/kubelet.exe` is `C:\k\kubelet.exe`.
fn payload_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let root = dir.join("C");
    if !root.is_dir() {
        return Err(format!(
            "{} has no C/ folder: lay the payload out by node path, e.g. C/k/kubelet.exe",
            dir.display()
        ));
    }
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("reading {}: {e}", d.display()))?;
        for entry in entries {
            let p = entry.map_err(|e| format!("reading {}: {e}", d.display()))?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&root).map_err(|e| e.to_string())?;
                let parts: Vec<String> =
                    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                out.push((format!("C:\\{}", parts.join("\\")), p));
            }
        }
    }
    Ok(out)
}

fn hash_file(path: &Path) -> Result<(String, u64), String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((crate::hex(&h.finalize()), size))
}

/// What one node needs.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub add: Vec<String>,
    pub change: Vec<String>,
    pub remove: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.change.is_empty() && self.remove.is_empty()
    }

    /// Every node path the install step must know about.
    pub fn touched(&self) -> Vec<String> {
        let mut v: Vec<String> = self.add.iter().chain(&self.change).chain(&self.remove).cloned().collect();
        v.sort();
        v
    }
}

pub fn diff(desired: &[Desired], on_node: &NodeManifest) -> Changes {
    let have: BTreeMap<&str, &str> = on_node.files.iter().map(|e| (e.path.as_str(), e.sha256.as_str())).collect();
    let mut c = Changes::default();
    for d in desired {
        match have.get(d.node_path.as_str()) {
            None => c.add.push(d.node_path.clone()),
            Some(sum) if *sum != d.sha256 => c.change.push(d.node_path.clone()),
            Some(_) => {}
        }
    }
    let wanted: std::collections::BTreeSet<&str> = desired.iter().map(|d| d.node_path.as_str()).collect();
    c.remove = on_node.files.iter().filter(|e| !wanted.contains(e.path.as_str())).map(|e| e.path.clone()).collect();
    c
}

pub fn manifest_of(desired: &[Desired]) -> NodeManifest {
    NodeManifest {
        wmrender: env!("CARGO_PKG_VERSION").into(),
        files: desired
            .iter()
            .map(|d| ManifestEntry { path: d.node_path.clone(), sha256: d.sha256.clone(), size: d.size })
            .collect(),
    }
}

/// The services a change restarts, from the bundle's services.json (for `--dry-run`).
pub fn services_to_restart(bundle: &[(String, Vec<u8>)], touched: &[String]) -> Vec<String> {
    let Some((_, bytes)) = bundle.iter().find(|(p, _)| p == "node/C/k/wmrender/services.json") else { return vec![] };
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(bytes) else { return vec![] };
    doc["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| {
            s["files"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|f| f.as_str().is_some_and(|f| touched.iter().any(|t| t == f)))
        })
        .filter_map(|s| s["name"].as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_finds_adds_changes_and_removals() {
        let desired =
            vec![from_bytes(r"C:\k\a".into(), b"new".to_vec()), from_bytes(r"C:\k\b".into(), b"same".to_vec())];
        let on_node = NodeManifest {
            wmrender: "0".into(),
            files: vec![
                ManifestEntry { path: r"C:\k\b".into(), sha256: sha256_hex(b"same"), size: 4 },
                ManifestEntry { path: r"C:\k\old".into(), sha256: "x".into(), size: 1 },
            ],
        };
        let c = diff(&desired, &on_node);
        assert_eq!((c.add, c.change, c.remove), (vec![r"C:\k\a".to_string()], vec![], vec![r"C:\k\old".to_string()]));
    }

    #[test]
    fn bundle_paths_map_to_node_paths() {
        assert_eq!(
            node_path("node/C/k/containerd/registries/quay.io/hosts.toml").unwrap(),
            r"C:\k\containerd\registries\quay.io\hosts.toml"
        );
        assert_eq!(node_path("cluster/x.yaml"), None);
    }
}
