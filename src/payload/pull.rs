//! `wmrender payload pull`: the payload out of an OCI image (the WMCO operator image of the cluster's release),
//! fetched as a node's containerd would fetch it: through the cluster's mirrors (the IDMS/ITMS rules `hosts.toml`
//! renders: its mirrors in order, then the source unless `NeverContactSource`), with the pull secret's credentials
//! for each registry, every manifest and layer checked against its digest. The directory is written only when
//! everything checked out, all at once.

use super::error::PayloadError;
use super::extract::{self, Compression, Layer};
use super::{list, write};
use crate::registries::RegistryHost;
use oci_client::errors::OciDistributionError;
use oci_client::manifest as media;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// What `payload pull` is asked to do.
#[derive(Clone, Debug, Default)]
pub struct PullOptions {
    /// `registry/repository@sha256:…` (or `:tag`, resolved to its digest).
    pub image: String,
    pub out: PathBuf,
    /// A `.dockerconfigjson` (the cluster's pull secret, a docker or podman auth file).
    pub registry_config: Option<PathBuf>,
    /// PEM files of CAs to trust besides the system's, for registries with a private CA.
    pub ca_files: Vec<PathBuf>,
    /// The cluster's mirrors, as the inputs give them (`hosts.toml`'s rules).
    pub mirrors: Vec<RegistryHost>,
    /// The cluster's Kubernetes minor: the payload is checked against it before anything is written.
    pub kubernetes: Option<u32>,
    /// The node paths of the programs the rendered services run, when the inputs are given: each is required, and a
    /// platform's own program they do not run is left out. `None`: every file the image has is taken.
    pub runs: Option<Vec<String>>,
}

/// What was pulled.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The image by digest, as the source names it.
    pub image: String,
    /// Where it was fetched from, when a mirror served it.
    pub from: String,
    pub files: usize,
    pub bytes: u64,
    pub notes: Vec<String>,
}

const ACCEPTED: &[&str] = &[
    media::OCI_IMAGE_MEDIA_TYPE,
    media::IMAGE_MANIFEST_MEDIA_TYPE,
    media::OCI_IMAGE_INDEX_MEDIA_TYPE,
    media::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

pub async fn pull(opts: &PullOptions) -> Result<Pulled, PayloadError> {
    let source: Reference = opts.image.parse().map_err(|_| {
        PayloadError::Reference(format!(
            "`{}` is not an image reference: expected registry/repository@sha256:<64 hex digits> (or \
             registry/repository:tag), e.g. registry.redhat.io/openshift4-wincw/windows-machine-config-rhel9-operator@sha256:…",
            opts.image.escape_debug()
        ))
    })?;
    let auths = crate::oci::credentials(opts.registry_config.as_deref())?;
    let client = crate::oci::client(&opts.ca_files)?;
    write::check_destination(&opts.out)?;

    let places = candidates(&source, &opts.mirrors);
    if places.is_empty() {
        return Err(PayloadError::Image {
            image: opts.image.clone(),
            why: format!(
                "nowhere to fetch it from: the inputs say NeverContactSource for {} and list no mirror that may \
                 resolve a tag (an ImageTagMirrorSet's); name the image by digest",
                source.registry()
            ),
        });
    }
    let mut failures = Vec::new();
    let mut refused = false;
    for candidate in places {
        let auth = crate::oci::auth_for(&auths, candidate.resolve_registry());
        match fetch(&client, &source, &candidate, &auth, opts).await {
            Ok(pulled) => return Ok(pulled),
            Err(Attempt::Refused(why)) => {
                refused = true;
                failures.push(said(&source, &candidate, why));
            }
            Err(Attempt::Failed(why)) => failures.push(said(&source, &candidate, why)),
            Err(Attempt::Final(e)) => return Err(e),
        }
    }
    let why = failures.join("; ");
    if refused {
        Err(PayloadError::Image { image: opts.image.clone(), why })
    } else {
        Err(PayloadError::Registry { what: "cannot pull", image: opts.image.clone(), why })
    }
}

/// What one place said: as it is for the image itself, with the place for a mirror.
fn said(source: &Reference, candidate: &Reference, why: String) -> String {
    if candidate.whole() == source.whole() { why } else { format!("the mirror {}: {why}", candidate.whole()) }
}

/// How one source or mirror failed: `Refused` its content (a wrong digest, no such image: input), `Failed` to
/// answer (a registry that is down), `Final` what no other mirror changes (the payload does not fit, the disk).
enum Attempt {
    Refused(String),
    Failed(String),
    Final(PayloadError),
}

/// Where the image may be fetched from, in order: the mirrors of its registry (for a tag only those that may
/// resolve tags, as the ImageTagMirrorSet's), then the source itself unless its mirrors must be used alone.
pub fn candidates(source: &Reference, mirrors: &[RegistryHost]) -> Vec<Reference> {
    let mut out = Vec::new();
    let host = mirrors.iter().find(|h| h.host == source.registry());
    if let Some(host) = host {
        for m in host.mirrors.iter().filter(|m| m.resolve || source.digest().is_some()) {
            let (registry, path) = m.prefix.split_once('/').unwrap_or((m.prefix.as_str(), ""));
            let repository = if path.is_empty() {
                source.repository().to_string()
            } else {
                format!("{path}/{}", source.repository())
            };
            out.push(match (source.digest(), source.tag()) {
                (Some(d), _) => Reference::with_digest(registry.into(), repository, d.into()),
                (None, Some(t)) => Reference::with_tag(registry.into(), repository, t.into()),
                (None, None) => Reference::with_tag(registry.into(), repository, "latest".into()),
            });
        }
    }
    if !host.is_some_and(|h| h.never_contact_source) {
        out.push(source.clone());
    }
    out
}

async fn fetch(
    client: &Client,
    source: &Reference,
    from: &Reference,
    auth: &RegistryAuth,
    opts: &PullOptions,
) -> Result<Pulled, Attempt> {
    let (bytes, _) = client.pull_manifest_raw(from, auth, ACCEPTED).await.map_err(attempt)?;
    let digest = format!("sha256:{}", crate::hex(&Sha256::digest(&bytes)));
    if let Some(wanted) = from.digest()
        && wanted != digest
    {
        return Err(Attempt::Refused(format!("it served a manifest whose digest is {digest}, not {wanted}")));
    }
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| Attempt::Refused("its manifest is not JSON".into()))?;
    // A multi-platform image: the payload is in its linux/amd64 image (the operator's).
    if manifest["manifests"].is_array() {
        let chosen = manifest["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["platform"]["os"] == "linux" && m["platform"]["architecture"] == "amd64");
        let Some(entry_digest) = chosen.and_then(|m| m["digest"].as_str()) else {
            return Err(Attempt::Refused("its index has no linux/amd64 image".into()));
        };
        let by_digest = from.clone_with_digest(entry_digest.to_string());
        let (inner, _) = client.pull_manifest_raw(&by_digest, auth, ACCEPTED).await.map_err(attempt)?;
        if format!("sha256:{}", crate::hex(&Sha256::digest(&inner))) != entry_digest {
            return Err(Attempt::Refused(format!("its manifest {entry_digest} does not have that digest")));
        }
        manifest = serde_json::from_slice(&inner).map_err(|_| Attempt::Refused("its manifest is not JSON".into()))?;
    }
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    if layers.is_empty() {
        return Err(Attempt::Refused("its manifest lists no layers".into()));
    }

    let staging = write::Staging::new(&opts.out).map_err(Attempt::Final)?;
    let mut on_disk = Vec::new();
    for (n, layer) in layers.iter().enumerate() {
        let media_type = layer["mediaType"].as_str().unwrap_or("");
        let compression = match media_type {
            media::IMAGE_LAYER_GZIP_MEDIA_TYPE | media::IMAGE_DOCKER_LAYER_GZIP_MEDIA_TYPE => Compression::Gzip,
            media::IMAGE_LAYER_MEDIA_TYPE | media::IMAGE_DOCKER_LAYER_TAR_MEDIA_TYPE => Compression::None,
            other => {
                return Err(Attempt::Refused(format!(
                    "layer {} is `{}`, not a tar layer wmrender reads",
                    n + 1,
                    other.escape_debug()
                )));
            }
        };
        let Some(layer_digest) = layer["digest"].as_str().filter(|d| d.starts_with("sha256:")) else {
            return Err(Attempt::Refused(format!("layer {} has no sha256 digest", n + 1)));
        };
        let path = staging.scratch().join(format!("layer-{n}"));
        let file = tokio::fs::File::create(&path)
            .await
            .map_err(|source| Attempt::Final(PayloadError::Write { file: path.clone(), source }))?;
        // A registry may send more than the manifest says; no more is written than that.
        let size = layer["size"].as_u64().unwrap_or(0);
        let file = Limited { inner: file, left: size };
        let descriptor = media::OciDescriptor {
            media_type: media_type.to_string(),
            digest: layer_digest.to_string(),
            size: size as i64,
            ..Default::default()
        };
        client.pull_blob(from, &descriptor, file).await.map_err(|e| match attempt(e) {
            Attempt::Refused(why) => Attempt::Refused(format!("layer {} ({layer_digest}): {why}", n + 1)),
            other => other,
        })?;
        on_disk.push(Layer { path, compression, digest: layer_digest.to_string() });
    }

    let by_digest = format!("{}@{digest}", source_name(source));
    let (written, notes) =
        extract::payload(&by_digest, &on_disk, staging.scratch(), staging.payload(), opts.runs.as_deref())
            .map_err(Attempt::Final)?;
    let listed = list::make(staging.payload(), Some(by_digest.clone())).map_err(Attempt::Final)?;
    let mut notes = notes;
    if let Some(minor) = opts.kubernetes {
        notes.extend(list::fits(&listed, minor, &opts.out).map_err(Attempt::Final)?);
    }
    let bytes: u64 = listed.files.iter().map(|f| f.size).sum();
    staging.finish(&listed).map_err(Attempt::Final)?;
    Ok(Pulled {
        image: by_digest,
        from: if from.registry() == source.registry() { String::new() } else { from.whole() },
        files: written.len(),
        bytes,
        notes,
    })
}

/// A writer that refuses to take more than `left` bytes: the blob's size as its manifest states it.
struct Limited<W> {
    inner: W,
    left: u64,
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Limited<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if buf.len() as u64 > self.left {
            let e = std::io::Error::other("the registry sent more than the layer's size in the manifest");
            return std::task::Poll::Ready(Err(e));
        }
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            self.left -= n as u64;
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// `registry/repository`, as the user wrote the image (without tag or digest).
fn source_name(source: &Reference) -> String {
    format!("{}/{}", source.registry(), source.repository())
}

/// What a registry's answer means: content refused, or a registry that did not answer as one.
fn attempt(e: OciDistributionError) -> Attempt {
    use OciDistributionError as E;
    match &e {
        E::DigestError(d) => Attempt::Refused(format!("a digest does not match: {d}; the content was altered")),
        E::ImageManifestNotFoundError(_) => Attempt::Refused("no such image".into()),
        E::RegistryError { envelope, .. } => {
            use oci_client::errors::OciErrorCode as C;
            let unknown = envelope
                .errors
                .iter()
                .any(|x| matches!(x.code, C::ManifestUnknown | C::NameUnknown | C::BlobUnknown | C::NotFound));
            let said: Vec<String> = envelope.errors.iter().map(|x| x.message.clone()).collect();
            if unknown {
                Attempt::Refused(format!("no such image (the registry says: {})", said.join(", ")))
            } else {
                Attempt::Refused(format!("the registry refused: {}", said.join(", ")))
            }
        }
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => {
            Attempt::Refused(crate::oci::CREDENTIALS_REFUSED.into())
        }
        E::ServerError { code, .. } if *code == 404 => Attempt::Refused("no such image".into()),
        // What Limited refuses: more bytes than the manifest said.
        E::IoError(io) if io.kind() == std::io::ErrorKind::Other => Attempt::Refused(io.to_string()),
        E::RequestError(r) => Attempt::Failed(crate::oci::request_reason(r)),
        _ => Attempt::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registries::Mirror;

    fn host(never: bool, mirrors: &[(&str, bool)]) -> RegistryHost {
        RegistryHost {
            host: "registry.redhat.io".into(),
            never_contact_source: never,
            mirrors: mirrors.iter().map(|(p, r)| Mirror { prefix: p.to_string(), resolve: *r }).collect(),
        }
    }

    #[test]
    fn mirrors_first_then_the_source_unless_never() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let image: Reference = format!("registry.redhat.io/openshift4-wincw/wmco@{digest}").parse().unwrap();
        let hosts = [host(false, &[("mirror.example.com:5000/rh", false), ("other.example.com", true)])];
        let names: Vec<String> = candidates(&image, &hosts).iter().map(|r| r.whole()).collect();
        assert_eq!(
            names,
            [
                format!("mirror.example.com:5000/rh/openshift4-wincw/wmco@{digest}"),
                format!("other.example.com/openshift4-wincw/wmco@{digest}"),
                format!("registry.redhat.io/openshift4-wincw/wmco@{digest}"),
            ]
        );
        let never = [host(true, &[("mirror.example.com:5000/rh", false)])];
        assert_eq!(candidates(&image, &never).len(), 1);

        // A tag goes only to the mirrors that may resolve tags.
        let tagged: Reference = "registry.redhat.io/openshift4-wincw/wmco:v10.21.1".parse().unwrap();
        let names: Vec<String> = candidates(&tagged, &hosts).iter().map(|r| r.whole()).collect();
        assert_eq!(
            names,
            ["other.example.com/openshift4-wincw/wmco:v10.21.1", "registry.redhat.io/openshift4-wincw/wmco:v10.21.1"]
        );
        // … and with only digest mirrors and NeverContactSource a tag has nowhere to go (pull says so).
        assert!(candidates(&tagged, &never).is_empty());
    }

    #[tokio::test]
    async fn no_more_is_written_than_the_manifest_says() {
        use tokio::io::AsyncWriteExt;
        let mut w = Limited { inner: Vec::new(), left: 4 };
        w.write_all(b"abcd").await.unwrap();
        let e = w.write_all(b"e").await.unwrap_err();
        assert!(e.to_string().contains("more than the layer's size"));
        assert_eq!(w.inner, b"abcd");
    }
}
