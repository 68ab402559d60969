//! The pull model: the node fetches its bundle itself. Before each pass the agent reads its own Node's
//! `wmrender.dev/desired-bundle` annotation with the node's credentials (the kubeconfig kubelet's TLS bootstrap
//! wrote; NodeRestriction lets a node read its own Node). When it names a bundle other than the one the agent last
//! pulled, the agent
//!
//! 1. fetches the manifest by its digest through the registry's mirrors (the rendered hosts.toml, with the
//!    credentials sync merged in), every byte checked against the digest;
//! 2. fetches the signatures under cosign's `sha256-<hex>.sig` tag and judges them
//!    ([`wmrender_contract::signed_bundle::judge`]) with the public keys node.json lists: a trusted key must sign
//!    exactly this digest with a version not older than the one applied, unless signed as a downgrade. When those
//!    do not do, the signatures stored as OCI 1.1 referrers of the bundle are fetched too (the registry's referrers
//!    API, else its referrers tag schema) and all are judged together;
//! 3. fetches each file it does not hold already (a file whose bytes are on the node, under any path, is not
//!    fetched again), each checked against its digest;
//! 4. stages the files as sync would ([`stage`]) and records the pull (`C:\k\wmrender\pulled.json`).
//!
//! The agent's service keeps one [`Puller`] from pull to pull: a pull after the first resumes the TLS session with
//! the registry (no certificate exchange) instead of a full handshake, while the registry's session tickets last.
//!
//! The pass that follows applies the bundle as it applies a pushed one. Anything refused (no trusted signature, an
//! older version, content that does not match its digest, an artifact that is not a node bundle) changes nothing
//! and says why on the Node's `wmrender.dev/BundlePulled` condition; a registry that cannot be reached is tried
//! again at the next pass, with the run loop's back-off.

mod held_back;
pub mod parts;
pub mod payload;
mod registry;
pub mod stage;

use crate::desired::Desired;
use crate::node_status::Client;
use crate::system::Files;
use registry::{FetchError, Registry};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use wmrender_contract::bundle_artifact::{self, Kind, MANIFEST_MAX, Reference};
use wmrender_contract::hosts_toml::{self, Endpoint};
use wmrender_contract::node_status::DESIRED_BUNDLE_ANNOTATION;
use wmrender_contract::signed_bundle::{self, PAYLOAD_MAX, PublicKey, SIGNATURES_MAX, Signature};
use wmrender_contract::{NodePath, PullOutcome, PullReport, paths};

pub use registry::sha256_digest;

/// `C:\k\wmrender\pulled.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledState {
    /// The reference last staged.
    #[serde(default)]
    pub reference: String,
    /// Its signed version: the floor for the next (rollback protection).
    #[serde(default)]
    pub version: u64,
    /// The node manifest's bundle digest once it was staged: while the node holds these files, the pulled bundle
    /// is the one on the node (a sync may have pushed another since).
    #[serde(default)]
    pub bundle: String,
    /// A pull that wrote its journal and was cut off before it finished: that journal is the agent's own to
    /// finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<String>,
    /// The payload last staged (`wmrender.dev/desired-payload`, [`payload`]).
    #[serde(default, skip_serializing_if = "PulledPayload::is_none")]
    pub payload: PulledPayload,
    /// The programs (node paths) a payload pull may have left a part of ([`parts`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub payload_parts: BTreeSet<String>,
}

/// The pulled payload in `pulled.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledPayload {
    /// The reference last staged.
    #[serde(default)]
    pub reference: String,
    /// Its signed version: the floor for the next payload (a sequence of its own, apart from the bundle's).
    #[serde(default)]
    pub version: u64,
    /// The programs it put on the node (node path → sha256; the agent's own executable is never among them): while
    /// the node's manifest lists each with that content, the pulled payload is the one on the node.
    #[serde(default)]
    pub programs: BTreeMap<String, String>,
    /// The payload a pull was putting on the node when it was cut off (written before the node manifest is): the
    /// next pull finishes its manifest's journal, and takes it as pulled if the manifest lists its programs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<Box<PulledPayload>>,
}

impl PulledPayload {
    fn is_none(&self) -> bool {
        self.reference.is_empty() && self.staging.is_none()
    }
}

impl PulledState {
    /// The record, or an error when there is one that cannot be read: what must not be written over (its rollback
    /// floors), where [`PulledState::load`] would start again from nothing.
    fn load_strict(sys: &dyn Files) -> Result<PulledState, String> {
        match std::fs::read(sys.local(&NodePath::known(paths::PULLED_STATE))) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PulledState::default()),
            Err(e) => Err(format!("cannot read {}: {e}", paths::PULLED_STATE)),
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a pull record: {e}; remove it to start again", paths::PULLED_STATE)),
        }
    }

    /// The record, or an empty one when there is none or it cannot be read.
    pub fn load(sys: &dyn Files) -> PulledState {
        PulledState::load_strict(sys).unwrap_or_default()
    }

    /// Writes the record; an empty one (nothing pulled, no part left) is no file, as before anything was pulled.
    fn save(&self, sys: &dyn Files) -> Result<(), String> {
        if *self == PulledState::default() {
            return sys.remove_if_there(&NodePath::known(paths::PULLED_STATE));
        }
        let path = sys.local(&NodePath::known(paths::PULLED_STATE));
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {e}", paths::PULLED_STATE))
    }
}

/// The registry client an agent keeps from one pull to the next, for as long as the node's trusted CA bundle is the
/// one it was made with. A one-shot `wmrender-node apply` makes its own.
#[derive(Default)]
pub struct Puller {
    kept: RefCell<Option<Kept>>,
    /// Programs a registry served wrong lately: not downloaded again at every pass.
    held_back: RefCell<held_back::HeldBack>,
}

/// A client and the trusted CA bundle it was made with.
struct Kept {
    ca_bundle: Option<Vec<u8>>,
    registry: Rc<Registry>,
}

impl Puller {
    /// The kept client, or a new one when there is none or the trusted CAs changed. What it keeps is its TLS
    /// sessions (and, within ureq's 15 s, its idle connections); its byte count and the bearer tokens it got start
    /// again with each pull: the next may be for another repository, or with other credentials from hosts.toml.
    fn registry(&self, ca_bundle: Option<Vec<u8>>) -> Result<Rc<Registry>, String> {
        let mut kept = self.kept.borrow_mut();
        let registry = match kept.as_ref() {
            Some(k) if k.ca_bundle == ca_bundle => k.registry.clone(),
            _ => {
                let registry = Rc::new(Registry::new(ca_bundle.as_deref())?);
                *kept = Some(Kept { ca_bundle, registry: registry.clone() });
                registry
            }
        };
        registry.start_pull();
        Ok(registry)
    }
}

/// The node's own Node: `cached` (the service's watch) when it is this node's, else read with the node's
/// credentials; `None` before the node joined (no kubeconfig, or its name not known yet).
pub fn node(sys: &dyn Files, cached: Option<&serde_json::Value>) -> Option<Result<serde_json::Value, String>> {
    let kubeconfig = sys.local(&NodePath::known(paths::KUBECONFIG));
    let node_name = crate::state::AppliedState::load(&sys.local(&NodePath::known(paths::APPLIED_STATE)))
        .map(|s| s.node_name)
        .unwrap_or_default();
    if node_name.is_empty() || !kubeconfig.exists() {
        return None;
    }
    Some(match cached.filter(|n| n["metadata"]["name"] == node_name.as_str()) {
        Some(node) => Ok(node.clone()),
        None => Client::from_kubeconfig(&kubeconfig)
            .and_then(|c| c.request("GET", &format!("/api/v1/nodes/{node_name}"), "application/json", None)),
    })
}

/// The pull before a pass; `None` when there is nothing to pull from (the node has not joined, its name is not
/// known yet, or its Node names no desired bundle).
pub fn pull(sys: &dyn Files, cached: Option<&serde_json::Value>, puller: &Puller) -> Option<PullReport> {
    let read = node(sys, cached)?;
    let pulled = PulledState::load(sys);
    // The pulled bundle is on the node while the node's bundle files are the ones it staged (a sync may have
    // delivered another since): only then is it reported on the Node.
    let on_node = |p: &PulledState| {
        let holding = stage::node_manifest(sys).map(|m| m.bundle_digest()).unwrap_or_default();
        (!p.reference.is_empty() && p.bundle == holding).then(|| p.reference.clone())
    };
    report(
        read,
        DESIRED_BUNDLE_ANNOTATION,
        "bundle",
        &pulled,
        &pulled.reference,
        &on_node,
        "a sync has delivered another since",
        |desired| pull_desired(sys, desired, &pulled, puller),
    )
}

/// The report of a pull of what the Node's `annotation` names (a `what`: bundle or payload), from the Node as
/// `read`, the record of the last pull (`last`, whose reference is `last_reference`) and `pull` of the desired one.
/// `None` when the Node names none, or cannot be read and nothing was ever pulled (a node that never pulled is
/// pushed to: an API server it cannot ask is the report's to say). `on_node`: the pulled one still on the node;
/// `since`: why a current one no longer is.
#[allow(clippy::too_many_arguments)]
fn report<S>(
    read: Result<serde_json::Value, String>,
    annotation: &str,
    what: &str,
    last: &S,
    last_reference: &str,
    on_node: &dyn Fn(&S) -> Option<String>,
    since: &str,
    pull: impl FnOnce(&str) -> Result<(PullOutcome, String, S), Failure>,
) -> Option<PullReport> {
    let desired = match read {
        Ok(node) => node["metadata"]["annotations"][annotation].as_str()?.to_string(),
        Err(_) if last_reference.is_empty() => return None,
        Err(e) => {
            return Some(PullReport {
                desired: String::new(),
                outcome: PullOutcome::Retrying,
                message: format!("cannot read the node's desired {what}: {e}"),
                on_node: on_node(last),
            });
        }
    };
    let (outcome, message, on_node) = match pull(&desired) {
        Ok((PullOutcome::Current, _, after)) if on_node(&after).is_none() => (
            PullOutcome::Current,
            format!("the {what} {desired} was pulled, and {since}: it is pulled again when the annotation changes"),
            None,
        ),
        Ok((outcome, message, after)) => (outcome, message, on_node(&after)),
        Err((outcome, message)) => (outcome, message, on_node(last)),
    };
    Some(PullReport { desired, outcome, message, on_node })
}

type Failure = (PullOutcome, String);

fn refused(message: impl Into<String>) -> Failure {
    (PullOutcome::Refused, message.into())
}

fn retrying(message: impl Into<String>) -> Failure {
    (PullOutcome::Retrying, message.into())
}

fn fetch_failure(what: &str, e: FetchError) -> Failure {
    match e {
        FetchError::Tampered(why) => {
            refused(format!("{what}: the registry served content that does not match its digest ({why})"))
        }
        FetchError::Unavailable(why) => retrying(format!("{what} cannot be fetched: {why}")),
    }
}

fn pull_desired(
    sys: &dyn Files,
    desired: &str,
    pulled: &PulledState,
    puller: &Puller,
) -> Result<(PullOutcome, String, PulledState), Failure> {
    let reference = Reference::parse(desired)
        .map_err(|e| refused(format!("the annotation {DESIRED_BUNDLE_ANNOTATION} does not name a bundle: {e}")))?;
    if pulled.reference == desired && pulled.staging.is_none() {
        return Ok((PullOutcome::Current, format!("the bundle {desired} is on the node"), pulled.clone()));
    }
    let source = Source::new(sys, &reference.registry, puller)?;
    let applied = (!pulled.reference.is_empty()).then_some(pulled.version);
    let (layers, accepted) =
        source.verified(&reference, applied, |m| bundle_artifact::read_manifest(m, Kind::NodeBundle))?;
    let (registry, endpoints, repo) = (&source.registry, &source.endpoints, &reference.repository);

    // Files the node holds already, by content: read from the node, checked again, not fetched. A hosts.toml
    // that carries credentials is the rendered one with them taken out.
    let on_node = stage::node_manifest(sys).map_err(retrying)?;
    let mut held: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for f in &on_node.files {
        let wanted = |digest: &str| layers.iter().any(|l| l.digest == digest);
        if wanted(&format!("sha256:{}", f.sha256)) {
            if let Ok(bytes) = std::fs::read(sys.local(&f.path)) {
                held.insert(sha256_digest(&bytes), bytes);
            }
        } else if hosts_toml::is_hosts_toml(&f.path)
            && let Ok(bytes) = std::fs::read(sys.local(&f.path))
        {
            let rendered = hosts_toml::strip_credentials(&bytes);
            held.insert(sha256_digest(&rendered), rendered);
        }
    }
    let mut files = Vec::new();
    let mut fetched = 0usize;
    for layer in &layers {
        let local = held.get(&layer.digest).cloned();
        let bytes = match local {
            Some(bytes) => bytes,
            None => {
                fetched += 1;
                registry
                    .by_digest(endpoints, repo, "blobs", &layer.digest, layer.size)
                    .map_err(|e| fetch_failure(&format!("{}", layer.path), e))?
            }
        };
        files.push((layer.path.clone(), bytes));
    }

    let mut state = PulledState { staging: Some(desired.to_string()), ..pulled.clone() };
    let own_journal = pulled.staging.is_some();
    state.save(sys).map_err(retrying)?;
    let staged = stage::stage(sys, files, own_journal).map_err(|e| match e {
        stage::StageError::Refused(why) => refused(why),
        stage::StageError::NotNow(why) => retrying(why),
    });
    let staged = match staged {
        Ok(s) => s,
        Err(failure) => {
            // Nothing was written when the journal was not: the record goes back to what it was.
            if !own_journal && stage::node_manifest(sys).is_ok_and(|m| m.pending.is_none()) {
                let _ = pulled.save(sys);
            }
            return Err(failure);
        }
    };
    state = PulledState {
        reference: desired.to_string(),
        version: accepted.version,
        bundle: staged.bundle,
        staging: None,
        ..pulled.clone()
    };
    state.save(sys).map_err(retrying)?;
    let message = format!(
        "the bundle {desired} (version {}{}, signed by {}) is staged: {} of {} files fetched ({} bytes read), {} written, {} removed",
        accepted.version,
        if accepted.downgrade { ", a signed downgrade" } else { "" },
        accepted.key,
        fetched,
        layers.len(),
        *registry.bytes_read.borrow(),
        staged.written.len(),
        staged.removed.len(),
    );
    Ok((PullOutcome::Staged, message, state))
}

/// Where a pull fetches from, read from the node: the keys it trusts, the hosts of the registry (its hosts.toml)
/// and the registry client.
struct Source {
    keys: Vec<PublicKey>,
    endpoints: Vec<Endpoint>,
    registry: Rc<Registry>,
}

impl Source {
    fn new(sys: &dyn Files, registry: &str, puller: &Puller) -> Result<Source, Failure> {
        let settings = Desired::read(sys).map_err(|e| retrying(e.to_string()))?.settings;
        let mut keys = Vec::new();
        for (i, pem) in settings.bundle_keys.iter().enumerate() {
            keys.extend(
                PublicKey::parse_pem(pem).map_err(|e| refused(format!("node.json's bundle key {}: {e}", i + 1)))?,
            );
        }
        if keys.is_empty() {
            return Err(refused(
                "this node trusts no bundle signing key: list them under bundleSigning.publicKeys in the inputs, render and sync",
            ));
        }
        let endpoints = endpoints(sys, registry)?;
        let ca = std::fs::read(sys.local(&NodePath::known(paths::TRUSTED_CA_BUNDLE))).ok();
        let registry = puller.registry(ca).map_err(retrying)?;
        Ok(Source { keys, endpoints, registry })
    }

    /// The manifest of `reference`, fetched by its digest and read by `read` (what kind of artifact it must be),
    /// and the signature of a trusted key that accepts it: one under cosign's `sha256-<hex>.sig` tag, else among
    /// its OCI 1.1 referrers, naming this digest with a version not older than `applied` (or a signed downgrade).
    fn verified<T>(
        &self,
        reference: &Reference,
        applied: Option<u64>,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<(T, signed_bundle::Accepted), Failure> {
        let (registry, endpoints, repo) = (&self.registry, &self.endpoints, &reference.repository);
        let manifest = registry
            .by_digest(endpoints, repo, "manifests", &reference.digest, MANIFEST_MAX)
            .map_err(|e| fetch_failure("the manifest", e))?;
        let read = read(&manifest).map_err(refused)?;
        let tag = signed_bundle::tag_for(&reference.digest);
        let mut seen: Vec<signed_bundle::Layer> = Vec::new();
        match registry.by_tag(endpoints, repo, &tag, MANIFEST_MAX) {
            Ok(Some(bytes)) => {
                for layer in signed_bundle::stored_layers(&bytes) {
                    if !seen.contains(&layer) {
                        seen.push(layer);
                    }
                }
            }
            Ok(None) => {}
            Err(e) => return Err(fetch_failure("the signatures", e)),
        }
        let mut stored = payloads(registry, endpoints, repo, &seen, SIGNATURES_MAX)?;
        let mut judged = signed_bundle::judge(&reference.digest, &stored, &self.keys, applied);
        if judged.is_err() {
            // Those stored as OCI 1.1 referrers (cosign's `--registry-referrers-mode=oci-1-1`), asked for only when the
            // tag's do not do: a bundle signed under the tag, as wmrender and cosign sign by default, costs no request
            // more.
            let room = SIGNATURES_MAX.saturating_sub(stored.len());
            let (more, trouble) = referrer_signatures(registry, endpoints, repo, &reference.digest, &mut seen, room);
            if !more.is_empty() {
                stored.extend(more);
                judged = signed_bundle::judge(&reference.digest, &stored, &self.keys, applied);
            }
            if let (Err(refusal), Some(trouble)) = (&judged, trouble) {
                return Err(refused(format!(
                    "{refusal} (the signatures stored as OCI referrers were not all read: {trouble})"
                )));
            }
        }
        let accepted = judged.map_err(|r| refused(r.to_string()))?;
        Ok((read, accepted))
    }
}

/// The signatures of a signature image's layers, each payload fetched by its digest: at most `room` of them.
fn payloads(
    registry: &Registry,
    endpoints: &[Endpoint],
    repo: &str,
    layers: &[signed_bundle::Layer],
    room: usize,
) -> Result<Vec<Signature>, Failure> {
    let mut out = Vec::new();
    for layer in layers.iter().filter(|l| l.payload_size <= PAYLOAD_MAX).take(room) {
        let payload = registry
            .by_digest(endpoints, repo, "blobs", &layer.payload_digest, PAYLOAD_MAX)
            .map_err(|e| fetch_failure("a signature's payload", e))?;
        out.push(Signature { payload, signature: layer.signature.clone() });
    }
    Ok(out)
}

/// The signatures stored as OCI referrers of `digest` that are not among `seen` (those judged already: each
/// referrer `publish` writes repeats the tag's), at most `room`. What cannot be read is passed over and said in the
/// second value: another referrer may hold the signature that counts, and a referrers tag schema's index, which
/// clients keep, can list a manifest that was deleted since.
fn referrer_signatures(
    registry: &Registry,
    endpoints: &[Endpoint],
    repo: &str,
    digest: &str,
    seen: &mut Vec<signed_bundle::Layer>,
    room: usize,
) -> (Vec<Signature>, Option<String>) {
    let words = |e: FetchError| match e {
        FetchError::Tampered(why) => format!("content that does not match its digest ({why})"),
        FetchError::Unavailable(why) => why,
    };
    let mut out = Vec::new();
    let mut trouble = Vec::new();
    let images = match registry.signature_referrers(endpoints, repo, digest, MANIFEST_MAX) {
        Ok(images) => images,
        Err(e) => return (out, Some(words(e))),
    };
    for image in images {
        let manifest = match registry.by_digest(endpoints, repo, "manifests", &image, MANIFEST_MAX) {
            Ok(manifest) => manifest,
            Err(e) => {
                trouble.push(format!("the referrer {image}: {}", words(e)));
                continue;
            }
        };
        for layer in signed_bundle::stored_layers(&manifest) {
            if out.len() >= room || layer.payload_size > PAYLOAD_MAX || seen.contains(&layer) {
                continue;
            }
            seen.push(layer.clone());
            match registry.by_digest(endpoints, repo, "blobs", &layer.payload_digest, PAYLOAD_MAX) {
                Ok(payload) => out.push(Signature { payload, signature: layer.signature }),
                Err(e) => trouble.push(format!("a payload of the referrer {image}: {}", words(e))),
            }
        }
    }
    (out, (!trouble.is_empty()).then(|| trouble.join("; ")))
}

/// The hosts to ask for `registry`: its hosts.toml on the node, else the registry itself.
fn endpoints(sys: &dyn Files, registry: &str) -> Result<Vec<Endpoint>, Failure> {
    let Some(path) = hosts_toml::node_path(registry) else { return Ok(hosts_toml::direct(registry)) };
    match std::fs::read_to_string(sys.local(&path)) {
        Ok(text) => hosts_toml::endpoints(&text).map_err(|e| retrying(format!("{path}: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(hosts_toml::direct(registry)),
        Err(e) => Err(retrying(format!("{path} cannot be read: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_puller_keeps_its_client_while_the_trusted_cas_stay_the_same() {
        // PEM blocks are all a client is made from; the certificates are read when it connects.
        let ca = |der: &str| {
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            Some(format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n").into_bytes())
        };
        let (one, two) = (ca("one"), ca("two"));
        let puller = Puller::default();
        let first = puller.registry(one.clone()).unwrap();
        *first.bytes_read.borrow_mut() = 7;
        let again = puller.registry(one.clone()).unwrap();
        assert!(Rc::ptr_eq(&first, &again), "the same CAs: the same client, its sessions kept");
        assert_eq!(*again.bytes_read.borrow(), 0, "each pull counts its own bytes");
        let other = puller.registry(two).unwrap();
        assert!(!Rc::ptr_eq(&first, &other), "other CAs: a new client");
        assert!(!Rc::ptr_eq(&other, &puller.registry(None).unwrap()), "the web PKI: a new client");
    }
}
