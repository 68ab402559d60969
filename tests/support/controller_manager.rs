//! The real kube-controller-manager beside the tests' kube-apiserver (built from `k8s.io/kubernetes` at the same
//! release by tests/apiserver/build.sh), running only the controllers a test asks for, as a cluster runs it: its own
//! identity (`system:kube-controller-manager`, a client certificate of the rig's CA) and each controller as its own
//! ServiceAccount in `kube-system` with the API server's bootstrap roles (`--use-service-account-credentials`),
//! signing with the cluster's CA, no leader election (one instance), no serving port. Stopped when dropped.
//!
//! What it replaces of tests/support/played.rs: the CSR signer (`csrsigning`: signs approved kubelet client and
//! serving CSRs, and, unlike a played one, fails those that do not satisfy the signer's rules), the token controller
//! (fills a `kubernetes.io/service-account-token` Secret with a legacy token the API server accepts) and the node
//! lifecycle controller's `not-ready` taint. The Deployment and ReplicaSet controllers, with the real kube-scheduler
//! (tests/support/scheduler.rs), make and place the pods of a rendered Deployment.

use super::apiserver::{ControlPlane, assets, spawn};
use std::process::Child;
use std::time::{Duration, Instant};

/// kube-controller-manager's names for the controllers the tests run (`--controllers`).
pub const CSR_SIGNING: &str = "certificatesigningrequest-signing-controller";
pub const SERVICE_ACCOUNT_TOKEN: &str = "serviceaccount-token-controller";
pub const NODE_LIFECYCLE: &str = "node-lifecycle-controller";
pub const DEPLOYMENT: &str = "deployment-controller";
pub const REPLICA_SET: &str = "replicaset-controller";
/// Publishes the cluster's CA as the `kube-root-ca.crt` ConfigMap of every namespace (what a pod's service account
/// volume reads).
pub const ROOT_CA_PUBLISHER: &str = "root-ca-certificate-publisher-controller";

/// How long kube-controller-manager may take to start its controllers (about a second on an idle machine).
const START_LIMIT: Duration = Duration::from_secs(60);

pub struct ControllerManager {
    child: Child,
    log: std::path::PathBuf,
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ControllerManager {
    /// Starts the named controllers and returns once kube-controller-manager says it is starting each.
    pub fn start(cp: &ControlPlane, controllers: &[&str]) -> ControllerManager {
        let p = |name: &str| cp.path(name).to_string_lossy().into_owned();
        let kubeconfig = cp.path("kube-controller-manager.kubeconfig");
        cp.write_kubeconfig(&kubeconfig, "system:kube-controller-manager", &[]);
        let n = std::fs::read_dir(cp.dir.path()).map(|d| d.count()).unwrap_or(0);
        let log = cp.path(&format!("kube-controller-manager-{n}.log"));
        let args: Vec<String> = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--authentication-kubeconfig={}", kubeconfig.display()),
            format!("--authorization-kubeconfig={}", kubeconfig.display()),
            "--use-service-account-credentials=true".into(),
            format!("--controllers={}", controllers.join(",")),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            format!("--cluster-signing-cert-file={}", p("ca.crt")),
            format!("--cluster-signing-key-file={}", p("ca.key")),
            format!("--service-account-private-key-file={}", p("sa.key")),
            format!("--root-ca-file={}", p("ca.crt")),
            // The tests' kubelets post their status when a test says, not every 10 s: a Node is not declared
            // unreachable (and its pods evicted) while a test runs. The not-ready taint follows the Ready condition.
            "--node-monitor-grace-period=1h".into(),
            "--node-startup-grace-period=1h".into(),
            "--node-monitor-period=1s".into(),
            "-v=2".into(),
        ];
        let child = spawn(&assets().join("kube-controller-manager"), &args, &log);
        let mut kcm = ControllerManager { child, log };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let text = std::fs::read_to_string(&kcm.log).unwrap_or_default();
            if controllers.iter().all(|c| started(&text, c)) {
                return kcm;
            }
            let exited = kcm.child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "kube-controller-manager did not start {controllers:?} within {START_LIMIT:?} ({exited:?}):\n{}",
                super::apiserver::tail(&text, 40)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Whether the log says the controller is starting (`"Controller starting..." controller="<name>"`: it has reached
/// the API server and starts its informers, which sync within moments; the tests' own waits are bounded anyway).
fn started(log: &str, controller: &str) -> bool {
    let name = format!("controller=\"{controller}\"");
    log.lines().any(|l| l.contains("\"Controller starting...\"") && l.contains(&name))
}
