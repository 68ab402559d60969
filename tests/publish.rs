//! `wmrender publish` against real parts: Debian's `docker-registry` on 127.0.0.1 with TLS from a throwaway CA (and
//! htpasswd authentication where the test says), the real `skopeo` reading what was pushed, and the real `cosign`
//! v2.6.5 (built from its Go module by tests/cosign/build.sh) verifying what wmrender signed and signing beside it;
//! the node's rule for signatures (the contract's `signed_bundle::judge`, which the agent will run) judging both.
//! The bytes on the wire are counted by a TCP relay between wmrender and the registry (TLS included).
#![cfg(feature = "registry")]

mod support;

use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::registry::{Auth, ReferrersRegistry, Registry, Relay, Scratch};
use support::{code, stderr, wmrender};
use wmrender_contract::bundle_artifact::INDEX_MEDIA_TYPE;
use wmrender_contract::signed_bundle::{self, PublicKey, Refusal, Signature};

const USER: (&str, &str) = ("ci", "s3cret-push");
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A CA, a registry and files for one test.
struct World(Scratch);

impl std::ops::Deref for World {
    type Target = Scratch;
    fn deref(&self) -> &Scratch {
        &self.0
    }
}

impl World {
    fn new() -> World {
        World(Scratch::new())
    }

    /// `examples/aws` rendered, with `apiServerInternalURL` changed when `host` is given (which changes exactly
    /// one node file: services.json).
    fn rendered(&self, name: &str, host: Option<&str>) -> PathBuf {
        let mut text = std::fs::read_to_string(support::root().join("examples/aws/wmrender.yaml")).unwrap();
        if let Some(h) = host {
            text = text.replace("api-int.prod-east.example.com", h);
        }
        let inputs = self.path(&format!("{name}.yaml"));
        std::fs::write(&inputs, text).unwrap();
        let out = self.path(name);
        let r = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code(&r), 0, "{}", stderr(&r));
        out
    }

    /// `wmrender publish --rendered DIR` to `to`, trusting the test CA.
    fn publish(&self, rendered: &Path, to: &str, extra: &[&str]) -> Output {
        self.publish_from("--rendered", rendered, to, extra)
    }

    /// `wmrender publish <--rendered|--payload> DIR` to `to`, trusting the test CA.
    fn publish_from(&self, source: &str, dir: &Path, to: &str, extra: &[&str]) -> Output {
        let mut args = vec!["publish", source, dir.to_str().unwrap(), "--to", to];
        let ca = self.ca.pem();
        args.extend(["--registry-ca", ca.to_str().unwrap()]);
        args.extend_from_slice(extra);
        wmrender(&args)
    }

    fn cosign(&self, args: &[&str]) -> Output {
        support::cosign::run(self, args)
    }

    fn verify(&self, public: &Path, reference: &str) -> Output {
        self.cosign(&["verify", "--key", public.to_str().unwrap(), "--insecure-ignore-tlog=true", reference])
    }

    /// The manifest stored at `reference`, read by skopeo.
    fn manifest(&self, reference: &str) -> Value {
        let certs = self.path("skopeo-certs");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::copy(self.ca.pem(), certs.join("ca.crt")).unwrap();
        let out = Command::new("skopeo")
            .args(["inspect", "--raw", "--cert-dir", certs.to_str().unwrap(), &format!("docker://{reference}")])
            .output()
            .expect("skopeo runs");
        assert!(out.status.success(), "skopeo inspect {reference}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// The signatures stored under a `.sig` tag, as a node reads them: each layer's payload blob (checked against its
/// digest) and its signature annotation.
fn signatures(w: &World, registry: &Registry, sig_tag: &str) -> Vec<Signature> {
    let manifest = w.manifest(sig_tag);
    manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let digest = l["digest"].as_str().unwrap();
            let payload = std::fs::read(registry.blob(digest)).unwrap();
            assert_eq!(format!("sha256:{}", wmrender_contract::sha256_hex(&payload)), digest);
            let signature = l["annotations"][signed_bundle::SIGNATURE_ANNOTATION].as_str().unwrap().to_string();
            Signature { payload, signature }
        })
        .collect()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every file of `dir/node`, by its path under `node/`.
fn node_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let root = dir.join("node");
    let mut files: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(&root)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(&root).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn the_node_bundle_is_one_artifact_by_digest_one_layer_per_file_signed_so_that_cosign_verifies_it() {
    let w = World::new();
    let registry = Registry::start(&w.path("registry"), &w.ca, None);
    let rendered = w.rendered("out", None);
    let (key, public) = w.key("ci-signing");
    let to = format!("{}/fleet/windows-bundle:main", registry.addr);
    let r = w.publish(&rendered, &to, &["--sign-key", key.to_str().unwrap(), "--bundle-version", "7"]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    // stdout: the reference by digest, nothing else.
    let reference = stdout(&r).trim_end_matches('\n').to_string();
    let prefix = format!("{}/fleet/windows-bundle@sha256:", registry.addr);
    assert!(reference.starts_with(&prefix) && reference.len() == prefix.len() + 64, "{reference:?}");
    assert!(!stdout(&r).trim_end().contains('\n'), "{}", stdout(&r));

    // What skopeo reads: the artifact, the tag naming the same manifest, one layer per node file titled by its
    // path, each layer the file's bytes as the registry stores them.
    let manifest = w.manifest(&reference);
    assert_eq!(manifest["artifactType"], "application/vnd.wmrender.node-bundle.v1");
    assert_eq!(w.manifest(&to), manifest);
    let files = node_files(&rendered);
    let layers = manifest["layers"].as_array().unwrap();
    let titles: Vec<&str> =
        layers.iter().map(|l| l["annotations"]["org.opencontainers.image.title"].as_str().unwrap()).collect();
    assert_eq!(titles, files.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>());
    for (layer, (path, bytes)) in layers.iter().zip(&files) {
        let stored = std::fs::read(registry.blob(layer["digest"].as_str().unwrap())).unwrap();
        assert_eq!(&stored, bytes, "{path}");
    }
    // No secret: the bundle is what render wrote, which holds none; and stderr says what was sent.
    assert!(stderr(&r).contains(&format!("published {} files, tagged main", files.len())), "{}", stderr(&r));
    // This registry has no referrers API (it answers 404): the signatures are under cosign's tag only.
    assert!(!stderr(&r).contains("referrer"), "{}", stderr(&r));

    // The real cosign verifies it with the public key, and reads the bundle version from the signed payload.
    let v = w.verify(&public, &reference);
    assert_eq!(code(&v), 0, "cosign verify: {}", stderr(&v));
    let claims: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(claims[0]["critical"]["image"]["docker-manifest-digest"], reference.rsplit_once('@').unwrap().1);
    assert_eq!(claims[0]["optional"]["dev.wmrender.bundle-version"], "7");
    // … and not with another key.
    let (_, other_public) = w.key("other");
    let v = w.verify(&other_public, &reference);
    assert_ne!(code(&v), 0, "cosign verified with a key that did not sign");

    // Publishing the same render again: the same digest, nothing sent but manifests, and the same key signing
    // the same payload adds no signature.
    let again = w.publish(&rendered, &to, &["--sign-key", key.to_str().unwrap(), "--bundle-version", "7"]);
    assert_eq!((code(&again), stdout(&again)), (0, stdout(&r)), "{}", stderr(&again));
    assert!(stderr(&again).contains(": 0 blobs sent"), "{}", stderr(&again));
    let sig_tag = format!(
        "{}/fleet/windows-bundle:{}.sig",
        registry.addr,
        reference.rsplit_once('@').unwrap().1.replace(':', "-")
    );
    assert_eq!(w.manifest(&sig_tag)["layers"].as_array().unwrap().len(), 1);

    // A rotation: the new key signs beside the old; cosign verifies with either.
    let (new_key, new_public) = w.key("ci-signing-2");
    let rotated = w.publish(&rendered, &to, &["--sign-key", new_key.to_str().unwrap(), "--bundle-version", "7"]);
    assert_eq!(code(&rotated), 0, "{}", stderr(&rotated));
    assert!(stderr(&rotated).contains("kept the 1 signature(s) already there"), "{}", stderr(&rotated));
    assert_eq!(w.manifest(&sig_tag)["layers"].as_array().unwrap().len(), 2);
    for key in [&public, &new_public] {
        let v = w.verify(key, &reference);
        assert_eq!(code(&v), 0, "cosign verify --key {}: {}", key.display(), stderr(&v));
    }

    // What cosign itself signs beside wmrender's is kept by the next publish, and stays verifiable.
    let g = w.cosign(&["generate-key-pair"]);
    assert_eq!(code(&g), 0, "cosign generate-key-pair: {}", stderr(&g));
    let s = w.cosign(&[
        "sign",
        "--key",
        "cosign.key",
        "--tlog-upload=false",
        "-a",
        "dev.wmrender.bundle-version=7",
        &reference,
    ]);
    assert_eq!(code(&s), 0, "cosign sign: {}", stderr(&s));
    assert_eq!(w.manifest(&sig_tag)["layers"].as_array().unwrap().len(), 3);
    let kept = w.publish(&rendered, &to, &["--sign-key", key.to_str().unwrap(), "--bundle-version", "7"]);
    assert!(stderr(&kept).contains("kept the 3 signature(s) already there"), "{}", stderr(&kept));
    assert_eq!(w.manifest(&sig_tag)["layers"].as_array().unwrap().len(), 3);
    let v = w.verify(&w.path("cosign.pub"), &reference);
    assert_eq!(code(&v), 0, "cosign verify --key cosign.pub: {}", stderr(&v));

    // cosign's own key file signs with wmrender too (its password from COSIGN_PASSWORD, as cosign reads it);
    // without the password, or with a wrong one, it is refused in wmrender's words and nothing is signed.
    let cosign_key = w.path("cosign.key");
    let with_password = |password: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wmrender"));
        cmd.args(["publish", "--rendered", rendered.to_str().unwrap(), "--to", &to]);
        cmd.args(["--registry-ca", w.ca.pem().to_str().unwrap(), "--bundle-version", "8"]);
        cmd.args(["--sign-key", cosign_key.to_str().unwrap()]).env_remove("COSIGN_PASSWORD");
        if let Some(p) = password {
            cmd.env("COSIGN_PASSWORD", p);
        }
        cmd.output().unwrap()
    };
    for (password, says) in [(None, "set COSIGN_PASSWORD"), (Some("not-the-password"), "a wrong COSIGN_PASSWORD")] {
        let r = with_password(password);
        assert_eq!(code(&r), 2, "{}", stderr(&r));
        assert!(stderr(&r).contains(says) && stderr(&r).contains("cosign.key"), "{}", stderr(&r));
        assert!(!stderr(&r).contains("not-the-password"), "the password was printed: {}", stderr(&r));
    }
    assert_eq!(w.manifest(&sig_tag)["layers"].as_array().unwrap().len(), 3);
    let r = with_password(Some("cosign-test-password"));
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    assert_eq!(w.manifest(&sig_tag)["layers"].as_array().unwrap().len(), 4);
    let v = w.verify(&w.path("cosign.pub"), &reference);
    assert_eq!(code(&v), 0, "cosign verify --key cosign.pub: {}", stderr(&v));
    let claims: Value = serde_json::from_slice(&v.stdout).unwrap();
    let versions: Vec<&str> = claims
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["optional"]["dev.wmrender.bundle-version"].as_str().unwrap())
        .collect();
    assert!(versions.contains(&"8"), "{versions:?}");

    // The node's rule (the contract's, which the agent runs) reads the same signatures: wmrender's and cosign's
    // are accepted with their public keys, a stranger's key verifies none, an older version than the applied one
    // is refused.
    let stored = signatures(&w, &registry, &sig_tag);
    assert_eq!(stored.len(), 4);
    let digest = reference.rsplit_once('@').unwrap().1;
    let keys = |file: &Path| PublicKey::parse_pem(&std::fs::read_to_string(file).unwrap()).unwrap();
    for (file, expected) in
        [(&public, &keys(&public)[0].id), (&w.path("cosign.pub"), &keys(&w.path("cosign.pub"))[0].id)]
    {
        let accepted = signed_bundle::judge(digest, &stored, &keys(file), Some(7)).unwrap();
        assert_eq!(&accepted.key, expected, "{}", file.display());
        // wmrender's key signed version 7; cosign's key version 7 (by cosign) and 8 (by wmrender): the highest counts.
        assert_eq!(accepted.version, if file == &public { 7 } else { 8 }, "{}", file.display());
    }
    assert_eq!(signed_bundle::judge(digest, &stored, &keys(&other_public), None), Err(Refusal::Untrusted(4)));
    assert_eq!(
        signed_bundle::judge(digest, &stored, &keys(&public), Some(8)),
        Err(Refusal::Older { offered: 7, applied: 8 })
    );

    // Another bundle, published unsigned: cosign finds no signature for its digest.
    let changed = w.rendered("changed", Some("api-int.other.example.com"));
    let unsigned = w.publish(&changed, &to, &[]);
    assert_eq!(code(&unsigned), 0, "{}", stderr(&unsigned));
    let v = w.verify(&public, stdout(&unsigned).trim());
    assert_ne!(code(&v), 0, "cosign verified an unsigned bundle");
}

#[test]
fn where_the_registry_has_the_referrers_api_the_signatures_are_a_referrer_too_which_cosign_verifies() {
    let w = World::new();
    let registry = ReferrersRegistry::start(&w.path("oci-registry"), &w.ca);
    let rendered = w.rendered("out", None);
    let (key, public) = w.key("ci-signing");
    let to = format!("{}/fleet/windows-bundle:main", registry.addr);
    let r = w.publish(&rendered, &to, &["--sign-key", key.to_str().unwrap(), "--bundle-version", "7"]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    let reference = stdout(&r).trim().to_string();
    let digest = reference.rsplit_once('@').unwrap().1.to_string();
    let api = |digest: &str| format!("https://{}/v2/fleet/windows-bundle/referrers/{digest}", registry.addr);
    let raw = |url: &str, accept: &str| {
        let (status, body) = support::registry::request(&w.ca, "GET", url, accept, None);
        assert_eq!(status, 200, "{url}: {}", String::from_utf8_lossy(&body));
        body
    };
    let get = |url: &str, accept: &str| serde_json::from_slice::<Value>(&raw(url, accept)).unwrap();

    // The registry lists one referrer of the bundle, of cosign's signature type, which stderr names.
    let index = get(&api(&digest), INDEX_MEDIA_TYPE);
    let listed = index["manifests"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{index}");
    assert_eq!(listed[0]["artifactType"], signed_bundle::REFERRER_ARTIFACT_TYPE);
    let referrer_digest = listed[0]["digest"].as_str().unwrap();
    assert!(stderr(&r).contains(&format!("stored the signatures as the referrer {referrer_digest}")), "{}", stderr(&r));
    let url = |what: &str| format!("https://{}/v2/fleet/windows-bundle/manifests/{what}", registry.addr);
    let referrer = get(&url(referrer_digest), MANIFEST);
    assert_eq!(referrer["subject"]["digest"], digest.as_str());
    assert_eq!(referrer["subject"]["size"], raw(&url(&digest), MANIFEST).len());
    let sig_tag = signed_bundle::tag_for(&digest);
    assert_eq!(get(&url(&sig_tag), MANIFEST)["layers"], referrer["layers"], "the same signatures as under the tag");

    // The real cosign finds it there: with the tag gone, `cosign verify` finds nothing and `cosign verify
    // --experimental-oci11` (which reads the referrers API) verifies it.
    let (status, body) = support::registry::request(&w.ca, "DELETE", &url(&sig_tag), MANIFEST, None);
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
    let v = w.verify(&public, &reference);
    assert_ne!(code(&v), 0, "cosign verified without the tag: {}", stderr(&v));
    let oci11 = |public: &Path| {
        w.cosign(&[
            "verify",
            "--key",
            public.to_str().unwrap(),
            "--insecure-ignore-tlog=true",
            "--experimental-oci11",
            &reference,
        ])
    };
    let v = oci11(&public);
    assert_eq!(code(&v), 0, "cosign verify --experimental-oci11: {}", stderr(&v));
    let claims: Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(claims[0]["critical"]["image"]["docker-manifest-digest"], digest.as_str());
    assert_eq!(claims[0]["optional"]["dev.wmrender.bundle-version"], "7");
    let (_, other_public) = w.key("other");
    assert_ne!(code(&oci11(&other_public)), 0, "cosign verified the referrer with a key that did not sign");

    // Published without a tag (the manifest pushed by its digest, which this registry, like ECR, answers without a
    // `Location`): the same digest.
    let r = w.publish(&rendered, &format!("{}/fleet/by-digest", registry.addr), &[]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    assert_eq!(stdout(&r).trim().rsplit_once('@').unwrap().1, digest);
}

#[test]
fn a_registry_that_asks_for_a_token_gets_the_credentials_at_its_realm_and_refuses_a_wrong_password() {
    let w = World::new();
    let registry = Registry::start_with(&w.path("registry"), &w.ca, Auth::Token(USER));
    let rendered = w.rendered("out", None);
    let (key, public) = w.key("ci-signing");
    let to = format!("{}/fleet/windows-bundle:main", registry.addr);
    use base64::Engine;
    let config = |password: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", USER.0));
        serde_json::json!({"auths": {registry.addr.clone(): {"auth": auth}}}).to_string()
    };
    let secret = w.path("auth.json");
    let signed = ["--sign-key", key.to_str().unwrap(), "--bundle-version", "7"];

    // Without credentials, or with a password the realm refuses: exit 2 in wmrender's words, nothing printed of it.
    let r = w.publish(&rendered, &to, &signed);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("refused the credentials"), "{}", stderr(&r));
    std::fs::write(&secret, config("not-the-password")).unwrap();
    let mut with_secret = vec!["--registry-config", secret.to_str().unwrap()];
    with_secret.extend_from_slice(&signed);
    let r = w.publish(&rendered, &to, &with_secret);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("refused the credentials"), "{}", stderr(&r));
    let wrong = base64::engine::general_purpose::STANDARD.encode(format!("{}:not-the-password", USER.0));
    for secret in ["not-the-password", wrong.as_str()] {
        assert!(!stderr(&r).contains(secret) && !stdout(&r).contains(secret), "{}", stderr(&r));
    }
    assert!(registry.token_log().iter().any(|l| l.contains("refused: user \"ci\"")), "{:?}", registry.token_log());

    // With them: the token for pull and push comes from the realm, the bundle is published and signed, and the real
    // cosign (the same credentials in its docker config) verifies it through the same flow.
    std::fs::write(&secret, config(USER.1)).unwrap();
    let r = w.publish(&rendered, &to, &with_secret);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    let push = "granted: user \"ci\" scope \"repository:fleet/windows-bundle:pull,push\"";
    assert!(registry.token_log().iter().any(|l| l.ends_with(push)), "{:?}", registry.token_log());
    let docker = w.path(".docker");
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::copy(&secret, docker.join("config.json")).unwrap();
    let v = w.verify(&public, stdout(&r).trim());
    assert_eq!(code(&v), 0, "cosign verify: {}", stderr(&v));
}

#[test]
fn a_one_file_change_sends_that_file_and_the_manifest_and_the_bytes_are_counted() {
    let w = World::new();
    let registry = Registry::start(&w.path("registry"), &w.ca, None);
    let relay = Relay::start(&registry.addr);
    let first = w.rendered("v1", None);
    let second = w.rendered("v2", Some("api-int.v2.example.com"));
    // The relay's port is another: the registry's certificate names 127.0.0.1 only, which still holds.
    let to = format!("{}/fleet/windows-bundle:main", relay.addr);
    let r = w.publish(&first, &to, &[]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    let whole = relay.take();
    let r = w.publish(&second, &to, &[]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    let one_file = relay.take();
    // services.json is the one file that differs: one blob sent, the others asked for and found.
    let changed = node_files(&second).into_iter().find(|(p, _)| p == "C/k/wmrender/services.json").unwrap().1;
    assert_ne!(node_files(&first).iter().find(|(p, _)| p == "C/k/wmrender/services.json").unwrap().1, changed);
    assert!(stderr(&r).contains(": 1 blobs sent"), "{}", stderr(&r));
    eprintln!(
        "wire: first publish {whole} bytes; a one-file change ({} bytes) {one_file} bytes, {} over the file",
        changed.len(),
        one_file as i64 - changed.len() as i64
    );
    // What it costs today (docs/pull.md): the tag's manifest read and the new one written (about 3.4 KB each for
    // this bundle), ten requests and a TLS handshake. The bound keeps it from growing back to a request per file.
    assert!(
        one_file <= changed.len() as u64 + 16 * 1024 && one_file < whole / 2,
        "a one-file change cost {one_file} bytes (the file: {}), the whole bundle {whole}",
        changed.len()
    );
}

#[test]
fn a_payload_is_published_as_an_artifact_of_its_own_with_its_list_and_only_when_listed() {
    let w = World::new();
    let registry = Registry::start(&w.path("registry"), &w.ca, None);
    let payload = w.path("payload");
    for (path, bytes) in
        [("C/k/kubelet.exe", "a program"), ("C/k/cni/host-local.exe", "another"), ("C/k/hns.psm1", "a module")]
    {
        std::fs::create_dir_all(payload.join(path).parent().unwrap()).unwrap();
        std::fs::write(payload.join(path), bytes).unwrap();
    }
    let to = format!("{}/fleet/windows-payload:v1", registry.addr);
    // Not listed yet: refused, with what to run.
    let r = w.publish_from("--payload", &payload, &to, &[]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("run `wmrender payload list"), "{}", stderr(&r));
    let listed = wmrender(&["payload", "list", payload.to_str().unwrap()]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let r = w.publish_from("--payload", &payload, &to, &[]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    let manifest = w.manifest(stdout(&r).trim());
    assert_eq!(manifest["artifactType"], "application/vnd.wmrender.payload.v1");
    let titles: Vec<&str> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["annotations"]["org.opencontainers.image.title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["C/k/cni/host-local.exe", "C/k/hns.psm1", "C/k/kubelet.exe", "payload.json"]);
    // A file changed after the list was written is not published.
    std::fs::write(payload.join("C/k/kubelet.exe"), "changed").unwrap();
    let r = w.publish_from("--payload", &payload, &to, &[]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("C/k/kubelet.exe has sha256"), "{}", stderr(&r));
    // One of the two, not both.
    let out = w.rendered("out", None);
    let r = w.publish_from("--payload", &payload, &to, &["--rendered", out.to_str().unwrap()]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
}

#[test]
fn bad_targets_keys_and_credentials_are_refused_in_wmrenders_words_and_a_registry_that_is_down_is_a_failure() {
    let w = World::new();
    let registry = Registry::start(&w.path("registry"), &w.ca, Some(USER));
    let rendered = w.rendered("out", None);
    let to = format!("{}/fleet/windows-bundle", registry.addr);

    let r = w.publish(&rendered, "fleet/windows-bundle", &[]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("name the registry"), "{}", stderr(&r));
    let r = w.publish(&rendered, &format!("{to}@sha256:{}", "0".repeat(64)), &[]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("publish computes the digest"), "{}", stderr(&r));

    // A signing key without a version, a version without a key: usage errors.
    let (key, _) = w.key("k");
    let r = w.publish(&rendered, &to, &["--sign-key", key.to_str().unwrap()]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("--bundle-version"), "{}", stderr(&r));
    let r = w.publish(&rendered, &to, &["--bundle-version", "3"]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));

    // Keys that are not an unencrypted P-256 PKCS#8 key name the file and say what to do.
    let rsa = w.path("rsa.pem");
    support::openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        rsa.to_str().unwrap(),
    ]);
    let sec1 = w.path("sec1.pem");
    support::openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", sec1.to_str().unwrap()]);
    for (file, says) in [
        (rsa.clone(), "not an ECDSA P-256 key"),
        (sec1.clone(), "openssl pkcs8 -topk8"),
        (w.path("missing.pem"), "missing.pem"),
        (rendered.join("manifest.json"), "no -----BEGIN PRIVATE KEY----- block"),
    ] {
        let r = w.publish(&rendered, &to, &["--sign-key", file.to_str().unwrap(), "--bundle-version", "3"]);
        assert_eq!(code(&r), 2, "{}: {}", file.display(), stderr(&r));
        assert!(
            stderr(&r).contains(says) && stderr(&r).contains(file.file_name().unwrap().to_str().unwrap()),
            "{}",
            stderr(&r)
        );
    }

    // A registry that asks for credentials: refused without them (exit 2), published with them.
    let r = w.publish(&rendered, &to, &[]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("refused the credentials"), "{}", stderr(&r));
    let secret = w.path("auth.json");
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", USER.0, USER.1));
    std::fs::write(&secret, serde_json::json!({"auths": {registry.addr.clone(): {"auth": auth}}}).to_string()).unwrap();
    let r = w.publish(&rendered, &to, &["--registry-config", secret.to_str().unwrap()]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    let all = format!("{}{}", stdout(&r), stderr(&r));
    assert!(!all.contains(USER.1) && !all.contains(&auth), "a credential was printed:\n{all}");

    // A render that was changed by hand is not published.
    let edited = w.rendered("edited", None);
    std::fs::write(edited.join("node/C/k/kubelet.conf"), "edited").unwrap();
    let r = w.publish(&edited, &to, &["--registry-config", secret.to_str().unwrap()]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("differs from the rendered manifest.json"), "{}", stderr(&r));

    // Nothing listens: an operational failure (exit 3) that says so.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let r = w.publish(&rendered, &format!("{closed}/fleet/windows-bundle"), &[]);
    assert_eq!(code(&r), 3, "{}", stderr(&r));
    assert!(stderr(&r).contains("cannot reach it"), "{}", stderr(&r));
}
