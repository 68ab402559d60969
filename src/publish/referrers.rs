//! Whether a registry has the OCI 1.1 referrers API (`GET /v2/<name>/referrers/<digest>`), where `publish` stores a
//! signature a second time, as a referrer of the bundle. Asked here with a plain request: oci-client's
//! `pull_referrers` falls back to the referrers tag schema on a registry without the API and does not say which
//! answered.

use super::error::PublishError;
use base64::Engine;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use std::time::Duration;
use wmrender_contract::bundle_artifact::{INDEX_MEDIA_TYPE, MANIFEST_MAX};

/// True when the registry answers the referrers API for the manifest `digest` of `repository` (a reference to it)
/// with an OCI image index, as the distribution spec says a registry with the API does; a 404 (the spec's answer of
/// a registry without it) or any other answer is false. Credentials go only where a 401 asks for them, as
/// containerd and cosign send them: a token from the registry's realm (oci-client's flow, which keeps the token),
/// else the Basic pair. Only a registry that cannot be reached is an error.
pub async fn has_api(
    http: &reqwest::Client,
    client: &Client,
    repository: &Reference,
    digest: &str,
    auth: &RegistryAuth,
) -> Result<bool, PublishError> {
    let url = format!("https://{}/v2/{}/referrers/{digest}", repository.resolve_registry(), repository.repository());
    let send = |authorization: Option<String>| {
        let mut request =
            http.get(&url).header(http::header::ACCEPT, INDEX_MEDIA_TYPE).timeout(Duration::from_secs(60));
        if let Some(value) = authorization {
            request = request.header(http::header::AUTHORIZATION, value);
        }
        request.send()
    };
    let unreachable = |e: reqwest::Error| PublishError::Registry {
        reference: format!("{}/{}", repository.registry(), repository.repository()),
        why: format!("asking for the referrers API: {}", crate::oci::request_reason(&e)),
    };
    let mut response = send(None).await.map_err(unreachable)?;
    if response.status() == reqwest::StatusCode::UNAUTHORIZED {
        let credentials = match client.auth(repository, auth, RegistryOperation::Pull).await {
            Ok(Some(token)) => Some(format!("Bearer {token}")),
            _ => match auth {
                RegistryAuth::Basic(user, password) => Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                )),
                RegistryAuth::Bearer(token) => Some(format!("Bearer {token}")),
                RegistryAuth::Anonymous => None,
            },
        };
        if credentials.is_some() {
            response = send(credentials).await.map_err(unreachable)?;
        }
    }
    let content_type = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if response.status() != reqwest::StatusCode::OK || !content_type.is_some_and(|t| t.starts_with(INDEX_MEDIA_TYPE)) {
        return Ok(false);
    }
    // An index, read up to the bound a manifest has; what is longer is no answer to go by.
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > MANIFEST_MAX {
            return Ok(false);
        }
    }
    let index: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    Ok(index["manifests"].is_array())
}
