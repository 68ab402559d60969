//! The real kube-scheduler beside the tests' kube-apiserver (built from `k8s.io/kubernetes` at the same release by
//! tests/apiserver/build.sh), as a cluster runs it: its own identity (`system:kube-scheduler`, a client certificate
//! of the rig's CA, bound by the API server's bootstrap roles), no leader election (one instance), no serving port.
//! It binds the pods the tests' controllers create to the Nodes they fit (resources, taints, selectors). Stopped when
//! dropped.

use super::apiserver::{ControlPlane, assets, spawn, tail};
use std::process::Child;
use std::time::{Duration, Instant};

const START_LIMIT: Duration = Duration::from_secs(60);

pub struct Scheduler {
    child: Child,
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Scheduler {
    /// Starts it and returns once it says it has started scheduling.
    pub fn start(cp: &ControlPlane) -> Scheduler {
        let kubeconfig = cp.path("kube-scheduler.kubeconfig");
        cp.write_kubeconfig(&kubeconfig, "system:kube-scheduler", &[]);
        let log = cp.path("kube-scheduler.log");
        let args: Vec<String> = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--authentication-kubeconfig={}", kubeconfig.display()),
            format!("--authorization-kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "-v=2".into(),
        ];
        let mut scheduler = Scheduler { child: spawn(&assets().join("kube-scheduler"), &args, &log) };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("\"Starting Kubernetes Scheduler\"") {
                return scheduler;
            }
            let exited = scheduler.child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "kube-scheduler did not start within {START_LIMIT:?} ({exited:?}):\n{}",
                tail(&text, 40)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
