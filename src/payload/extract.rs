//! From an image's layers to a payload directory: the layers applied in order as a container runtime applies them
//! (whiteouts delete what an earlier layer added), the files WMCO's `/payload` holds taken out ([`super::wmco`]),
//! decompressed where the image stores them gzipped, checked against the image's own `sha256sum` where it has one,
//! and laid out by node path. No network here: the layers are files whose digests the caller verified.

use super::error::PayloadError;
use super::wmco::{self, COMPRESSED, SHA256SUM, Taken};
use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use wmrender_contract::NodePath;

/// The largest file taken from an image: WMCO's largest program is about 120 MB; a file past this is refused rather
/// than unpacked (an image is input: a layer of a few megabytes can hold terabytes of zeros).
pub const MAX_FILE: u64 = 1 << 30;

/// How a layer is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// A layer's blob on disk.
pub struct Layer {
    pub path: PathBuf,
    pub compression: Compression,
    /// `sha256:…`, for messages.
    pub digest: String,
}

/// What the layers held of `/payload`, staged on disk.
#[derive(Default)]
struct Staged {
    /// `/payload`-relative path → the staged copy.
    files: BTreeMap<String, PathBuf>,
    /// `/payload/sha256sum`, when the image has one.
    sha256sum: Option<Vec<u8>>,
}

/// Lays the payload of `layers` out in `out` (`out/C/k/kubelet.exe`, …), using `scratch` for what it unpacks.
/// `runs` are the node paths of the programs the rendered services run, when the cluster is known: each the image
/// holds a file for is required, and a platform's own program the services do not run (another platform's
/// cloud-node-manager or credential provider) is left out; `None` takes every file the image has. Returns the node paths written, and what the caller should say (no checksums, say).
pub fn payload(
    image: &str,
    layers: &[Layer],
    scratch: &Path,
    out: &Path,
    runs: Option<&[String]>,
) -> Result<(Vec<NodePath>, Vec<String>), PayloadError> {
    let fail = |why: String| PayloadError::Image { image: image.to_string(), why };
    let mut staged = Staged::default();
    for (n, layer) in layers.iter().enumerate() {
        apply(layer, n, scratch, &mut staged)
            .map_err(|why| fail(format!("layer {} ({}): {why}", n + 1, layer.digest)))?;
    }
    let sums = match &staged.sha256sum {
        Some(bytes) => Some(
            wmco::checksums(&String::from_utf8_lossy(bytes))
                .map_err(|why| fail(format!("/payload/{SHA256SUM}: {why}")))?,
        ),
        None => None,
    };
    let mut notes = Vec::new();
    if sums.is_none() {
        notes.push(format!(
            "{image} carries no /payload/{SHA256SUM} (WMCO before 10.21.1 ships none): its files are checked by the \
             layers' digests only"
        ));
    }

    let mut missing = Vec::new();
    let mut written = Vec::new();
    for t in wmco::FILES {
        let run = runs.is_some_and(|r| r.iter().any(|p| p.eq_ignore_ascii_case(t.node)));
        let needed = t.required || run;
        if !needed && runs.is_some() {
            continue;
        }
        let Some((stored, compressed)) = find(&staged, t) else {
            if needed {
                missing.push(format!("/payload/{}", t.image[0]));
            }
            continue;
        };
        let node = NodePath::known(t.node);
        let dest = out.join(node.bundle_path().trim_start_matches("node/"));
        let name = t.image[0].rsplit('/').next().unwrap_or(t.image[0]);
        let bytes = if compressed { unpack_one(stored, name) } else { read(stored) }.map_err(|why| {
            fail(format!("/payload/{}{}: {why}", t.image[0], if compressed { COMPRESSED } else { "" }))
        })?;
        if let Some(sums) = &sums {
            let digest = crate::hex(&Sha256::digest(&bytes));
            let listed: Vec<&String> = sums.iter().filter(|(n, _)| n == name).map(|(_, d)| d).collect();
            if listed.is_empty() {
                return Err(fail(format!("/payload/{SHA256SUM} does not list {name}")));
            }
            if !listed.contains(&&digest) {
                return Err(fail(format!(
                    "{name} has sha256 {digest}, /payload/{SHA256SUM} says {}: the image was altered",
                    listed.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(" or ")
                )));
            }
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|source| PayloadError::Write { file: parent.into(), source })?;
        }
        std::fs::write(&dest, &bytes).map_err(|source| PayloadError::Write { file: dest.clone(), source })?;
        written.push(node);
    }
    if !missing.is_empty() {
        return Err(fail(format!("it is not a WMCO operator image with a payload: {} missing", missing.join(", "))));
    }
    Ok((written, notes))
}

/// The staged copy of `t`, at its current path or an older one, plain or compressed.
fn find<'a>(staged: &'a Staged, t: &Taken) -> Option<(&'a Path, bool)> {
    t.image.iter().find_map(|p| {
        let plain = staged.files.get(*p).map(|f| (f.as_path(), false));
        plain.or_else(|| staged.files.get(&format!("{p}{COMPRESSED}")).map(|f| (f.as_path(), true)))
    })
}

/// Applies one layer: its whiteouts, then its `/payload` files.
fn apply(layer: &Layer, n: usize, scratch: &Path, staged: &mut Staged) -> Result<(), String> {
    let file = std::fs::File::open(&layer.path).map_err(|e| crate::error::io_reason(&e))?;
    let reader: Box<dyn Read> = match layer.compression {
        Compression::Gzip => Box::new(GzDecoder::new(std::io::BufReader::new(file))),
        Compression::None => Box::new(std::io::BufReader::new(file)),
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive.entries().map_err(|e| format!("not a tar archive: {e}"))?;
    for (i, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| format!("not a tar archive: {e}"))?;
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw);
        let name = name.trim_start_matches("./").trim_start_matches('/').trim_end_matches('/');
        let Some(rel) = name.strip_prefix("payload/").or(if name == "payload" { Some("") } else { None }) else {
            continue;
        };
        let (dir, base) = rel.rsplit_once('/').unwrap_or(("", rel));
        if base == ".wh..wh..opq" {
            // An opaque directory: what earlier layers put under it is gone.
            let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
            staged.files.retain(|p, _| !p.starts_with(&prefix));
            if dir.is_empty() {
                staged.sha256sum = None;
            }
            continue;
        }
        if let Some(gone) = base.strip_prefix(".wh.") {
            let gone = if dir.is_empty() { gone.to_string() } else { format!("{dir}/{gone}") };
            staged.files.retain(|p, _| p != &gone && !p.starts_with(&format!("{gone}/")));
            if gone == SHA256SUM {
                staged.sha256sum = None;
            }
            continue;
        }
        if rel.is_empty() {
            continue;
        }
        let kind = entry.header().entry_type();
        let wanted = rel == SHA256SUM || wmco::taken(rel).is_some();
        if !wanted {
            continue;
        }
        if !kind.is_file() {
            return Err(format!("/payload/{rel} is not a regular file (tar entry type {:?})", kind));
        }
        if rel == SHA256SUM {
            let mut bytes = Vec::new();
            (&mut entry).take(1 << 20).read_to_end(&mut bytes).map_err(|e| format!("/payload/{rel}: {e}"))?;
            staged.sha256sum = Some(bytes);
            continue;
        }
        let size = entry.header().size().map_err(|e| format!("/payload/{rel}: {e}"))?;
        if size > MAX_FILE {
            return Err(format!("/payload/{rel} is {size} bytes, more than any payload file ({MAX_FILE})"));
        }
        let copy = scratch.join(format!("layer{n}-entry{i}"));
        let mut out =
            std::fs::File::create(&copy).map_err(|e| format!("{}: {}", copy.display(), crate::error::io_reason(&e)))?;
        std::io::copy(&mut (&mut entry).take(MAX_FILE), &mut out).map_err(|e| format!("/payload/{rel}: {e}"))?;
        staged.files.insert(rel.to_string(), copy);
    }
    Ok(())
}

/// The one file `name` of a `<name>.tar.gz` as WMCO packs it (`tar -cf - <name> | gzip -9`).
fn unpack_one(archive: &Path, name: &str) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(archive).map_err(|e| crate::error::io_reason(&e))?;
    let mut tar = tar::Archive::new(GzDecoder::new(std::io::BufReader::new(file)));
    let mut found = None;
    for entry in tar.entries().map_err(|e| format!("not a gzipped tar archive: {e}"))? {
        let mut entry = entry.map_err(|e| format!("not a gzipped tar archive: {e}"))?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let base = path.trim_start_matches("./").trim_end_matches('/');
        if !entry.header().entry_type().is_file() {
            continue;
        }
        if base != name {
            return Err(format!("holds `{}`, not only {name}", base.escape_debug()));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("not a gzipped tar archive: {e}"))?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(format!("{name} unpacks to more than any payload file ({MAX_FILE} bytes)"));
        }
        if found.replace(bytes).is_some() {
            return Err(format!("holds {name} twice"));
        }
    }
    found.ok_or_else(|| format!("holds no {name}"))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| crate::error::io_reason(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar layer of `(path, bytes)` entries.
    fn layer(dir: &Path, name: &str, entries: &[(&str, &[u8])]) -> Layer {
        let path = dir.join(name);
        let mut b = tar::Builder::new(std::fs::File::create(&path).unwrap());
        for (p, bytes) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, p, *bytes).unwrap();
        }
        b.finish().unwrap();
        Layer { path, compression: Compression::None, digest: format!("sha256:{name}") }
    }

    fn gz(name: &str, bytes: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, bytes).unwrap();
        b.into_inner().unwrap().finish().unwrap()
    }

    fn all_required() -> Vec<(String, Vec<u8>)> {
        wmco::FILES
            .iter()
            .filter(|t| t.required)
            .map(|t| (format!("payload/{}", t.image[0]), t.image[0].as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn plain_files_with_a_later_layer_deleting_one() {
        let tmp = tempfile::tempdir().unwrap();
        let files = all_required();
        let mut entries: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        entries.push(("payload/containerd/containerd_conf.toml", b"not taken"));
        let first = layer(tmp.path(), "a", &entries);
        let out = tmp.path().join("out");
        let (written, notes) = payload("img", std::slice::from_ref(&first), tmp.path(), &out, None).unwrap();
        assert_eq!(written.len(), files.len());
        assert_eq!(std::fs::read(out.join("C/k/kubelet.exe")).unwrap(), b"kube-node/kubelet.exe");
        assert!(!out.join("C/k/containerd/containerd_conf.toml").exists());
        assert!(notes[0].contains("no /payload/sha256sum"));

        let second = layer(tmp.path(), "b", &[("payload/kube-node/.wh.kubelet.exe", b"")]);
        let err = payload("img", &[first, second], tmp.path(), &tmp.path().join("out2"), None).unwrap_err();
        assert!(err.to_string().contains("/payload/kube-node/kubelet.exe missing"), "{err}");
    }

    #[test]
    fn compressed_files_are_checked_against_the_images_sha256sum() {
        let tmp = tempfile::tempdir().unwrap();
        let files = all_required();
        let packed: Vec<(String, Vec<u8>)> =
            files.iter().map(|(p, b)| (format!("{p}{COMPRESSED}"), gz(p.rsplit('/').next().unwrap(), b))).collect();
        let sums: String = files
            .iter()
            .map(|(p, b)| format!("{}  /build/x/{}\n", crate::hex(&Sha256::digest(b)), p.rsplit('/').next().unwrap()))
            .collect();
        let mut entries: Vec<(&str, &[u8])> = packed.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        entries.push(("payload/sha256sum", sums.as_bytes()));
        let l = layer(tmp.path(), "a", &entries);
        let (written, notes) =
            payload("img", std::slice::from_ref(&l), tmp.path(), &tmp.path().join("out"), None).unwrap();
        assert_eq!(written.len(), files.len());
        assert!(notes.is_empty());
        assert_eq!(std::fs::read(tmp.path().join("out/C/k/hns.psm1")).unwrap(), b"powershell/hns.psm1");

        // A file whose bytes are not the listed ones.
        let tampered = sums.replace(&crate::hex(&Sha256::digest(b"kube-node/kubelet.exe")), &"0".repeat(64));
        let mut entries: Vec<(&str, &[u8])> = packed.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        entries.push(("payload/sha256sum", tampered.as_bytes()));
        let l = layer(tmp.path(), "b", &entries);
        let err = payload("img", &[l], tmp.path(), &tmp.path().join("out2"), None).unwrap_err().to_string();
        assert!(err.contains("kubelet.exe has sha256") && err.contains("the image was altered"), "{err}");
    }

    #[test]
    fn a_platform_file_is_required_where_the_platform_needs_it() {
        let tmp = tempfile::tempdir().unwrap();
        let files = all_required();
        let entries: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        let l = layer(tmp.path(), "a", &entries);
        let err = payload(
            "img",
            &[l],
            tmp.path(),
            &tmp.path().join("out"),
            Some(&[r"C:\k\azure-cloud-node-manager.exe".to_string()]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/payload/azure-cloud-node-manager.exe missing"), "{err}");
    }
}
