//! Fetching from an OCI registry the way containerd pulls: each host of the registry's hosts.toml in turn (mirrors,
//! then the server), content by digest from a host that may `pull`, a tag only from one that may `resolve`. Every
//! byte is checked against the digest it was asked for, and read up to a bound, so a mirror that serves something
//! else is caught and passed over. Credentials are the `authorization` header sync merged into hosts.toml from the
//! pull secret; a registry that answers with a Bearer challenge gets them at its token realm (the distribution
//! token flow).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;
use wmrender_contract::bundle_artifact::INDEX_MEDIA_TYPE;
use wmrender_contract::hosts_toml::Endpoint;
use wmrender_contract::signed_bundle;

/// The bound on each request's connection and answer: a pass must not hang on a registry that does not answer.
const TIMEOUT: Duration = Duration::from_secs(30);
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json";

/// Why content could not be had.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchError {
    /// A host served bytes that are not the digest asked for (and no other host served the right ones).
    Tampered(String),
    /// No host could serve it: unreachable, refused, not there. Worth another try later.
    Unavailable(String),
}

/// What a host answered to a GET.
enum Answer {
    Body(Vec<u8>),
    /// More than the bytes asked for: for content by digest, not that content.
    TooLarge,
    NotFound,
}

pub struct Registry {
    agent: ureq::Agent,
    /// Bearer tokens got from a realm, by host URL, for one pull: the next may be for another repository or with
    /// other credentials.
    tokens: RefCell<BTreeMap<String, String>>,
    /// Bytes read from registries (answers' bodies), for the result and the benchmark.
    pub bytes_read: RefCell<u64>,
}

impl Registry {
    /// A client that trusts the CAs of `ca_bundle` (PEM; the node's trusted CA bundle, which holds the system's as
    /// OpenShift's proxy bundle does), else the public web PKI.
    pub fn new(ca_bundle: Option<&[u8]>) -> Result<Registry, String> {
        let roots = match ca_bundle {
            Some(pem) => {
                let certs: Vec<_> = ureq::tls::parse_pem(pem)
                    .filter_map(|item| match item {
                        Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                        _ => None,
                    })
                    .collect();
                if certs.is_empty() {
                    return Err("the trusted CA bundle holds no certificate".into());
                }
                ureq::tls::RootCerts::new_with_certs(&certs)
            }
            None => ureq::tls::RootCerts::WebPki,
        };
        let tls = ureq::tls::TlsConfig::builder().root_certs(roots).build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            // Redirects to blob storage are followed; credentials are not sent along (ureq drops them across hosts).
            .max_redirects(5)
            .user_agent(format!("wmrender-node/{} (windows)", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Ok(Registry { agent, tokens: RefCell::new(BTreeMap::new()), bytes_read: RefCell::new(0) })
    }

    /// Starts a pull: no tokens from the last one, and a byte count from zero; the TLS sessions stay.
    pub fn start_pull(&self) {
        self.tokens.borrow_mut().clear();
        self.bytes_read.replace(0);
    }

    /// A manifest (`what` = `manifests`) or blob (`blobs`) by its digest, from the first host that can pull and
    /// serves exactly those bytes.
    pub fn by_digest(
        &self,
        endpoints: &[Endpoint],
        repository: &str,
        what: &str,
        digest: &str,
        max: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let mut tampered = Vec::new();
        let mut unavailable = Vec::new();
        for e in endpoints.iter().filter(|e| e.pull) {
            // A manifest is asked for in the one media type a node reads; a blob is bytes, whatever its type.
            let accept = (what == "manifests").then_some(MANIFEST_ACCEPT);
            match self.get(e, &format!("{repository}/{what}/{digest}"), max, accept) {
                Ok(Answer::Body(bytes)) if sha256_digest(&bytes) == digest => return Ok(bytes),
                Ok(Answer::Body(_)) => tampered.push(format!("{} served other content for {digest}", e.url)),
                Ok(Answer::TooLarge) => {
                    tampered.push(format!("{} served more than the {max} bytes of {digest}", e.url))
                }
                Ok(Answer::NotFound) => unavailable.push(format!("{}: {what} {digest} is not there", e.url)),
                Err(why) => unavailable.push(format!("{}: {why}", e.url)),
            }
        }
        Err(no_host_served(tampered, unavailable))
    }

    /// The manifest under a tag from the first host that may resolve and has it; `None` when every host that
    /// answered says there is none.
    pub fn by_tag(
        &self,
        endpoints: &[Endpoint],
        repository: &str,
        tag: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, FetchError> {
        let mut unavailable = Vec::new();
        let mut answered = false;
        for e in endpoints.iter().filter(|e| e.resolve) {
            match self.get(e, &format!("{repository}/manifests/{tag}"), max, Some(MANIFEST_ACCEPT)) {
                Ok(Answer::Body(bytes)) => return Ok(Some(bytes)),
                Ok(Answer::NotFound) => answered = true,
                Ok(Answer::TooLarge) => unavailable.push(format!("{}: the manifest is over {max} bytes", e.url)),
                Err(why) => unavailable.push(format!("{}: {why}", e.url)),
            }
        }
        if answered || unavailable.is_empty() {
            return Ok(None);
        }
        Err(FetchError::Unavailable(unavailable.join("; ")))
    }

    /// The signature images stored as OCI 1.1 referrers of the manifest `digest` (their digests,
    /// [`signed_bundle::signature_referrers`]), from the first host that may resolve and lists any: its referrers
    /// API, asked for cosign's signature type; else, where the API gives no image index (a 404 from a registry
    /// without it, a 400 or 406, a proxy's page), the referrers tag schema's index under `sha256-<hex>`, as the
    /// distribution spec tells a client to fall back and go-containerregistry does. A host that lists none is passed
    /// over: a mirror may not hold the newest list. Empty when no host lists any. A listing, like a tag, is asked
    /// only of hosts that may resolve.
    pub fn signature_referrers(
        &self,
        endpoints: &[Endpoint],
        repository: &str,
        digest: &str,
        max: u64,
    ) -> Result<Vec<String>, FetchError> {
        let mut unavailable = Vec::new();
        let mut answered = false;
        let wanted = percent_encode(signed_bundle::REFERRER_ARTIFACT_TYPE);
        let api = format!("{repository}/referrers/{digest}?artifactType={wanted}");
        let fallback = format!("{repository}/manifests/{}", signed_bundle::referrers_tag_for(digest));
        let is_index =
            |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| v["manifests"].is_array());
        for e in endpoints.iter().filter(|e| e.resolve) {
            let answer = match self.get(e, &api, max, Some(INDEX_MEDIA_TYPE)) {
                Ok(Answer::Body(bytes)) if is_index(&bytes) => Ok(Answer::Body(bytes)),
                _ => self.get(e, &fallback, max, Some(INDEX_MEDIA_TYPE)),
            };
            match answer {
                Ok(Answer::Body(bytes)) => {
                    answered = true;
                    let listed = signed_bundle::signature_referrers(&bytes);
                    if !listed.is_empty() {
                        return Ok(listed);
                    }
                }
                Ok(Answer::NotFound) => answered = true,
                Ok(Answer::TooLarge) => unavailable.push(format!("{}: the referrers index is over {max} bytes", e.url)),
                Err(why) => unavailable.push(format!("{}: {why}", e.url)),
            }
        }
        if answered || unavailable.is_empty() {
            return Ok(Vec::new());
        }
        Err(FetchError::Unavailable(unavailable.join("; ")))
    }

    /// A blob by its digest, `size` bytes, streamed into `dest` from the first host that can pull and serves
    /// exactly those bytes (a host that serves other bytes is passed over, and `dest` written again from the next).
    /// The bound on the whole answer grows with its size (30 s and a second per MiB: a program of 100 MiB gets
    /// 130 s), so a large program is not cut off where a manifest would be. What an earlier try left in `dest` (an
    /// answer cut off, in this pull or an earlier one) is taken up where it ends, with an HTTP range, so a slow link
    /// gets a large program over several pulls; resumed bytes are never a verdict: when the whole does not match its
    /// digest, the host is asked for all of it before it counts as serving other content.
    pub fn blob_to_file(
        &self,
        endpoints: &[Endpoint],
        repository: &str,
        digest: &str,
        size: u64,
        dest: &std::path::Path,
    ) -> Result<(), FetchError> {
        let timeout = TIMEOUT + Duration::from_secs(size >> 20);
        let path = format!("{repository}/blobs/{digest}");
        let mut tampered = Vec::new();
        let mut unavailable = Vec::new();
        for e in endpoints.iter().filter(|e| e.pull) {
            let mut answer = self.blob_from(e, &path, digest, size, dest, true, timeout);
            if matches!(answer, Ok(Streamed::Longer { resumed: true } | Streamed::Other { resumed: true })) {
                answer = self.blob_from(e, &path, digest, size, dest, false, timeout);
            }
            match answer {
                Ok(Streamed::Right) => return Ok(()),
                Ok(Streamed::NotThere) => unavailable.push(format!("{}: blob {digest} is not there", e.url)),
                Ok(wrong @ (Streamed::Longer { .. } | Streamed::Other { .. })) => {
                    // Not the blob: nothing of it is taken up by the next host.
                    let _ = std::fs::remove_file(dest);
                    tampered.push(if matches!(wrong, Streamed::Longer { .. }) {
                        format!("{} served more than the {size} bytes of {digest}", e.url)
                    } else {
                        format!("{} served other content for {digest}", e.url)
                    })
                }
                Err(why) => unavailable.push(format!("{}: {why}", e.url)),
            }
        }
        Err(no_host_served(tampered, unavailable))
    }

    /// One host's answer for a blob, streamed into `dest`: from where `dest` ends when `resume` (and the host
    /// answers the range), else whole.
    #[allow(clippy::too_many_arguments)]
    fn blob_from(
        &self,
        e: &Endpoint,
        path: &str,
        digest: &str,
        size: u64,
        dest: &std::path::Path,
        resume: bool,
        timeout: Duration,
    ) -> Result<Streamed, String> {
        use sha2::Digest;
        let (have, hasher) = if resume { taken_up(dest, size) } else { (0, sha2::Sha256::new()) };
        // Fetched whole by an earlier try (an empty blob only when its file is there).
        if have == size && dest.is_file() && format!("sha256:{}", hex(&hasher.clone().finalize())) == digest {
            return Ok(Streamed::Right);
        }
        let (have, hasher) = if have < size { (have, hasher) } else { (0, sha2::Sha256::new()) };
        let Some(response) = self.open(e, path, None, have, timeout)? else { return Ok(Streamed::NotThere) };
        // A host that does not answer ranges sends the whole blob (200): taken from its start.
        let from = if response.status() == 206 { have } else { 0 };
        let hasher = if from == 0 { sha2::Sha256::new() } else { hasher };
        let (read, found) = self.stream(response, size - from, dest, from, hasher)?;
        let resumed = from > 0;
        Ok(if read > size - from {
            Streamed::Longer { resumed }
        } else if from + read < size {
            // Fewer bytes and a clean end: an answer without a length whose connection ended (ureq reports one
            // that ends before its Content-Length as an error). What arrived is kept, to be taken up.
            return Err(format!("the answer ended after {} of its {size} bytes", from + read));
        } else if found == digest {
            Streamed::Right
        } else {
            Streamed::Other { resumed }
        })
    }

    /// Writes an answer's body into `dest` from byte `from` on (what is before it kept, what is after it cut), up
    /// to `size` bytes, hashing them after what `hasher` has hashed: how many were read (one more than `size` when
    /// the answer is longer) and the digest of the whole.
    fn stream(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
        size: u64,
        dest: &std::path::Path,
        from: u64,
        mut hasher: sha2::Sha256,
    ) -> Result<(u64, String), String> {
        use sha2::Digest;
        use std::io::{Read, Seek, Write};
        let cannot = |e: std::io::Error| format!("cannot write {}: {e}", dest.display());
        let mut file =
            std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(dest).map_err(cannot)?;
        file.set_len(from).map_err(cannot)?;
        file.seek(std::io::SeekFrom::Start(from)).map_err(cannot)?;
        let mut body = response.body_mut().with_config().limit(size).reader();
        let mut buf = vec![0u8; 1 << 16];
        let mut read = 0u64;
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => match ureq::Error::from(e) {
                    // More than the blob's size: not the blob.
                    ureq::Error::BodyExceedsLimit(_) => return Ok((read + 1, String::new())),
                    e => {
                        // What arrived is kept for the next try to take up.
                        let _ = file.sync_all();
                        return Err(format!("the answer could not be read: {}", connection_words(&e)));
                    }
                },
            };
            read += n as u64;
            *self.bytes_read.borrow_mut() += n as u64;
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n]).map_err(cannot)?;
        }
        file.sync_all().map_err(cannot)?;
        Ok((read, format!("sha256:{}", hex(&hasher.finalize()))))
    }

    /// GET `<url>/<path>`: the answer, `None` for a 404, an error for anything but a 200. A Bearer challenge is
    /// answered with a token from its realm, once.
    fn open(
        &self,
        e: &Endpoint,
        path: &str,
        accept: Option<&str>,
        from: u64,
        timeout: Duration,
    ) -> Result<Option<ureq::http::Response<ureq::Body>>, String> {
        let url = format!("{}/{path}", e.url);
        let mut response = self.send(&url, e, self.tokens.borrow().get(&e.url).cloned(), accept, from, timeout)?;
        if response.status() == 401 {
            let challenge = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("");
            if let Some(token) = self.token(challenge, e)? {
                self.tokens.borrow_mut().insert(e.url.clone(), token.clone());
                response = self.send(&url, e, Some(token), accept, from, timeout)?;
            }
        }
        // A range refused (416) or answered with another one: asked for whole instead, so that a host that serves
        // ranges badly does not keep the node from the blob.
        let status = response.status().as_u16();
        if from > 0 && (status == 416 || (status == 206 && range_from(&response) != Some(from))) {
            let token = self.tokens.borrow().get(&e.url).cloned();
            response = self.send(&url, e, token, accept, 0, timeout)?;
        }
        match response.status().as_u16() {
            200 => Ok(Some(response)),
            // The range asked for, and only that: the part from `from` on.
            206 if from > 0 && range_from(&response) == Some(from) => Ok(Some(response)),
            206 => Err("answered a range that was not asked for".into()),
            404 => Ok(None),
            401 | 403 => Err(format!("refused the node's credentials ({})", response.status().as_u16())),
            s => Err(format!("answered {s}")),
        }
    }

    /// GET `<url>/<path>`: the body (up to `max` bytes), or 404; an error for anything else.
    fn get(&self, e: &Endpoint, path: &str, max: u64, accept: Option<&str>) -> Result<Answer, String> {
        let Some(mut response) = self.open(e, path, accept, 0, TIMEOUT)? else { return Ok(Answer::NotFound) };
        let bytes = match response.body_mut().with_config().limit(max).read_to_vec() {
            Ok(bytes) => bytes,
            Err(ureq::Error::BodyExceedsLimit(_)) => return Ok(Answer::TooLarge),
            Err(e) => return Err(format!("the answer could not be read: {e}")),
        };
        *self.bytes_read.borrow_mut() += bytes.len() as u64;
        Ok(Answer::Body(bytes))
    }

    fn send(
        &self,
        url: &str,
        e: &Endpoint,
        bearer: Option<String>,
        accept: Option<&str>,
        from: u64,
        timeout: Duration,
    ) -> Result<ureq::http::Response<ureq::Body>, String> {
        let mut request = ureq::http::Request::builder().method("GET").uri(url);
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        if from > 0 {
            request = request.header("Range", format!("bytes={from}-"));
        }
        match (bearer, &e.authorization) {
            (Some(token), _) => request = request.header("Authorization", format!("Bearer {token}")),
            (None, Some(auth)) => request = request.header("Authorization", auth.as_str()),
            (None, None) => {}
        }
        let request = request.body(()).map_err(|_| format!("`{url}` is not a URL"))?;
        // Only a program's longer bound is set on its request: a request with a configuration of its own did not
        // resume the kept TLS session (tests/pull.rs measures the resumption).
        let request = if timeout == TIMEOUT {
            request
        } else {
            self.agent.configure_request(request).timeout_global(Some(timeout)).build()
        };
        self.agent.run(request).map_err(|e| connection_words(&e))
    }

    /// The token a Bearer challenge's realm gives for the host's credentials; `None` for another challenge.
    fn token(&self, challenge: &str, e: &Endpoint) -> Result<Option<String>, String> {
        let Some(params) = challenge.strip_prefix("Bearer ").or_else(|| challenge.strip_prefix("bearer ")) else {
            return Ok(None);
        };
        let params = challenge_params(params);
        let Some(realm) = params.get("realm").filter(|r| r.starts_with("https://")) else {
            return Err("asked for a token at a realm that is not https".into());
        };
        let mut query = Vec::new();
        for key in ["service", "scope"] {
            if let Some(v) = params.get(key) {
                query.push(format!("{key}={}", percent_encode(v)));
            }
        }
        let url = if query.is_empty() { realm.clone() } else { format!("{realm}?{}", query.join("&")) };
        let mut request = ureq::http::Request::builder().method("GET").uri(&url);
        if let Some(auth) = &e.authorization {
            request = request.header("Authorization", auth.as_str());
        }
        let request = request.body(()).map_err(|_| "the token realm is not a URL".to_string())?;
        let mut response = self.agent.run(request).map_err(|e| format!("token realm: {}", connection_words(&e)))?;
        if response.status() != 200 {
            return Err(format!("the token realm refused the node's credentials ({})", response.status().as_u16()));
        }
        let body = response.body_mut().with_config().limit(64 << 10).read_to_vec().map_err(|e| e.to_string())?;
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let token = value["token"].as_str().or_else(|| value["access_token"].as_str());
        token.map(|t| Some(t.to_string())).ok_or_else(|| "the token realm gave no token".into())
    }
}

/// What one host's answer for a blob came to.
enum Streamed {
    /// Exactly the blob.
    Right,
    /// More than its size (after the part taken up, when `resumed`).
    Longer {
        resumed: bool,
    },
    /// Other bytes, or fewer (after the part taken up, when `resumed`).
    Other {
        resumed: bool,
    },
    NotThere,
}

/// What an earlier try left in `dest`, up to `size` bytes, hashed: its length and the hasher to go on with (none
/// when it cannot be read or is longer than the blob).
fn taken_up(dest: &std::path::Path, size: u64) -> (u64, sha2::Sha256) {
    use sha2::Digest;
    use std::io::Read;
    let fresh = (0, sha2::Sha256::new());
    let Ok(mut file) = std::fs::File::open(dest) else { return fresh };
    match file.metadata() {
        Ok(m) if m.len() > 0 && m.len() <= size => {}
        _ => return fresh,
    }
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut have = 0u64;
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                have += n as u64;
            }
            Err(_) => return fresh,
        }
    }
    if have > size { fresh } else { (have, hasher) }
}

/// Where a 206 answer's `Content-Range: bytes <first>-<last>/<size>` starts.
fn range_from(response: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let value = response.headers().get("content-range")?.to_str().ok()?;
    value.strip_prefix("bytes ")?.split_once('-')?.0.trim().parse().ok()
}

/// Why no host served content by digest: tampering, where a host served other bytes, before any host that could
/// not be asked.
fn no_host_served(tampered: Vec<String>, unavailable: Vec<String>) -> FetchError {
    if !tampered.is_empty() {
        return FetchError::Tampered(tampered.join("; "));
    }
    FetchError::Unavailable(if unavailable.is_empty() {
        "no host of the registry may pull (hosts.toml's capabilities)".into()
    } else {
        unavailable.join("; ")
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:<hex>` of bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", wmrender_contract::sha256_hex(bytes))
}

fn connection_words(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => format!("cannot be reached: {io}"),
        ureq::Error::Timeout(_) => "did not answer in time".into(),
        ureq::Error::HostNotFound => "its host name does not resolve".into(),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => {
            format!("its TLS certificate is not trusted or does not match ({e})")
        }
        other => format!("cannot be reached: {other}"),
    }
}

/// `realm="…",service="…",scope="…"`.
fn challenge_params(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((v, next)) => (v.to_string(), next),
                None => (quoted.to_string(), ""),
            },
            None => match after.split_once(',') {
                Some((v, next)) => (v.trim().to_string(), next),
                None => (after.trim().to_string(), ""),
            },
        };
        out.insert(key, value);
        rest = next.trim_start_matches(',').trim();
    }
    out
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_starts_with_no_tokens_and_no_bytes_counted() {
        let registry = Registry::new(None).unwrap();
        registry.tokens.borrow_mut().insert("https://registry.example.com".into(), "token".into());
        *registry.bytes_read.borrow_mut() = 7;
        registry.start_pull();
        assert!(registry.tokens.borrow().is_empty(), "another repository or other credentials get no old token");
        assert_eq!(*registry.bytes_read.borrow(), 0);
    }

    #[test]
    fn a_bearer_challenge_reads_as_the_distribution_spec_writes_it() {
        let p = challenge_params(
            r#"realm="https://auth.example.com/token",service="registry.example.com",scope="repository:fleet/b:pull""#,
        );
        assert_eq!(p["realm"], "https://auth.example.com/token");
        assert_eq!(p["service"], "registry.example.com");
        assert_eq!(p["scope"], "repository:fleet/b:pull");
        assert_eq!(percent_encode("repository:fleet/b:pull"), "repository%3Afleet%2Fb%3Apull");
    }
}
