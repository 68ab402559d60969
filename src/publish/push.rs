//! Pushing an artifact and its signatures to a registry: every blob the registry lacks (those the tag's current
//! manifest names are known to be there; the others are asked for, so a file already there is not sent again), then
//! the manifest once: under the tag when one was given (which stores it by its digest too), else by its digest.

use super::artifact::{Artifact, Blob, Descriptor, MANIFEST_MEDIA_TYPE};
use super::error::PublishError;
use super::signature::{self, Layer, SigningKey};
use oci_client::errors::OciDistributionError;
use oci_client::{Client, Reference};
use std::path::PathBuf;
use wmrender_contract::signed_bundle::{Claim, tag_for};

/// What `publish` is asked to do.
pub struct PublishOptions {
    /// `registry/repository[:tag]`.
    pub to: String,
    /// A `.dockerconfigjson`; default: the usual auth files.
    pub registry_config: Option<PathBuf>,
    /// PEM files of CAs to trust besides the system's.
    pub ca_files: Vec<PathBuf>,
    /// Sign the published digest.
    pub signing: Option<Signing>,
}

/// Who signs, and what the signature says besides the digest.
pub struct Signing {
    pub keys: Vec<SigningKey>,
    pub version: u64,
    pub downgrade: bool,
}

/// What was published.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// `registry/repository@sha256:<hex>`.
    pub reference: String,
    pub tag: Option<String>,
    pub blobs_sent: usize,
    pub blobs_present: usize,
    /// Blob and manifest bytes sent.
    pub bytes_sent: u64,
    /// `sha256:<hex>` of each key that signed (of its public key).
    pub signed_by: Vec<String>,
    /// Signatures that were there and are kept.
    pub signatures_kept: usize,
    /// The digest of the signature image stored as an OCI 1.1 referrer of the bundle, where the registry has the
    /// referrers API.
    pub referrer: Option<String>,
    /// What went wrong without failing the publish.
    pub warnings: Vec<String>,
}

/// Where the artifact goes: the repository, and the tag if one was given.
pub struct Target {
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
}

impl Target {
    pub fn parse(to: &str) -> Result<Target, PublishError> {
        let usage = |why: &str| {
            PublishError::Usage(format!(
                "--to `{}`: {why}; expected registry/repository or registry/repository:tag, e.g. \
                 registry.example.com/fleet/windows-bundle:main",
                to.escape_debug()
            ))
        };
        let reference: Reference = to.parse().map_err(|_| usage("not a repository reference"))?;
        if reference.digest().is_some() {
            return Err(usage("publish computes the digest; give no @sha256:…"));
        }
        // A reference parses to docker.io when its first part is no host; say which registry is meant instead.
        let first = to.split('/').next().unwrap_or_default();
        if !to.contains('/') || !(first.contains('.') || first.contains(':') || first == "localhost") {
            return Err(usage("name the registry (its host, with the port if not 443)"));
        }
        let tag = to.rsplit_once('/').and_then(|(_, last)| last.split_once(':')).map(|(_, t)| t.to_string());
        Ok(Target { registry: reference.registry().to_string(), repository: reference.repository().to_string(), tag })
    }

    fn by_digest(&self, digest: &str) -> Reference {
        Reference::with_digest(self.registry.clone(), self.repository.clone(), digest.into())
    }

    fn by_tag(&self, tag: &str) -> Reference {
        Reference::with_tag(self.registry.clone(), self.repository.clone(), tag.into())
    }
}

/// Pushes the artifact, then signs it when asked.
pub async fn publish(artifact: &Artifact, opts: &PublishOptions) -> Result<Published, PublishError> {
    let target = Target::parse(&opts.to)?;
    let auths = crate::oci::credentials(opts.registry_config.as_deref())?;
    let client = crate::oci::client(&opts.ca_files)?;
    let auth = crate::oci::auth_for(&auths, &target.registry);
    client.store_auth_if_needed(&target.registry, &auth).await;

    let reference = target.by_digest(&artifact.digest);
    let mut out = Published { reference: reference.whole(), tag: target.tag.clone(), ..Published::default() };
    // The blobs the tag's current manifest names are in the repository already: not asked for one by one.
    let known = match &target.tag {
        Some(tag) => match client.pull_manifest_raw(&target.by_tag(tag), &auth, &[MANIFEST_MEDIA_TYPE]).await {
            Ok((bytes, _)) => named_blobs(&bytes),
            Err(e) if not_found(&e) => Vec::new(),
            Err(e) => return Err(failure(&reference, "reading the manifest the tag names now", e)),
        },
        None => Vec::new(),
    };
    let unknown: Vec<Blob> = artifact.blobs.iter().filter(|b| !known.contains(&b.digest)).cloned().collect();
    out.blobs_present += artifact.blobs.len() - unknown.len();
    send_blobs(&client, &reference, &unknown, &mut out).await?;
    // A manifest pushed under a tag is stored by its digest too: one upload either way.
    let at = target.tag.as_ref().map(|t| target.by_tag(t)).unwrap_or_else(|| reference.clone());
    send_manifest(&client, &at, &artifact.manifest, &mut out).await?;
    if let Some(signing) = &opts.signing {
        let http = crate::oci::http_client(&opts.ca_files)?;
        sign(&client, &http, &target, artifact, signing, &auth, &mut out).await?;
    }
    Ok(out)
}

/// Signs the artifact's digest with each key, keeping the signatures already under its `sha256-<hex>.sig` tag, and
/// writes the signature image there; where the registry has the referrers API, the same signatures go up as a
/// referrer of the bundle too (cosign's OCI 1.1 form), for verifiers that look there (`cosign verify
/// --experimental-oci11`, admission policies). A node reads either.
async fn sign(
    client: &Client,
    http: &reqwest::Client,
    target: &Target,
    artifact: &Artifact,
    signing: &Signing,
    auth: &oci_client::secrets::RegistryAuth,
    out: &mut Published,
) -> Result<(), PublishError> {
    let claim = Claim {
        repository: format!("{}/{}", target.registry, target.repository),
        manifest_digest: artifact.digest.clone(),
        version: signing.version,
        downgrade: signing.downgrade,
    };
    let payload = Blob::of(claim.payload());
    let sig_ref = target.by_tag(&tag_for(&artifact.digest));
    let mut layers = match client.pull_manifest_raw(&sig_ref, auth, &[MANIFEST_MEDIA_TYPE]).await {
        Ok((bytes, _)) => signature::stored_layers(&bytes),
        Err(e) if not_found(&e) => Vec::new(),
        Err(e) => return Err(failure(&sig_ref, "reading the signatures there", e)),
    };
    out.signatures_kept = layers.len();
    for key in &signing.keys {
        // Signing again with a key that already signed this very payload adds nothing (cosign's rule too).
        let signed = layers
            .iter()
            .any(|l| l.payload_digest == payload.digest && key.public().verifies(&payload.bytes, &l.signature));
        if !signed {
            layers.push(Layer {
                payload_digest: payload.digest.clone(),
                payload_size: payload.bytes.len() as u64,
                signature: key.sign(&payload.bytes)?,
            });
        }
        out.signed_by.push(key.id.clone());
    }
    let (config, manifest) = signature::image(&layers);
    send_blobs(client, &sig_ref, &[payload, config], out).await?;
    send_manifest(client, &sig_ref, &manifest, out).await?;
    let repository = target.by_digest(&artifact.digest);
    if super::referrers::has_api(http, client, &repository, &artifact.digest, auth).await? {
        let subject = Descriptor {
            media_type: MANIFEST_MEDIA_TYPE.into(),
            digest: artifact.digest.clone(),
            size: artifact.manifest.len() as u64,
            annotations: Default::default(),
        };
        let referrer = signature::referrer(&layers, subject);
        let digest = super::artifact::digest(&referrer);
        // The signatures are stored under the tag already, where nodes and `cosign verify` look first: a referrer
        // the registry refuses is said, not a failure of the publish.
        match send_manifest(client, &target.by_digest(&digest), &referrer, out).await {
            Ok(()) => out.referrer = Some(digest),
            Err(e) => out.warnings.push(format!(
                "the registry has the OCI referrers API, and refused the signatures as a referrer of the bundle \
                 (they are under the tag {}): {e}",
                tag_for(&artifact.digest)
            )),
        }
    }
    Ok(())
}

async fn send_blobs(client: &Client, at: &Reference, blobs: &[Blob], out: &mut Published) -> Result<(), PublishError> {
    for blob in blobs {
        let present = client.blob_exists(at, &blob.digest).await.map_err(|e| failure(at, "asking for a blob", e))?;
        if present {
            out.blobs_present += 1;
            continue;
        }
        client.push_blob(at, blob.bytes.clone(), &blob.digest).await.map_err(|e| failure(at, "pushing a blob", e))?;
        out.blobs_sent += 1;
        out.bytes_sent += blob.bytes.len() as u64;
    }
    Ok(())
}

async fn send_manifest(
    client: &Client,
    at: &Reference,
    manifest: &[u8],
    out: &mut Published,
) -> Result<(), PublishError> {
    let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
    // A registry that answers without the manifest's `Location` (ECR does, and go-containerregistry's) sends
    // oci-client to a fallback that takes the URL to end in a tag, and panics on a reference by digest. The digest
    // in the tag's place gives the same URL (`…/manifests/sha256:<hex>`) and a fallback that holds.
    let by_url = match at.digest() {
        Some(digest) => Reference::with_tag(at.registry().into(), at.repository().into(), digest.into()),
        None => at.clone(),
    };
    client
        .push_manifest_raw(&by_url, manifest.to_vec(), content_type)
        .await
        .map_err(|e| failure(at, "pushing the manifest", e))?;
    out.bytes_sent += manifest.len() as u64;
    Ok(())
}

/// The digests of the config and layers a stored manifest names.
fn named_blobs(manifest: &[u8]) -> Vec<String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(manifest) else { return Vec::new() };
    let layers = value["layers"].as_array().into_iter().flatten();
    std::iter::once(&value["config"]).chain(layers).filter_map(|d| d["digest"].as_str().map(str::to_string)).collect()
}

fn not_found(e: &OciDistributionError) -> bool {
    use oci_client::errors::OciErrorCode as C;
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().all(|x| matches!(x.code, C::ManifestUnknown | C::NameUnknown | C::NotFound))
        }
        _ => false,
    }
}

/// A registry's answer in words: a refusal (credentials, permissions) is the user's to fix; the rest is a failure.
fn failure(at: &Reference, doing: &str, e: OciDistributionError) -> PublishError {
    use OciDistributionError as E;
    let reference = format!("{}/{}", at.registry(), at.repository());
    let refused = |why: String| PublishError::Refused { reference: reference.clone(), why: format!("{doing}: {why}") };
    match &e {
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => refused(crate::oci::CREDENTIALS_REFUSED.into()),
        // oci-client hands a HEAD's or a blob upload's 401 on as the HTTP error it is.
        E::RequestError(r) if matches!(r.status().map(|s| s.as_u16()), Some(401 | 403)) => {
            refused(crate::oci::CREDENTIALS_REFUSED.into())
        }
        E::RegistryError { envelope, .. } => {
            let said: Vec<String> = envelope.errors.iter().map(|x| x.message.clone()).collect();
            refused(format!("the registry refused: {}", said.join(", ")))
        }
        E::RequestError(r) => {
            PublishError::Registry { reference, why: format!("{doing}: {}", crate::oci::request_reason(r)) }
        }
        _ => PublishError::Registry { reference, why: format!("{doing}: {e}") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_names_a_registry_and_no_digest() {
        let t = Target::parse("127.0.0.1:5000/fleet/bundle:main").unwrap();
        assert_eq!(
            (t.registry.as_str(), t.repository.as_str(), t.tag.as_deref()),
            ("127.0.0.1:5000", "fleet/bundle", Some("main"))
        );
        let t = Target::parse("registry.example.com/fleet/bundle").unwrap();
        assert_eq!((t.registry.as_str(), t.tag), ("registry.example.com", None));
        for bad in [
            "fleet/bundle",
            "bundle",
            "r.example.com/x@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "r.example.com/UPPER",
        ] {
            assert!(matches!(Target::parse(bad), Err(PublishError::Usage(_))), "{bad}");
        }
    }
}
