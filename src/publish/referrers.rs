//! Whether a registry has the OCI 1.1 referrers API (`GET /v2/<name>/referrers/<digest>`), where `publish` stores a
//! signature a second time, as a referrer of the bundle. Asked here with a plain request: oci-client's
//! `pull_referrers` falls back to the referrers tag schema on a registry without the API and does not say which
//! answered.

use super::error::PublishError;
use base64::Engine;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// True when the registry answers the referrers API for `subject` (a reference by digest) with an image index; a
/// 404 (the spec's answer of a registry without the API) or any other answer is false. The bearer token flow is
/// oci-client's (it keeps the token); only a registry that cannot be reached is an error.
pub async fn has_api(
    http: &reqwest::Client,
    client: &Client,
    subject: &Reference,
    auth: &RegistryAuth,
) -> Result<bool, PublishError> {
    let digest = subject.digest().unwrap_or_default();
    let url = format!("https://{}/v2/{}/referrers/{digest}", subject.resolve_registry(), subject.repository());
    let send = |authorization: Option<String>| {
        let mut request = http.get(&url).header(http::header::ACCEPT, INDEX_MEDIA_TYPE);
        if let Some(value) = authorization {
            request = request.header(http::header::AUTHORIZATION, value);
        }
        request.send()
    };
    let basic = match auth {
        RegistryAuth::Basic(user, password) => {
            Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))))
        }
        RegistryAuth::Bearer(token) => Some(format!("Bearer {token}")),
        RegistryAuth::Anonymous => None,
    };
    let unreachable = |e: reqwest::Error| PublishError::Registry {
        reference: format!("{}/{}", subject.registry(), subject.repository()),
        why: format!("asking for the referrers API: {}", crate::oci::request_reason(&e)),
    };
    let mut response = send(basic).await.map_err(unreachable)?;
    if response.status() == reqwest::StatusCode::UNAUTHORIZED
        && let Ok(Some(token)) = client.auth(subject, auth, RegistryOperation::Pull).await
    {
        response = send(Some(format!("Bearer {token}"))).await.map_err(unreachable)?;
    }
    if response.status() != reqwest::StatusCode::OK {
        return Ok(false);
    }
    let body = response.bytes().await.map_err(unreachable)?;
    let index: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    Ok(index["manifests"].is_array())
}
