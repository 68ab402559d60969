//! The agent's pull (crates/node-agent/src/pull, the code the Windows agent runs before each pass) on real parts: a
//! real kube-apiserver with the Node authorizer and NodeRestriction (the agent reads its own Node's
//! `wmrender.dev/desired-bundle` with the credentials kubelet's TLS bootstrap gave it, the signer being
//! kube-controller-manager's), Debian's `docker-registry` on 127.0.0.1 with TLS and htpasswd, reached through the
//! rendered hosts.toml of an ImageTagMirrorSet with the credentials sync merges in, `wmrender publish` signing in
//! CI's place, and the real `cosign` signing with its own key. The node is a folder standing for `C:\` laid out as
//! sync leaves it (the bundle, a payload file, a credential); kubelet is played (tests/support/played.rs).
//!
//! Not here: the agent under Wine pulling (its pass is the same code; the Wine rig's tests run the pass).
#![cfg(all(feature = "registry", feature = "cluster"))]

mod support;

use base64::Engine;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use support::apiserver::ControlPlane;
use support::controller_manager::{CSR_SIGNING, ControllerManager};
use support::registry::{Auth, ReferrersRegistry, Registry, Relay, Scratch};
use support::{code, stderr, wmrender};
use wmrender_contract::bundle_artifact::INDEX_MEDIA_TYPE;
use wmrender_contract::node_status::{
    AGENT_ANNOTATION, DESIRED_BUNDLE_ANNOTATION, DESIRED_PAYLOAD_ANNOTATION, PAYLOAD_PULL_CONDITION_TYPE,
    PULL_CONDITION_TYPE, PULLED_BUNDLE_ANNOTATION, PULLED_PAYLOAD_ANNOTATION,
};
use wmrender_contract::signed_bundle::{self, PublicKey};
use wmrender_contract::{
    ApplyResult, ApplyStatus, FileKind, NodeFile, NodeManifest, NodePath, PullOutcome, PullReport,
};
use wmrender_node::pull::Puller;
use wmrender_node::system::Folder;

const USER: (&str, &str) = ("fleet", "s3cret-pull");
/// The repository the bundle is published to (on the test registry) and named by (through the mirror).
const SOURCE: &str = "bundles.example.com/fleet/windows-bundle";

struct Fleet {
    scratch: Scratch,
    registry: Registry,
    /// The mirror the nodes pull through: a byte-counting relay to the registry (TLS passes through it).
    mirror: Relay,
    /// The folder standing for the node's `C:\`.
    node: PathBuf,
    /// The node's kubeconfig, from its TLS bootstrap.
    kubeconfig: PathBuf,
    cp: ControlPlane,
    /// The registry client the agent's service keeps from one pull to the next.
    puller: Puller,
}

impl Fleet {
    /// A control plane with kube-controller-manager's CSR signer, the node `win-a` joined by TLS bootstrap, the test
    /// registry (htpasswd) and the byte-counting mirror in front of it. The controllers stop when dropped.
    fn start() -> (Fleet, ControllerManager) {
        Fleet::start_with(Auth::Basic(USER))
    }

    /// The same, with the registry asking for credentials as `auth` says.
    fn start_with(auth: Auth) -> (Fleet, ControllerManager) {
        let cp = ControlPlane::start();
        let token = support::openshift::cluster(&cp, "None");
        let controllers = ControllerManager::start(&cp, &[CSR_SIGNING]);
        let kubelet = support::played::joined(&cp, &token, "win-a", "10.0.0.5");
        let scratch = Scratch::new();
        let registry = Registry::start_with(&scratch.path("registry"), &scratch.ca, auth);
        let node = scratch.path("node");
        let mirror = Relay::start(&registry.addr);
        let fleet = Fleet {
            kubeconfig: kubelet.kubeconfig.clone(),
            scratch,
            registry,
            mirror,
            node,
            cp,
            puller: Puller::default(),
        };
        (fleet, controllers)
    }

    /// `examples/aws` with the bundle's registry mirrored to the test registry (a tag mirror: signatures are found
    /// by tag) and the trusted keys; `host` changes `apiServerInternalURL` (one node file: services.json).
    fn render(&self, name: &str, keys: &[&Path], host: &str) -> PathBuf {
        let text = std::fs::read_to_string(support::root().join("examples/aws/wmrender.yaml")).unwrap();
        let text =
            support::registry::with_pull(&text.replace("api-int.prod-east.example.com", host), &self.mirror.addr, keys);
        let inputs = self.scratch.path(&format!("{name}.yaml"));
        std::fs::write(&inputs, text).unwrap();
        let out = self.scratch.path(name);
        let r = wmrender(&["render", "-f", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code(&r), 0, "{}", stderr(&r));
        out
    }

    fn auth(&self) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", USER.0, USER.1)))
    }

    /// `wmrender publish` of a render to the test registry; its `registry/repository@digest`.
    fn publish(&self, rendered: &Path, extra: &[&str]) -> String {
        self.publish_to(&self.registry.addr, rendered, extra)
    }

    /// `wmrender publish` of a render to the registry at `addr` (the test registry's credentials given).
    fn publish_to(&self, addr: &str, rendered: &Path, extra: &[&str]) -> String {
        self.publish_from(&format!("{addr}/fleet/windows-bundle:main"), "--rendered", rendered, extra)
    }

    /// `wmrender publish --payload` of a payload directory (listed first) to the test registry; the reference by
    /// the mirrored source's name.
    fn publish_payload(&self, dir: &Path, extra: &[&str]) -> String {
        let listed = wmrender(&["payload", "list", dir.to_str().unwrap()]);
        assert_eq!(code(&listed), 0, "payload list: {}", stderr(&listed));
        let to = format!("{}/fleet/windows-payload:main", self.registry.addr);
        let published = self.publish_from(&to, "--payload", dir, extra);
        // The controller names the same payload without publishing (`--pull-payload-from`).
        let repository = to.rsplit_once(':').unwrap().0;
        let named = wmrender::controller::published_payload_reference(dir, repository).unwrap();
        assert_eq!(named, published, "the controller points nodes at the digest publish pushed");
        format!("bundles.example.com/fleet/windows-payload@{}", published.split_once('@').unwrap().1)
    }

    /// `wmrender publish <what> DIR --to to` with the test registry's credentials and CA; what it prints.
    fn publish_from(&self, to: &str, what: &str, dir: &Path, extra: &[&str]) -> String {
        let secret = self.scratch.path("auth.json");
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", USER.0, USER.1));
        std::fs::write(&secret, json!({"auths": {self.registry.addr.clone(): {"auth": auth}}}).to_string()).unwrap();
        let mut args = vec!["publish", what, dir.to_str().unwrap(), "--to", to];
        let ca = self.scratch.ca.pem();
        args.extend(["--registry-ca", ca.to_str().unwrap(), "--registry-config", secret.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let r = wmrender(&args);
        assert_eq!(code(&r), 0, "publish {what}: {}", stderr(&r));
        String::from_utf8_lossy(&r.stdout).trim().to_string()
    }

    /// The reference by the mirrored source's name, as a user writes it on the Node.
    fn desired(&self, published: &str) -> String {
        format!("{SOURCE}@{}", published.split_once('@').unwrap().1)
    }

    /// The Node says which bundle it should have, as the controller, a user or Argo CD sets it.
    fn want(&self, reference: &str) {
        let patch = json!({"metadata": {"annotations": {DESIRED_BUNDLE_ANNOTATION: reference}}});
        self.cp.admin().merge_patch("/api/v1/nodes/win-a", &patch).unwrap();
    }

    /// The Node names `reference`, and the pull stages it.
    fn take(&self, reference: &str) -> PullReport {
        self.want(reference);
        let r = self.pull();
        assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");
        r
    }

    /// The node holds the render's services.json (the one file the test renders change).
    fn holds(&self, rendered: &Path) {
        let on_node = std::fs::read(self.node.join("k/wmrender/services.json")).unwrap();
        assert!(on_node == rendered_file(rendered, r"C:\k\wmrender\services.json"), "{}", rendered.display());
    }

    fn pull(&self) -> PullReport {
        wmrender_node::pull::pull(&Folder(self.node.clone()), None, &self.puller)
            .expect("the Node names a desired bundle")
    }

    /// Every file of the node, by its path: what "nothing changed" compares.
    fn files(&self) -> BTreeMap<String, Vec<u8>> {
        walkdir::WalkDir::new(&self.node)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                (e.path().strip_prefix(&self.node).unwrap().display().to_string(), std::fs::read(e.path()).unwrap())
            })
            .collect()
    }

    fn manifest(&self) -> NodeManifest {
        NodeManifest::parse(&std::fs::read(self.node.join("k/wmrender/manifest.json")).unwrap()).unwrap()
    }

    /// The node as sync leaves it after first contact: the rendered bundle (its hosts.toml with the mirror's
    /// credentials, as sync merges the pull secret in), a payload file, a credential, the trusted CA bundle, the
    /// kubeconfig of kubelet's bootstrap, and the agent's record of its Node's name.
    fn first_contact(&self, rendered: &Path) {
        let mut files = Vec::new();
        let mut put = |path: &str, bytes: Vec<u8>, kind: FileKind| {
            let np = NodePath::parse(path).unwrap();
            let local = self.node.join(np.relative_slash());
            std::fs::create_dir_all(local.parent().unwrap()).unwrap();
            std::fs::write(&local, &bytes).unwrap();
            files.push(NodeFile {
                sha256: wmrender_contract::sha256_hex(&bytes),
                size: bytes.len() as u64,
                path: np,
                kind,
                staged: false,
            });
        };
        for e in walkdir::WalkDir::new(rendered.join("node")).into_iter().map(|e| e.unwrap()) {
            if !e.file_type().is_file() {
                continue;
            }
            let rel = e.path().strip_prefix(rendered).unwrap().display().to_string();
            let np = NodePath::from_bundle_path(&rel).unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            if wmrender_contract::hosts_toml::is_hosts_toml(&np) {
                let auth = self.auth();
                let addr = self.mirror.addr.clone();
                let merged = wmrender_contract::hosts_toml::merge_credentials(&bytes, &|host| {
                    (host == addr).then(|| auth.clone())
                });
                put(np.as_str(), merged, FileKind::Credential);
            } else {
                put(np.as_str(), bytes, FileKind::Bundle);
            }
        }
        put(r"C:\k\kubelet.exe", b"MZ the payload's kubelet".to_vec(), FileKind::Payload);
        put(r"C:\k\wmrender\wmrender-node.exe", b"MZ the agent".to_vec(), FileKind::Payload);
        put(r"C:\k\bootstrap-kubeconfig", b"apiVersion: v1\nkind: Config\n".to_vec(), FileKind::Credential);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = NodeManifest { wmrender: "0.1.0".into(), files, pending: None, applied: true };
        std::fs::write(self.node.join("k/wmrender/manifest.json"), manifest.to_json()).unwrap();
        std::fs::copy(self.scratch.ca.pem(), self.node.join("k/ca-bundle.crt")).unwrap();
        std::fs::copy(&self.kubeconfig, self.node.join("k/kubeconfig")).unwrap();
        std::fs::write(self.node.join("k/wmrender/applied.json"), r#"{"nodeName":"win-a"}"#).unwrap();
    }
}

fn rendered_file(rendered: &Path, node_path: &str) -> Vec<u8> {
    std::fs::read(rendered.join(NodePath::known(node_path).bundle_path())).unwrap()
}

fn pull_condition(node: &Value) -> Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == PULL_CONDITION_TYPE))
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_signed_bundle_is_pulled_through_the_mirror_verified_and_staged_and_every_bad_one_changes_nothing() {
    let (f, _controllers) = Fleet::start();
    let (ci, ci_public) = f.scratch.key("ci");
    let (stranger, _) = f.scratch.key("stranger");
    let g = support::cosign::run(&f.scratch, &["generate-key-pair"]);
    assert_eq!(code(&g), 0, "cosign generate-key-pair: {}", stderr(&g));
    let cosign_public = f.scratch.path("cosign.pub");
    let keys = [ci_public.as_path(), cosign_public.as_path()];

    let v1 = f.render("v1", &keys, "api-int.one.example.com");
    f.first_contact(&v1);
    let payload_before = std::fs::read(f.node.join("k/kubelet.exe")).unwrap();

    // No desired bundle on the Node: nothing to pull.
    assert_eq!(wmrender_node::pull::pull(&Folder(f.node.clone()), None, &f.puller), None);

    // CI publishes v2, signed as version 2; the Node is told to take it, by the mirrored source's name.
    let v2 = f.render("v2", &keys, "api-int.two.example.com");
    let v2_published = f.publish(&v2, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "2"]);
    // The controller names the same digest from the render alone (`--pull-from`), without publishing.
    let repository = format!("{}/fleet/windows-bundle", f.registry.addr);
    let rendered = wmrender::delivery::read_rendered(&v2).unwrap();
    assert_eq!(wmrender::controller::published_reference(&rendered, &repository), v2_published);
    let v2_ref = f.desired(&v2_published);
    f.want(&v2_ref);
    f.mirror.take();
    let r = f.pull();
    let wire = f.mirror.take();
    assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");
    assert_eq!(r.on_node.as_deref(), Some(v2_ref.as_str()));
    // Only services.json changed between the renders: it alone is fetched; the others are read from the node (the
    // mirror's hosts.toml with the credentials sync merged in taken out).
    let files = walkdir::WalkDir::new(v2.join("node"))
        .into_iter()
        .filter(|e| e.as_ref().unwrap().file_type().is_file())
        .count();
    assert!(r.message.contains(&format!("1 of {files} files fetched")), "{}", r.message);
    // What the one-file change cost on the wire (TLS included): the manifest, the signature image and its payload,
    // the file.
    let changed = rendered_file(&v2, r"C:\k\wmrender\services.json").len() as u64;
    eprintln!("pulling a one-file change: {wire} bytes on the wire; the file is {changed} bytes ({})", r.message);
    assert!(wire > changed && wire < changed + 32 * 1024, "{wire} bytes for a {changed}-byte change");
    f.holds(&v2);
    let m = f.manifest();
    assert!(m.pending.is_none() && !m.applied, "staged, to be applied by the pass: {m:?}");
    let kind_of = |p: &str| m.files.iter().find(|e| e.path.as_str() == p).map(|e| e.kind);
    assert_eq!(kind_of(r"C:\k\kubelet.exe"), Some(FileKind::Payload), "the payload stays");
    assert_eq!(kind_of(r"C:\k\bootstrap-kubeconfig"), Some(FileKind::Credential), "credentials stay");
    assert_eq!(std::fs::read(f.node.join("k/kubelet.exe")).unwrap(), payload_before);
    let hosts: Vec<&NodeFile> =
        m.files.iter().filter(|e| wmrender_contract::hosts_toml::is_hosts_toml(&e.path)).collect();
    assert!(!hosts.is_empty());
    for h in hosts {
        let text = std::fs::read_to_string(f.node.join(h.path.relative_slash())).unwrap();
        if text.contains(&f.mirror.addr) {
            assert!(text.contains(&f.auth()), "the mirror's credentials are carried over: {text}");
            assert_eq!(h.kind, FileKind::Credential);
        }
    }
    // Every file the manifest lists is on the node with its digest.
    for e in &m.files {
        let bytes = std::fs::read(f.node.join(e.path.relative_slash())).unwrap();
        assert_eq!(wmrender_contract::sha256_hex(&bytes), e.sha256, "{}", e.path);
    }

    // The pass converged: the Node says so, with the node's own credentials.
    let result = ApplyResult {
        status: ApplyStatus::Converged,
        node_name: "win-a".into(),
        bundle: m.bundle_digest(),
        pull: Some(r.clone()),
        ..Default::default()
    };
    assert_eq!(wmrender_node::node_status::report(&f.node.join("k/kubeconfig"), &result), "reported");
    let n = f.cp.admin().get("/api/v1/nodes/win-a").unwrap();
    let c = pull_condition(&n);
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some("Pulled")), "{n}");
    assert_eq!(n["metadata"]["annotations"][PULLED_BUNDLE_ANNOTATION], v2_ref.as_str());

    // Asked again: nothing fetched.
    let requests = f.registry.requests().len();
    assert_eq!(f.pull().outcome, PullOutcome::Current);
    assert_eq!(f.registry.requests().len(), requests, "a bundle on the node is not fetched again");

    // Each bad bundle is refused, and nothing on the node changes.
    let refused = |reference: &str, says: &str| {
        let before = f.files();
        f.want(reference);
        let r = f.pull();
        assert_eq!(r.outcome, PullOutcome::Refused, "{r:?}");
        assert!(r.message.contains(says), "{says}: {}", r.message);
        assert_eq!(r.on_node.as_deref(), Some(v2_ref.as_str()));
        assert!(f.files() == before, "{reference} changed the node");
        r
    };
    let v1_old = f.desired(&f.publish(&v1, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "1"]));
    refused(&v1_old, "older than version 2");
    let v3 = f.render("v3", &keys, "api-int.three.example.com");
    let v3_unsigned = f.desired(&f.publish(&v3, &[]));
    refused(&v3_unsigned, "not signed");
    let v3_stranger = f.desired(&f.publish(&v3, &["--sign-key", stranger.to_str().unwrap(), "--bundle-version", "3"]));
    assert_eq!(v3_stranger, v3_unsigned, "the same render, the same digest");
    refused(&v3_stranger, "no trusted key verifies");
    refused(&format!("{SOURCE}:main"), "does not name a bundle");
    // Content at rest in the registry changed under its digest: caught, refused.
    let v4 = f.render("v4", &keys, "api-int.four.example.com");
    let v4_ref = f.desired(&f.publish(&v4, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "4"]));
    let services = rendered_file(&v4, r"C:\k\wmrender\services.json");
    let blob = f.registry.blob(&format!("sha256:{}", wmrender_contract::sha256_hex(&services)));
    let mut longer = services.clone();
    longer.extend_from_slice(b" ");
    let mut same_size = services.clone();
    *same_size.last_mut().unwrap() ^= 0x20;
    for (tampered, says) in [(longer, "served more than"), (same_size, "served other content")] {
        std::fs::write(&blob, &tampered).unwrap();
        let r = refused(&v4_ref, "does not match its digest");
        assert!(r.message.contains(says), "{}", r.message);
    }
    std::fs::write(&blob, &services).unwrap();
    // Served as published, v4 is taken: another one-file change, pulled by the agent that pulled before, over a new
    // connection (its idle ones end in the minutes between pulls).
    f.want(&v4_ref);
    f.mirror.cut();
    f.mirror.take();
    let connections = f.mirror.connections();
    let r = f.pull();
    let wire_again = f.mirror.take();
    assert_eq!(f.mirror.connections() - connections, 1, "the pull's requests go over one new connection");
    assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");
    assert!(r.message.contains(&format!("1 of {files} files fetched")), "{}", r.message);
    let changed_again = services.len() as u64;
    eprintln!("pulling another one-file change: {wire_again} bytes on the wire; the file is {changed_again} bytes");
    // The same requests as v2's pull, the agent's first (a full handshake), but over a new connection the kept client
    // resumes its TLS session: no certificate exchange. (A new client here reads as many bytes as that first pull.)
    assert!(
        wire_again - changed_again + 512 < wire - changed,
        "{wire_again} bytes after a pull, {wire} for the first: the TLS session was not resumed"
    );

    // A registry that cannot be reached: tried again, nothing changed.
    let before = f.files();
    f.want(&format!("127.0.0.1:1/fleet/windows-bundle@{}", v4_ref.split_once('@').unwrap().1));
    let r = f.pull();
    assert_eq!(r.outcome, PullOutcome::Retrying, "{r:?}");
    assert!(r.message.contains("cannot be fetched"), "{}", r.message);
    assert!(f.files() == before);
    let result = ApplyResult { pull: Some(r), ..result };
    assert_eq!(wmrender_node::node_status::report(&f.node.join("k/kubeconfig"), &result), "reported");
    let c = pull_condition(&f.cp.admin().get("/api/v1/nodes/win-a").unwrap());
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("Unknown"), Some("Retrying")));

    // What cosign signed with its own key (listed in node.json) is pulled like what wmrender signed.
    let v5 = f.render("v5", &keys, "api-int.five.example.com");
    let v5_published = f.publish(&v5, &[]);
    let docker = f.scratch.path(".docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", USER.0, USER.1));
    std::fs::write(docker.join("config.json"), json!({"auths": {f.registry.addr.clone(): {"auth": auth}}}).to_string())
        .unwrap();
    let s = support::cosign::run(
        &f.scratch,
        &["sign", "--key", "cosign.key", "--tlog-upload=false", "-a", "dev.wmrender.bundle-version=5", &v5_published],
    );
    assert_eq!(code(&s), 0, "cosign sign: {}", stderr(&s));
    let v5_ref = f.desired(&v5_published);
    f.take(&v5_ref);
    f.holds(&v5);

    // A rollback signed as one is taken.
    let back =
        f.desired(&f.publish(&v2, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "2", "--downgrade"]));
    assert_eq!(back, v2_ref);
    let r = f.take(&back);
    assert!(r.message.contains("a signed downgrade"), "{}", r.message);
    f.holds(&v2);

    // A sync delivers another bundle since (the push path): the pulled one is no longer said to be on the node,
    // and it is not pulled over the push until the annotation changes.
    let mut m = f.manifest();
    let services = m.files.iter_mut().find(|e| e.path.as_str() == r"C:\k\wmrender\services.json").unwrap();
    let pushed = rendered_file(&v5, r"C:\k\wmrender\services.json");
    std::fs::write(f.node.join("k/wmrender/services.json"), &pushed).unwrap();
    services.sha256 = wmrender_contract::sha256_hex(&pushed);
    std::fs::write(f.node.join("k/wmrender/manifest.json"), m.to_json()).unwrap();
    let r = f.pull();
    assert_eq!((r.outcome, r.on_node.as_deref()), (PullOutcome::Current, None), "{r:?}");
    assert!(r.message.contains("a sync has delivered another"), "{}", r.message);
    assert_eq!(std::fs::read(f.node.join("k/wmrender/services.json")).unwrap(), pushed);
}

#[test]
fn signatures_stored_as_oci_referrers_are_read_from_the_referrers_api_and_from_its_tag_schema() {
    let (f, _controllers) = Fleet::start();
    let oci = ReferrersRegistry::start(&f.scratch.path("oci-registry"), &f.scratch.ca);
    for prefix in ["cosign", "stranger"] {
        let g = support::cosign::run(&f.scratch, &["generate-key-pair", "--output-key-prefix", prefix]);
        assert_eq!(code(&g), 0, "cosign generate-key-pair: {}", stderr(&g));
    }
    let cosign_public = f.scratch.path("cosign.pub");
    let trusted = PublicKey::parse_pem(&std::fs::read_to_string(&cosign_public).unwrap()).unwrap();
    let keys = [cosign_public.as_path()];
    let docker = f.scratch.path(".docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", USER.0, USER.1));
    std::fs::write(docker.join("config.json"), json!({"auths": {f.registry.addr.clone(): {"auth": auth}}}).to_string())
        .unwrap();
    // cosign's OCI 1.1 form: the signature image as a referrer of the bundle, no `.sig` tag.
    let sign_as_referrer = |key: &str, version: u32, reference: &str| {
        let s = support::cosign::run(
            &f.scratch,
            &[
                "sign",
                "--key",
                key,
                "--tlog-upload=false",
                "--registry-referrers-mode=oci-1-1",
                "-a",
                &format!("dev.wmrender.bundle-version={version}"),
                reference,
            ],
        );
        assert_eq!(code(&s), 0, "cosign sign: {}", stderr(&s));
    };

    let v1 = f.render("v1", &keys, "api-int.one.example.com");
    f.first_contact(&v1);

    // A registry with the referrers API (named directly: no hosts.toml for it, so the agent asks it itself).
    let v2 = f.render("v2", &keys, "api-int.two.example.com");
    let v2_ref = f.publish_to(&oci.addr, &v2, &[]);
    sign_as_referrer("cosign.key", 2, &v2_ref);
    let digest = v2_ref.split_once('@').unwrap().1;
    let sig_tag = format!("https://{}/v2/fleet/windows-bundle/manifests/{}", oci.addr, signed_bundle::tag_for(digest));
    assert_eq!(support::registry::request(&f.scratch.ca, "GET", &sig_tag, "*/*", None).0, 404, "no .sig tag");
    let r = f.take(&v2_ref);
    assert!(r.message.contains(&format!("signed by {}", trusted[0].id)), "{}", r.message);
    f.holds(&v2);

    // A referrer signed by a key the node does not trust: refused, nothing changed; unsigned: refused so.
    let v3 = f.render("v3", &keys, "api-int.three.example.com");
    let v3_ref = f.publish_to(&oci.addr, &v3, &[]);
    let refused = |reference: &str, says: &str| {
        let before = f.files();
        f.want(reference);
        let r = f.pull();
        assert_eq!(r.outcome, PullOutcome::Refused, "{r:?}");
        assert!(r.message.contains(says), "{says}: {}", r.message);
        assert!(f.files() == before, "{reference} changed the node");
    };
    refused(&v3_ref, "is not signed (no signature under its sha256-<hex>.sig tag or among its OCI referrers)");
    sign_as_referrer("stranger.key", 3, &v3_ref);
    refused(&v3_ref, "no trusted key verifies any of its 1 signature(s)");

    // The tag's signatures refused (wmrender signed with a key the node does not trust, under the tag and as a
    // referrer), then a trusted referrer: all are judged together, each signature once.
    let (stranger_ci, _) = f.scratch.key("stranger-ci");
    let v5 = f.render("v5", &keys, "api-int.five.example.com");
    let v5_ref = f.publish_to(&oci.addr, &v5, &["--sign-key", stranger_ci.to_str().unwrap(), "--bundle-version", "5"]);
    refused(&v5_ref, "no trusted key verifies any of its 1 signature(s)");
    sign_as_referrer("cosign.key", 5, &v5_ref);
    f.take(&v5_ref);
    f.holds(&v5);

    // Debian's registry has no referrers API: cosign keeps the referrers in the tag schema's index
    // (`sha256-<hex>`), where the agent reads them, through the mirror the rendered hosts.toml names.
    let schema = |published: &str| {
        let digest = published.split_once('@').unwrap().1;
        let url = format!(
            "https://{}/v2/fleet/windows-bundle/manifests/{}",
            f.registry.addr,
            signed_bundle::referrers_tag_for(digest)
        );
        let (status, body) = support::registry::request(&f.scratch.ca, "GET", &url, INDEX_MEDIA_TYPE, Some(USER));
        assert_eq!(status, 200, "{url}: {}", String::from_utf8_lossy(&body));
        signed_bundle::signature_referrers(&body)
    };
    let delete = |digest: &str| {
        let url = format!("https://{}/v2/fleet/windows-bundle/manifests/{digest}", f.registry.addr);
        let (status, body) = support::registry::request(&f.scratch.ca, "DELETE", &url, "*/*", Some(USER));
        assert_eq!(status, 202, "{url}: {}", String::from_utf8_lossy(&body));
    };
    let v6 = f.render("v6", &keys, "api-int.six.example.com");
    let v6_published = f.publish(&v6, &[]);
    sign_as_referrer("stranger.key", 6, &v6_published);
    let stale = schema(&v6_published);
    assert_eq!(stale.len(), 1);
    sign_as_referrer("cosign.key", 6, &v6_published);
    assert_eq!(schema(&v6_published).len(), 2);
    // The stranger's referrer is deleted; the index, which clients keep, still lists it: passed over.
    delete(&stale[0]);
    let v6_ref = f.desired(&v6_published);
    f.take(&v6_ref);
    f.holds(&v6);
    let digest = v6_ref.split_once('@').unwrap().1;
    let asked = |path: &str| f.registry.requests().iter().any(|l| l.contains(path));
    assert!(asked(&format!("/referrers/{digest}")), "the referrers API was asked first");
    assert!(asked(&format!("/manifests/{}", signed_bundle::referrers_tag_for(digest))), "then its tag schema");

    // A bundle whose only referrer is gone: refused as unsigned, and the refusal says what could not be read.
    let v7 = f.render("v7", &keys, "api-int.seven.example.com");
    let v7_published = f.publish(&v7, &[]);
    sign_as_referrer("cosign.key", 7, &v7_published);
    let only = schema(&v7_published);
    delete(&only[0]);
    refused(&f.desired(&v7_published), &format!("not all read: the referrer {}", only[0]));
}

#[test]
fn a_registry_that_asks_for_a_token_is_pulled_from_with_the_token_its_realm_gives_for_the_nodes_credentials() {
    let (f, _controllers) = Fleet::start_with(Auth::Token(USER));
    let (ci, ci_public) = f.scratch.key("ci");
    let keys = [ci_public.as_path()];
    let v1 = f.render("v1", &keys, "api-int.one.example.com");
    f.first_contact(&v1);

    // CI publishes through the same token flow (a token for pull and push); the node pulls with one for pull.
    let v2 = f.render("v2", &keys, "api-int.two.example.com");
    let v2_ref = f.desired(&f.publish(&v2, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "2"]));
    let pull_grants = || {
        let scope = "scope \"repository:fleet/windows-bundle:pull\"";
        f.registry.token_log().iter().filter(|l| l.contains("granted: user \"fleet\"") && l.ends_with(scope)).count()
    };
    let before = pull_grants();
    f.take(&v2_ref);
    f.holds(&v2);
    assert_eq!(pull_grants(), before + 1, "one token for the pull: {:?}", f.registry.token_log());

    // Another pull asks for a token again (a token is kept for one pull only).
    let v3 = f.render("v3", &keys, "api-int.three.example.com");
    let v3_ref = f.desired(&f.publish(&v3, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "3"]));
    let before = pull_grants();
    f.want(&v3_ref);
    assert_eq!(f.pull().outcome, PullOutcome::Staged);
    assert_eq!(pull_grants(), before + 1, "{:?}", f.registry.token_log());

    // Credentials the realm refuses: tried again later (the pull says why), nothing changed.
    let m = f.manifest();
    let mirror_hosts = m
        .files
        .iter()
        .map(|e| f.node.join(e.path.relative_slash()))
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(&f.auth())))
        .expect("a hosts.toml with the mirror's credentials");
    let text = std::fs::read_to_string(&mirror_hosts).unwrap();
    let wrong = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("fleet:not-the-password"));
    std::fs::write(&mirror_hosts, text.replace(&f.auth(), &wrong)).unwrap();
    let v4 = f.render("v4", &keys, "api-int.four.example.com");
    let v4_ref = f.desired(&f.publish(&v4, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "4"]));
    let before = f.files();
    f.want(&v4_ref);
    let r = f.pull();
    assert_eq!(r.outcome, PullOutcome::Retrying, "{r:?}");
    assert!(r.message.contains("the token realm refused the node's credentials (401)"), "{}", r.message);
    assert!(f.files() == before, "a refused pull changed the node");
    assert!(
        f.registry.token_log().iter().any(|l| l.contains("refused: user \"fleet\"")),
        "{:?}",
        f.registry.token_log()
    );
}

/// A payload directory with these programs (node path under `C/`, content).
fn payload_dir(f: &Fleet, name: &str, programs: &[(&str, &str)]) -> PathBuf {
    let dir = f.scratch.path(name);
    for (path, bytes) in programs {
        std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
        std::fs::write(dir.join(path), bytes).unwrap();
    }
    dir
}

#[test]
fn a_signed_payload_is_pulled_verified_and_staged_for_the_pass_to_swap_in_and_every_bad_one_changes_nothing() {
    let (f, _controllers) = Fleet::start();
    let (ci, ci_public) = f.scratch.key("ci");
    let (stranger, _) = f.scratch.key("stranger");
    let v1 = f.render("v1", &[ci_public.as_path()], "api-int.one.example.com");
    f.first_contact(&v1);
    let folder = Folder(f.node.clone());
    let pull_payload = || wmrender_node::pull::payload::pull(&folder, None, &f.puller).expect("a desired payload");
    let want_payload = |reference: &str| {
        let patch = json!({"metadata": {"annotations": {DESIRED_PAYLOAD_ANNOTATION: reference}}});
        f.cp.admin().merge_patch("/api/v1/nodes/win-a", &patch).unwrap();
    };
    // No desired payload on the Node: nothing to pull.
    assert_eq!(wmrender_node::pull::payload::pull(&folder, None, &f.puller), None);

    // The node's kubelet and a new containerd; the agent's own executable rides along and is not pulled.
    let programs = [
        ("C/k/kubelet.exe", "MZ the payload's kubelet"),
        ("C/k/containerd/containerd.exe", "MZ containerd 1.7.27"),
        ("C/k/wmrender/wmrender-node.exe", "MZ an agent"),
    ];
    let same = payload_dir(&f, "payload-same", &programs);
    let same_ref = f.publish_payload(&same, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "1"]);
    want_payload(&same_ref);
    let before = f.files();
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");
    assert!(r.message.contains("1 of 3 programs fetched"), "only containerd is new: {}", r.message);
    assert!(r.message.contains("not pulled (sync delivers it)"), "{}", r.message);
    assert_eq!(r.on_node.as_deref(), Some(same_ref.as_str()));
    let after = f.files();
    assert_eq!(after["k/kubelet.exe"], before["k/kubelet.exe"], "the kubelet the node holds is not staged again");
    assert_eq!(after["k/containerd/containerd.exe.wmrender-staged"], b"MZ containerd 1.7.27");
    assert_eq!(after["k/wmrender/wmrender-node.exe"], b"MZ the agent", "the node's agent stays");
    assert!(!after.keys().any(|k| k.starts_with("k/wmrender/wmrender-node.exe.")), "{:?}", after.keys());

    let programs =
        [("C/k/kubelet.exe", "MZ kubelet v1.36.3"), ("C/k/containerd/containerd.exe", "MZ containerd 1.7.27")];
    let v2 = payload_dir(&f, "payload-v2", &programs);
    let v2_ref = f.publish_payload(&v2, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "2"]);
    want_payload(&v2_ref);
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");
    assert!(r.message.contains("1 of 2 programs fetched"), "{}", r.message);
    assert_eq!(std::fs::read(f.node.join("k/kubelet.exe.wmrender-staged")).unwrap(), b"MZ kubelet v1.36.3");
    assert_eq!(std::fs::read(f.node.join("k/kubelet.exe")).unwrap(), b"MZ the payload's kubelet", "the pass swaps");
    let m = f.manifest();
    assert!(m.pending.is_none() && !m.applied, "staged, to be applied by the pass: {m:?}");
    for (path, bytes) in programs {
        let np = NodePath::parse(&format!("C:\\{}", path[2..].replace('/', "\\"))).unwrap();
        let e = m.files.iter().find(|e| e.path == np).unwrap_or_else(|| panic!("{path} in {m:?}"));
        assert_eq!((e.kind, e.staged), (FileKind::Payload, true), "{e:?}");
        assert_eq!(e.sha256, wmrender_contract::sha256_hex(bytes.as_bytes()));
    }
    // The bundle and the credentials are as sync left them.
    assert_eq!(m.bundle_digest(), NodeManifest::parse(&before["k/wmrender/manifest.json"]).unwrap().bundle_digest());
    // Named again: current, nothing fetched.
    f.mirror.take();
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Current, "{r:?}");
    assert_eq!(f.mirror.take(), 0, "nothing asked of the registry");
    // Before the pass swapped kubelet in, another payload for it waits: the staged program is not overwritten.
    let v2b = payload_dir(&f, "payload-v2b", &[("C/k/kubelet.exe", "MZ kubelet v1.36.3 rebuilt")]);
    want_payload(&f.publish_payload(&v2b, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "3"]));
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Retrying, "{r:?}");
    assert!(r.message.contains("waits for the pass to swap it in"), "{}", r.message);
    assert_eq!(std::fs::read(f.node.join("k/kubelet.exe.wmrender-staged")).unwrap(), b"MZ kubelet v1.36.3");
    want_payload(&v2_ref);
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Current, "{r:?}");
    // The pass swaps the staged programs in (played here: the agent's pass does it, tests/wine_cluster.rs under Wine).
    let swap_in = || {
        for e in f.manifest().files.iter().filter(|e| e.staged) {
            let local = f.node.join(e.path.relative_slash());
            let name = format!("{}.wmrender-staged", local.file_name().unwrap().to_str().unwrap());
            if local.with_file_name(&name).exists() {
                std::fs::rename(local.with_file_name(&name), local).unwrap();
            }
        }
    };
    swap_in();

    // The pass converged: the Node says so, with the node's own credentials.
    let result = ApplyResult {
        status: ApplyStatus::Converged,
        node_name: "win-a".into(),
        bundle: m.bundle_digest(),
        payload: m.payload_digest(),
        agent: m.agent_digest(),
        payload_pull: Some(r.clone()),
        ..Default::default()
    };
    assert_eq!(wmrender_node::node_status::report(&f.node.join("k/kubeconfig"), &result), "reported");
    let n = f.cp.admin().get("/api/v1/nodes/win-a").unwrap();
    let c = n["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == PAYLOAD_PULL_CONDITION_TYPE);
    assert_eq!(c.map(|c| (c["status"].as_str(), c["reason"].as_str())), Some((Some("True"), Some("Pulled"))), "{n}");
    assert_eq!(n["metadata"]["annotations"][PULLED_PAYLOAD_ANNOTATION], v2_ref.as_str());
    // The agent it runs, which a pull never brings: the controller syncs a node whose agent is another.
    let agent = m.files.iter().find(|e| e.path.as_str() == r"C:\k\wmrender\wmrender-node.exe").expect("the agent");
    assert_eq!(n["metadata"]["annotations"][AGENT_ANNOTATION], agent.sha256.as_str(), "{n}");
    // Once a sync delivered another payload, the pulled one is no longer said to be on the node: the annotation
    // goes, and comes back with the payload.
    let synced_since = ApplyResult { payload_pull: Some(PullReport { on_node: None, ..r.clone() }), ..result.clone() };
    assert_eq!(wmrender_node::node_status::report(&f.node.join("k/kubeconfig"), &synced_since), "reported");
    let n = f.cp.admin().get("/api/v1/nodes/win-a").unwrap();
    assert!(n["metadata"]["annotations"].get(PULLED_PAYLOAD_ANNOTATION).is_none(), "{n}");
    assert_eq!(wmrender_node::node_status::report(&f.node.join("k/kubeconfig"), &result), "reported");
    let n = f.cp.admin().get("/api/v1/nodes/win-a").unwrap();
    assert_eq!(n["metadata"]["annotations"][PULLED_PAYLOAD_ANNOTATION], v2_ref.as_str());

    // Each bad payload is refused, with the node's files as they were.
    let at_rest = f.files();
    let refused = |reference: &str, why: &str| {
        want_payload(reference);
        let r = pull_payload();
        assert_eq!(r.outcome, PullOutcome::Refused, "{why}: {r:?}");
        assert!(r.message.contains(why), "{why}: {}", r.message);
        assert_eq!(r.on_node.as_deref(), Some(v2_ref.as_str()), "the payload on the node is still v2");
        assert!(f.files() == at_rest, "{why}: the node changed");
    };
    let v3 = payload_dir(&f, "payload-v3", &[("C/k/kubelet.exe", "MZ kubelet v1.37.0")]);
    refused(&f.publish_payload(&v3, &[]), "is not signed");
    refused(
        &f.publish_payload(&v3, &["--sign-key", stranger.to_str().unwrap(), "--bundle-version", "3"]),
        "no trusted key",
    );
    let v0 = payload_dir(&f, "payload-v0", &[("C/k/kubelet.exe", "MZ kubelet v1.35.0")]);
    refused(
        &f.publish_payload(&v0, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "1"]),
        "older than version 2",
    );
    // A payload may hold programs only: not a file of the bundle, nor kubelet's kubeconfig, which the node holds
    // without a manifest entry. Publish refuses them already, in CI (the node's own refusal of each is the agent's
    // unit tests').
    let bundle_file = std::fs::read_to_string(f.node.join("k/kubelet.conf")).unwrap();
    for (path, bytes, why) in [
        ("C/k/kubelet.conf", format!("{bundle_file}# changed"), "not a program"),
        ("C/k/kubeconfig", "apiVersion: v1\n".to_string(), "not a program"),
        ("C/k/wmrender/services.exe", "MZ".to_string(), "wmrender's own folder"),
    ] {
        let dir = payload_dir(&f, &format!("payload-{}", path.replace('/', "-")), &[(path, &bytes)]);
        assert_eq!(code(&wmrender(&["payload", "list", dir.to_str().unwrap()])), 0);
        let to = format!("{}/fleet/windows-payload:main", f.registry.addr);
        let r = wmrender(&["publish", "--payload", dir.to_str().unwrap(), "--to", &to]);
        assert_eq!(code(&r), 2, "{}", stderr(&r));
        assert!(stderr(&r).contains(&format!("{path} may not be in a published payload")), "{}", stderr(&r));
        assert!(stderr(&r).contains(why), "{}", stderr(&r));
    }
    // A bundle named as the payload: not a payload, whoever signed it.
    let bundle = f.publish(&v1, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "5"]);
    refused(&f.desired(&bundle), "other than a wmrender payload");
    // A program changed at rest in the registry, after another was fetched whole: nothing of either stays.
    let v4 = payload_dir(
        &f,
        "payload-v4",
        &[("C/k/csi-proxy.exe", "MZ csi-proxy"), ("C/k/kubelet.exe", "MZ kubelet v1.36.4")],
    );
    let v4_ref = f.publish_payload(&v4, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "6"]);
    let blob = f.registry.blob(&format!("sha256:{}", wmrender_contract::sha256_hex(b"MZ kubelet v1.36.4")));
    for (tampered, says) in [
        (&b"MZ kubelet v1.36.4 and more"[..], "served more than"),
        (b"MZ kubelet v1.36.4 ", "served more than"),
        (b"MZ kubelet v1.36.X", "served other"),
    ] {
        std::fs::write(&blob, tampered).unwrap();
        want_payload(&v4_ref);
        // An agent that has not seen it served wrong before (the next is held back: below).
        let r = wmrender_node::pull::payload::pull(&folder, None, &Puller::default()).expect("a desired payload");
        assert_eq!(r.outcome, PullOutcome::Refused, "{r:?}");
        assert!(r.message.contains("does not match its digest") && r.message.contains(says), "{}", r.message);
        assert!(f.files() == at_rest, "tampered: the node changed");
    }
    // The agent that saw it served wrong does not download it again at the next pass: the same refusal, said as
    // before, with the registry not asked for it (gone from the registry, it would be "cannot be fetched").
    let first = pull_payload();
    assert_eq!(first.outcome, PullOutcome::Refused, "{first:?}");
    std::fs::remove_file(&blob).unwrap();
    let again = pull_payload();
    assert_eq!((again.outcome, &again.message), (PullOutcome::Refused, &first.message), "held back");
    assert!(f.files() == at_rest, "held back: the node changed");
    let elsewhere = wmrender_node::pull::payload::pull(&folder, None, &Puller::default()).expect("a desired payload");
    assert_eq!(elsewhere.outcome, PullOutcome::Retrying, "an agent that restarted asks again: {elsewhere:?}");
    // A signed downgrade is taken.
    let v1_again =
        f.publish_payload(&same, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "1", "--downgrade"]);
    want_payload(&v1_again);
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");
    assert!(r.message.contains("a signed downgrade"), "{}", r.message);
    assert_eq!(std::fs::read(f.node.join("k/kubelet.exe.wmrender-staged")).unwrap(), b"MZ the payload's kubelet");
    // The floor is the downgrade's now: once swapped in, version 2 is taken again.
    swap_in();
    want_payload(&v2_ref);
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Staged, "{r:?}");

    // A link that drops in the middle of a large program: each pull takes up what the last one left (an HTTP range)
    // instead of starting over, and what it takes up is no verdict: a part changed on the node since is fetched
    // again whole, not refused as content other than its digest.
    swap_in();
    let big: Vec<u8> = (0..6u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let dir = f.scratch.path("payload-big");
    std::fs::create_dir_all(dir.join("C/k")).unwrap();
    std::fs::write(dir.join("C/k/kube-proxy.exe"), &big).unwrap();
    // An empty file is no program: publish refuses it in wmrender's words (the registry client cannot send it).
    std::fs::write(dir.join("C/k/empty.psm1"), b"").unwrap();
    assert_eq!(code(&wmrender(&["payload", "list", dir.to_str().unwrap()])), 0);
    let to = format!("{}/fleet/windows-payload:main", f.registry.addr);
    let r = wmrender(&["publish", "--payload", dir.to_str().unwrap(), "--to", &to]);
    assert_eq!(code(&r), 2, "{}", stderr(&r));
    assert!(stderr(&r).contains("C/k/empty.psm1 is empty"), "{}", stderr(&r));
    std::fs::remove_file(dir.join("C/k/empty.psm1")).unwrap();
    let big_ref = f.publish_payload(&dir, &["--sign-key", ci.to_str().unwrap(), "--bundle-version", "7"]);
    want_payload(&big_ref);
    let part = f.node.join("k/kube-proxy.exe.wmrender-pulling.wmrender-tmp");
    let length = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let budget = 2 << 20;
    f.mirror.cut_after(Some(budget));
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Retrying, "cut off: {r:?}");
    let first = length(&part);
    assert!(first > 0 && first < budget, "what arrived is kept: {first} bytes");
    f.mirror.cut_after(Some(budget));
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Retrying, "cut off again: {r:?}");
    let second = length(&part);
    assert!(second > budget && second < big.len() as u64, "taken up, not started over: {first} then {second} bytes");
    // A part is kept only while the Node names a payload that stages it (a kubelet cut off would otherwise hold
    // 120 MB of disk for good): the agent removes it when the Node names no payload, and when it names the one the
    // node runs.
    let kept = std::fs::read(&part).unwrap();
    let patch = json!({"metadata": {"annotations": {DESIRED_PAYLOAD_ANNOTATION: null}}});
    f.cp.admin().merge_patch("/api/v1/nodes/win-a", &patch).unwrap();
    assert_eq!(wmrender_node::pull::payload::pull(&folder, None, &f.puller), None);
    assert!(!part.exists(), "the part of a payload when the Node names none is still there");
    std::fs::write(&part, &kept).unwrap();
    want_payload(&big_ref);
    f.mirror.cut_after(Some(256 << 10));
    assert_eq!(pull_payload().outcome, PullOutcome::Retrying);
    assert!(length(&part) > kept.len() as u64, "kept and taken up while the Node names its payload");
    want_payload(&v2_ref);
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Current, "{r:?}");
    assert!(!part.exists(), "the part of a payload the Node no longer names is still there");
    // Named again, the part as the cut left it (changed below: then fetched whole).
    std::fs::write(&part, &kept).unwrap();
    want_payload(&big_ref);
    let mut changed = std::fs::read(&part).unwrap();
    changed[0] ^= 0xff;
    std::fs::write(&part, changed).unwrap();
    f.mirror.cut_after(None);
    f.mirror.take();
    let r = pull_payload();
    assert_eq!(r.outcome, PullOutcome::Staged, "the whole asked for again: {r:?}");
    assert!(std::fs::read(f.node.join("k/kube-proxy.exe.wmrender-staged")).unwrap() == big, "staged as published");
    assert!(!part.exists());
    assert!(f.mirror.take() > big.len() as u64, "fetched whole after the part taken up did not match");
}
