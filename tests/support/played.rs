//! The controllers of a cluster that do not run beside the tests' kube-apiserver, played by the tests — here and
//! nowhere else. Each does what the real one does, through the API as the real one's identity where that matters,
//! and never puts an object in a state the real one cannot. (kube-controller-manager's CSR signer, token controller
//! and node lifecycle controller are real: tests/support/controller_manager.rs.)
//!
//! - **kubelet** ([`Kubelet`]): the TLS bootstrap (client CSR as the bootstrap token's user, the signed certificate, a
//!   kubeconfig of its own), the Node registered as `system:node:<name>` with the taints of its configuration, its
//!   status (addresses, boot ID, Ready), the serving CSR, and the end of evicted pods (a pod deleted with a grace
//!   period stays until its kubelet confirms). Its Node's addresses are the host's own, in a network namespace the test
//!   makes (tests/support/netns.rs), never 127.0.0.0/8: a real kubelet refuses a loopback node IP ("nodeIP can't be
//!   loopback address": no addresses, no serving CSR). No Linux kubelet can stand in for a Windows node's where
//!   wmrender must see a Windows Node: it sets its Node's `kubernetes.io/os` back to `linux` at every status update
//!   (kubelet_node_status.go), even over `--node-labels`.
//! - **the Machine API** ([`MachineApi`]): a Machine goes `Provisioning` → `Provisioned` with the instance's
//!   addresses; its nodelink controller sets `status.nodeRef` only once a Node registered that matches it (provider
//!   ID, then internal IP), and the phase becomes `Running`.
//! - **kube-proxy**, for the pods a real kubelet runs (tests/support/kubelet.rs): the one NAT rule it writes for a
//!   Service with one endpoint ([`kube_proxy_rule`]), for the `kubernetes` Service. The real kube-proxy would send
//!   the pods to that Service's endpoint, the API server's 127.0.0.1, which a pod's packets cannot reach in the node's
//!   namespace (dropped as martians without `route_localnet`, and nothing of the API server's listens there).
//! - **the disruption controller** ([`pdb_status`]): a PodDisruptionBudget's status, which the eviction API reads.
//! - **the service CA operator** ([`ServiceCa`], openshift/service-ca-operator's serving-cert controller): for a
//!   Service annotated `service.beta.openshift.io/serving-cert-secret-name`, a `kubernetes.io/tls` Secret of that
//!   name in its namespace, owned by the Service, with a certificate for `<service>.<namespace>.svc` (and
//!   `.svc.cluster.local`; a headless Service's also for `*.` below both) signed by the service CA, the CA after it in
//!   `tls.crt`; the Service is annotated with its signer. A Secret of that name that is not the Service's is left
//!   alone (the Service gets the error annotation instead), as the real controller does.

use super::apiserver::{ControlPlane, Kube};
use super::controller_manager::{ControllerManager, SERVICE_ACCOUNT_TOKEN};
use super::{openssl, request};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
const TICK: Duration = Duration::from_millis(100);

/// A background loop that stops when dropped.
pub struct Loop {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Loop {
    fn start(mut tick: impl FnMut() + Send + 'static) -> Loop {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                tick();
                std::thread::sleep(TICK);
            }
        });
        Loop { stop, thread: Some(thread) }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The items of a list as a controller's informer sees them: an API server that does not answer this round (a busy
/// machine) gives nothing to do now, and the loop tries again at its next tick, as a real controller requeues.
fn items(client: &Kube, path: &str) -> Vec<Value> {
    client.try_get(path).ok().and_then(|l| l["items"].as_array().cloned()).unwrap_or_default()
}

fn approved(csr: &Value) -> bool {
    csr["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Approved"))
}

/// OpenShift's `node-bootstrapper` ServiceAccount, bound to `system:node-bootstrapper`, and its token Secret as the
/// MCO creates it, filled by the real token controller. Returns the token. (Only the objects are OpenShift's part
/// here; nothing of it is played.)
pub fn bootstrap_token(cp: &ControlPlane) -> String {
    let admin = cp.admin();
    let ns = "openshift-machine-config-operator";
    let _ = admin.create(
        &format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        &json!({"metadata": {"name": "node-bootstrapper"}}),
    );
    admin.apply(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "system:node-bootstrapper-wmrender-rig",
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:node-bootstrapper-wmrender-rig"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
            "subjects": [{"kind": "ServiceAccount", "name": "node-bootstrapper", "namespace": ns}],
        }),
    );
    admin.apply(
        &format!("/api/v1/namespaces/{ns}/secrets"),
        "node-bootstrapper-token",
        &json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "node-bootstrapper-token",
                         "annotations": {"kubernetes.io/service-account.name": "node-bootstrapper"}},
        }),
    );
    // kube-controller-manager's token controller fills it (a legacy token, as OpenShift's is); it need not run
    // after that: the API server checks the token against the Secret and the ServiceAccount.
    let _token_controller = ControllerManager::start(cp, &[SERVICE_ACCOUNT_TOKEN]);
    let path = format!("/api/v1/namespaces/{ns}/secrets/node-bootstrapper-token");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let secret = admin.get(&path).expect("the node-bootstrapper-token Secret");
        if let Some(token) = secret["data"]["token"].as_str().and_then(|t| STANDARD.decode(t).ok()) {
            return String::from_utf8(token).expect("a token is text");
        }
        assert!(Instant::now() < deadline, "the token controller did not fill {path} within 60 s:\n{secret}");
        std::thread::sleep(TICK);
    }
}

/// A kubeconfig for the API server with a bearer token (what the bootstrap kubeconfig is), as a kubeconfig file.
pub fn token_kubeconfig(cp: &ControlPlane, token: &str, path: &Path) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\n",
            cp.url,
            cp.path("ca.crt").display()
        ),
    )
    .expect("kubeconfig");
}

/// One node's kubelet.
pub struct Kubelet {
    pub name: String,
    /// The node's credentials after the TLS bootstrap: a kubeconfig with its client certificate (key and
    /// certificate in `pki/`), written where kubelet writes it.
    pub kubeconfig: PathBuf,
    pub client: Kube,
}

/// What a kubelet registers its Node with.
#[derive(Clone, Debug, Default)]
pub struct Registration {
    pub addresses: Vec<(String, String)>,
    pub taints: Vec<Value>,
    pub provider_id: Option<String>,
    pub boot_id: String,
}

impl Kubelet {
    /// kubelet's TLS bootstrap with the bootstrap token: a key and a client CSR (`O=system:nodes,
    /// CN=system:node:<name>`), posted as the token's user; waits (up to `limit`) for it to be approved and signed,
    /// then writes the node's kubeconfig into `dir` (its `kubeconfig`, and `pki/`).
    pub fn bootstrap(
        cp: &ControlPlane,
        token: &str,
        name: &str,
        dir: &Path,
        limit: Duration,
    ) -> Result<Kubelet, String> {
        std::fs::create_dir_all(dir.join("pki")).expect("pki folder");
        let bootstrap = dir.join("bootstrap-kubeconfig.rig");
        token_kubeconfig(cp, token, &bootstrap);
        let as_bootstrapper = Kube::new(&bootstrap);
        let key = dir.join("pki/kubelet-client.key");
        let subject = format!("/O=system:nodes/CN=system:node:{name}");
        let request = request(&key, &subject, "");
        // A retry after an earlier attempt timed out posts a new CSR for the new key, as kubelet does (its CSRs
        // are named by the API server; these carry a count so that the tests can name the first).
        let mut attempt = 1;
        let csr_name = loop {
            let csr_name =
                if attempt == 1 { format!("csr-client-{name}") } else { format!("csr-client-{name}-{attempt}") };
            match as_bootstrapper.create(
                CSRS,
                &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                        "metadata": {"name": csr_name},
                        "spec": {"request": STANDARD.encode(&request), "signerName": CLIENT_SIGNER,
                                 "usages": ["digital signature", "client auth"]}}),
            ) {
                Ok(_) => break csr_name,
                Err(e) if e.code == 409 && attempt < 20 => attempt += 1,
                Err(e) => return Err(format!("the client CSR: {e}")),
            }
        };
        let cert = wait_certificate(&as_bootstrapper, &csr_name, limit)?;
        let cert_file = dir.join("pki/kubelet-client-current.pem");
        std::fs::write(&cert_file, cert).expect("certificate");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            super::apiserver::kubeconfig_text(
                &cp.url,
                &cp.path("ca.crt"),
                &super::apiserver::Credentials { cert: cert_file, key },
            ),
        )
        .expect("kubeconfig");
        let client = Kube::new(&kubeconfig);
        Ok(Kubelet { name: name.to_string(), kubeconfig, client })
    }

    /// Registers the Node as kubelet does (as `system:node:<name>`), with its status, and asks for its serving
    /// certificate (waits up to `limit` for it).
    pub fn register(&self, reg: &Registration, limit: Duration) -> Result<(), String> {
        let mut spec = json!({ "taints": reg.taints });
        if let Some(id) = &reg.provider_id {
            spec["providerID"] = id.clone().into();
        }
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {"kubernetes.io/os": "windows", "kubernetes.io/hostname": self.name}},
            "spec": spec,
        });
        match self.client.create("/api/v1/nodes", &node) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(format!("registering the Node: {e}")),
        }
        self.report_status(reg, true)?;
        let key = self.kubeconfig.with_file_name("pki/kubelet-server.key");
        let san: Vec<String> = reg
            .addresses
            .iter()
            .map(|(t, a)| if t == "InternalIP" || t == "ExternalIP" { format!("IP:{a}") } else { format!("DNS:{a}") })
            .collect();
        let request = request(&key, &format!("/O=system:nodes/CN=system:node:{}", self.name), &san.join(","));
        let csr_name = format!("csr-serving-{}-{}", self.name, reg.boot_id);
        match self.client.create(
            CSRS,
            &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                    "metadata": {"name": csr_name},
                    "spec": {"request": STANDARD.encode(&request), "signerName": SERVING_SIGNER,
                             "usages": ["digital signature", "server auth"]}}),
        ) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(format!("the serving CSR: {e}")),
        }
        wait_certificate(&self.client, &csr_name, limit).map(|_| ())
    }

    /// Node status as kubelet posts it: addresses, node info with the boot ID, and the Ready condition.
    pub fn report_status(&self, reg: &Registration, ready: bool) -> Result<(), String> {
        let now = now();
        let addresses: Vec<Value> = reg.addresses.iter().map(|(t, a)| json!({"type": t, "address": a})).collect();
        let status = json!({
            "addresses": addresses,
            "nodeInfo": {"bootID": reg.boot_id, "machineID": "", "systemUUID": "", "kernelVersion": "10.0.20348",
                         "osImage": "Windows Server 2022 Datacenter", "containerRuntimeVersion": "containerd://1.7",
                         "kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "operatingSystem": "windows",
                         "architecture": "amd64"},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
                            "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now}],
        });
        self.client
            .strategic_patch(&format!("/api/v1/nodes/{}/status", self.name), &json!({"status": status}))
            .map(|_| ())
            .map_err(|e| format!("posting the Node's status: {e}"))
    }

    /// Ends the pods of this node that are being deleted (a pod deleted with a grace period stays until its
    /// kubelet confirms), as kubelet does once their containers stopped; runs until dropped.
    pub fn finish_terminating(&self) -> Loop {
        let client = Kube::new(&self.kubeconfig);
        let name = self.name.clone();
        Loop::start(move || finish_terminating_once(&client, &name))
    }
}

/// One round of [`Kubelet::finish_terminating`], with the client of the node's kubelet.
pub fn finish_terminating_once(kubelet: &Kube, node: &str) {
    for pod in items(kubelet, &format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")) {
        if pod["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let (ns, name) =
            (pod["metadata"]["namespace"].as_str().unwrap_or(""), pod["metadata"]["name"].as_str().unwrap_or(""));
        let _ = kubelet.delete_with(
            &format!("/api/v1/namespaces/{ns}/pods/{name}"),
            &json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                    "preconditions": {"uid": pod["metadata"]["uid"]}}),
        );
    }
}

fn wait_certificate(client: &Kube, csr: &str, limit: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(c) = client.try_get(&format!("{CSRS}/{csr}"))
            && let Some(cert) = c["status"]["certificate"].as_str()
        {
            return STANDARD.decode(cert).map_err(|e| e.to_string());
        }
        if Instant::now() >= deadline {
            return Err(format!("CSR {csr} was not approved and signed within {limit:?}"));
        }
        std::thread::sleep(TICK);
    }
}

/// `2026-11-25T15:04:05Z`, now.
pub fn now() -> String {
    wmrender_node::log::utc_now()
}

/// The Machine API for Windows Machines: creates a Machine as the MachineSet controller does and provisions it
/// (the machine controller: `Provisioning`, then `Provisioned` with the instance's provider ID and addresses); its
/// nodelink loop, running until dropped, sets `status.nodeRef` and phase `Running` once a matching Node registered.
pub struct MachineApi {
    _nodelink: Loop,
}

pub const MACHINES: &str = "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines";

impl MachineApi {
    pub fn start(cp: &ControlPlane) -> MachineApi {
        let admin = Kube::new(&cp.path("admin.kubeconfig"));
        MachineApi { _nodelink: Loop::start(move || nodelink_once(&admin)) }
    }

    /// A Windows Machine whose instance is provisioned at `addresses`.
    pub fn provision(admin: &Kube, name: &str, provider_id: &str, addresses: &[(&str, &str)]) {
        let machine = json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "openshift-machine-api",
                         "labels": {"machine.openshift.io/os-id": "Windows"}},
            "spec": {"providerID": provider_id},
        });
        admin.create(MACHINES, &machine).expect("Machine created");
        let path = format!("{MACHINES}/{name}");
        admin.set_status(&path, &json!({"phase": "Provisioning"}));
        let addresses: Vec<Value> = addresses.iter().map(|(t, a)| json!({"type": t, "address": a})).collect();
        admin.set_status(&path, &json!({"phase": "Provisioned", "addresses": addresses}));
    }
}

/// One round of the nodelink controller: each Machine without a nodeRef gets the one Node that matches it.
pub fn nodelink_once(admin: &Kube) {
    let nodes = items(admin, "/api/v1/nodes");
    for m in items(admin, MACHINES) {
        if !m["status"]["nodeRef"].is_null() {
            continue;
        }
        let id = m["spec"]["providerID"].as_str();
        let by_id: Vec<&Value> =
            nodes.iter().filter(|n| id.is_some() && n["spec"]["providerID"].as_str() == id).collect();
        let ips: Vec<&str> = m["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["type"] == "InternalIP")
            .filter_map(|a| a["address"].as_str())
            .collect();
        let by_ip: Vec<&Value> = nodes
            .iter()
            .filter(|n| {
                n["status"]["addresses"]
                    .as_array()
                    .and_then(|l| l.iter().find(|a| a["type"] == "InternalIP"))
                    .and_then(|a| a["address"].as_str())
                    .is_some_and(|ip| ips.contains(&ip))
            })
            .collect();
        let node = match (by_id.as_slice(), by_ip.as_slice()) {
            ([one], _) => *one,
            ([], [one]) => *one,
            _ => continue,
        };
        let name = m["metadata"]["name"].as_str().unwrap_or("");
        let mut status = m["status"].clone();
        status["nodeRef"] = json!({"kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]});
        status["phase"] = "Running".into();
        let _ = admin.merge_patch(&format!("{MACHINES}/{name}/status"), &json!({"status": status}));
    }
}

/// The disruption controller's status of PodDisruptionBudget `ns/name`: `allowed` disruptions now.
pub fn pdb_status(admin: &Kube, ns: &str, name: &str, allowed: i64, healthy: i64) {
    let path = format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}");
    let pdb = admin.get(&path).expect("the PodDisruptionBudget");
    admin.set_status(
        &path,
        &json!({"observedGeneration": pdb["metadata"]["generation"], "disruptionsAllowed": allowed,
                "currentHealthy": healthy, "desiredHealthy": healthy - allowed, "expectedPods": healthy}),
    );
}

/// Signs a PKCS#10 request with the CA, keeping its subject and subject alternative names.
fn sign_request(work: &Path, ca: &Path, key: &Path, name: &str, request: &[u8], usage: &str) -> Vec<u8> {
    let csr = work.join(format!("{name}.csr"));
    let ext = work.join(format!("{name}.ext"));
    std::fs::write(&csr, request).expect("csr");
    // The SANs of the request, copied as the signer does.
    let text = String::from_utf8(openssl(&["req", "-in", csr.to_str().unwrap(), "-noout", "-text"])).unwrap();
    let san = text
        .lines()
        .skip_while(|l| !l.contains("Subject Alternative Name"))
        .nth(1)
        .map(|l| l.trim().replace("IP Address:", "IP:"))
        .unwrap_or_default();
    let mut extensions = format!("extendedKeyUsage={usage}\nkeyUsage=digitalSignature,keyEncipherment\n");
    if !san.is_empty() {
        extensions.push_str(&format!("subjectAltName={san}\n"));
    }
    std::fs::write(&ext, extensions).expect("extensions");
    openssl(&[
        "x509",
        "-req",
        "-in",
        csr.to_str().unwrap(),
        "-CA",
        ca.to_str().unwrap(),
        "-CAkey",
        key.to_str().unwrap(),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        ext.to_str().unwrap(),
    ])
}

/// The annotation that asks the service CA for a serving certificate, and those the operator answers with.
pub const SERVING_CERT_SECRET: &str = "service.beta.openshift.io/serving-cert-secret-name";
const SERVING_CERT_SIGNED_BY: &str = "service.beta.openshift.io/serving-cert-signed-by";
const SERVING_CERT_ERROR: &str = "service.beta.openshift.io/serving-cert-generation-error";
const ORIGINATING_SERVICE_NAME: &str = "service.beta.openshift.io/originating-service-name";
const ORIGINATING_SERVICE_UID: &str = "service.beta.openshift.io/originating-service-uid";
const SERVICE_CA_SIGNER: &str = "openshift-service-serving-signer@1700000000";

/// The service CA operator's serving-cert controller, running until dropped.
pub struct ServiceCa {
    _loop: Loop,
    /// The service CA's certificate (PEM): what a client of such a service trusts.
    pub ca_pem: String,
}

impl ServiceCa {
    pub fn start(cp: &ControlPlane) -> ServiceCa {
        let admin = Kube::new(&cp.path("admin.kubeconfig"));
        let work = cp.path("service-ca");
        std::fs::create_dir_all(&work).expect("service CA folder");
        let (ca, key) = (work.join("ca.crt"), work.join("ca.key"));
        super::self_signed_p256(&key, &ca, "/CN=openshift-service-serving-signer@1700000000", 2);
        let ca_pem = std::fs::read_to_string(&ca).expect("service CA");
        let chain_ca = ca_pem.clone();
        let lp = Loop::start(move || {
            for svc in items(&admin, "/api/v1/services") {
                let Some(secret) = svc["metadata"]["annotations"][SERVING_CERT_SECRET].as_str() else { continue };
                let (ns, name, uid) = (
                    svc["metadata"]["namespace"].as_str().unwrap_or(""),
                    svc["metadata"]["name"].as_str().unwrap_or(""),
                    svc["metadata"]["uid"].as_str().unwrap_or(""),
                );
                let path = format!("/api/v1/namespaces/{ns}/secrets/{secret}");
                let existing = match admin.try_get(&path) {
                    Ok(s) => Some(s),
                    Err(e) if e.code == 404 => None,
                    // No answer this round: the next tick tries again.
                    Err(_) => continue,
                };
                if let Some(existing) = existing {
                    if existing["metadata"]["annotations"][ORIGINATING_SERVICE_UID] != uid {
                        let _ = admin.merge_patch(
                            &format!("/api/v1/namespaces/{ns}/services/{name}"),
                            &json!({"metadata": {"annotations": {SERVING_CERT_ERROR:
                                format!("secret/{secret} references serviceUID {}, which does not match {uid}",
                                        existing["metadata"]["annotations"][ORIGINATING_SERVICE_UID])}}}),
                        );
                    }
                    continue;
                }
                let mut sans = vec![format!("DNS:{name}.{ns}.svc"), format!("DNS:{name}.{ns}.svc.cluster.local")];
                if svc["spec"]["clusterIP"] == "None" {
                    sans.push(format!("DNS:*.{name}.{ns}.svc"));
                    sans.push(format!("DNS:*.{name}.{ns}.svc.cluster.local"));
                }
                let key_file = work.join(format!("{ns}-{name}.key"));
                let request = request(&key_file, &format!("/CN={name}.{ns}.svc"), &sans.join(","));
                let cert = sign_request(&work, &ca, &key, &format!("{ns}-{name}"), &request, "serverAuth");
                let mut chain = String::from_utf8(cert).expect("PEM");
                chain.push_str(&chain_ca);
                let tls_key = std::fs::read(&key_file).expect("the serving key");
                let body = json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": secret, "namespace": ns,
                                 "annotations": {ORIGINATING_SERVICE_NAME: name, ORIGINATING_SERVICE_UID: uid,
                                                 "service.beta.openshift.io/expiry": "2099-01-01T00:00:00Z"},
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": uid}]},
                    "data": {"tls.crt": STANDARD.encode(chain), "tls.key": STANDARD.encode(tls_key)},
                });
                if admin.create(&format!("/api/v1/namespaces/{ns}/secrets"), &body).is_ok() {
                    let _ = admin.merge_patch(
                        &format!("/api/v1/namespaces/{ns}/services/{name}"),
                        &json!({"metadata": {"annotations": {SERVING_CERT_SIGNED_BY: SERVICE_CA_SIGNER}}}),
                    );
                }
            }
        });
        ServiceCa { _loop: lp, ca_pem }
    }
}

/// Approves every pending CSR as the cluster's admin would, until `done` returns.
pub fn approving<T>(admin: &Kube, done: impl FnOnce() -> T + Send) -> T
where
    T: Send,
{
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let out = done();
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            out
        });
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for csr in admin.list(CSRS) {
                if csr["status"]["conditions"].is_null() {
                    let name = csr["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let mut body = csr.clone();
                    body["status"]["conditions"] =
                        json!([{"type": "Approved", "status": "True", "reason": "Test", "message": "by the test"}]);
                    let _ = admin.put(&format!("{CSRS}/{name}/approval"), &body);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        worker.join().unwrap()
    })
}

/// A node that joined as kubelet joins: its client certificate from the TLS bootstrap (the CSRs approved by the
/// admin), its Node registered with the address given and the wmrender taint.
pub fn joined(cp: &ControlPlane, token: &str, name: &str, ip: &str) -> Kubelet {
    let dir = cp.path(&format!("node-{name}"));
    let kubelet = approving(cp.admin(), || Kubelet::bootstrap(cp, token, name, &dir, Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let reg = Registration {
        addresses: vec![("InternalIP".into(), ip.into()), ("Hostname".into(), name.into())],
        taints: vec![
            json!({"key": wmrender_contract::node_status::TAINT_KEY, "effect": wmrender_contract::node_status::TAINT_EFFECT}),
        ],
        provider_id: None,
        boot_id: "boot-1".into(),
    };
    approving(cp.admin(), || kubelet.register(&reg, Duration::from_secs(30))).unwrap();
    kubelet
}

/// kube-proxy's rule for a Service with one endpoint, in the node's namespace `ns`: its pods' connections to the
/// Service's ClusterIP and port (`service`) go to `target` here, through a forwarder on the node's address.
pub fn kube_proxy_rule(
    ns: &super::netns::NetNs,
    service: std::net::SocketAddr,
    target: std::net::SocketAddr,
) -> super::netns::Forwarder {
    let forwarder = ns.forward(&format!("{}:0", ns.node), target);
    let to = format!("{}:{}", ns.node, forwarder.port);
    let o = std::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name))
        .args(["--", "iptables", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "-d"])
        .arg(service.ip().to_string())
        .args(["--dport", &service.port().to_string(), "-j", "DNAT", "--to-destination", &to])
        .output()
        .expect("iptables (bash tests/setup.sh)");
    assert!(o.status.success(), "iptables: {}", String::from_utf8_lossy(&o.stderr));
    forwarder
}
