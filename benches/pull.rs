//! The pull model at scale (docs/pull.md): N simulated agents, each a thread running the agent's own code (its watch
//! on its Node, `crates/node-agent/src/node_watch.rs`; its pull, `crates/node-agent/src/pull/`; its report,
//! `node_status.rs`) on a folder standing for its `C:\`, with its own node credentials (`system:node:<name>`, so
//! the Node authorizer and NodeRestriction apply), against the tests' real kube-apiserver and etcd and Debian's
//! `docker-registry` with TLS on 127.0.0.1, behind a byte-counting relay. Not Wine: what a pass does after staging
//! (services) is not part of it; the agents report converged once staged.
//!
//! For each N (default 100 and 1,000; `WMRENDER_BENCH_PULL_NODES=100,1000,…`):
//!
//! 1. **At rest**: every agent watching its Node, converged on v1. The API requests of all node users (the audit log)
//!    over a window (`WMRENDER_BENCH_WINDOW` seconds, default 60), per node per minute: the goal is ≤ 0.05. The
//!    kube-apiserver's resident memory before the agents started and with all N watching: the growth per node.
//! 2. **Rollout**: v2 (one file changed) published and signed; every Node pointed at it (as the controller or a user
//!    would); the time until 95% and 100% of the agents staged it and reported it on their Nodes, and the bytes the
//!    registry sent. Against it, in the same run: the time for the registry to serve N copies of the whole bundle
//!    (manifest and every blob, N clients at once through the same relay): the goal is 95% converged within 2× that.
//!
//! Run: `cargo bench --bench pull` (root, docker-registry, openssl and the kube assets of tests/setup.sh). Each wait
//! is bounded; a run that does not converge fails.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use support::apiserver::ControlPlane;
use support::registry::{Registry, Relay, Scratch};
use support::{code, stderr, wmrender};
use wmrender_contract::node_status::DESIRED_BUNDLE_ANNOTATION;
use wmrender_contract::{ApplyResult, ApplyStatus, FileKind, NodeFile, NodeManifest, NodePath, PullOutcome};
use wmrender_node::node_watch::NodeWatch;
use wmrender_node::system::Folder;

const CONVERGE_LIMIT: Duration = Duration::from_secs(600);

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Many watches and connections: more file descriptors than the default 1,024 (the API server inherits them).
fn raise_fd_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max.min(1 << 20);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// `examples/aws` with the bundle's keys, `host` changing one node file.
fn render(scratch: &Scratch, name: &str, key: &Path, host: &str) -> PathBuf {
    let text = std::fs::read_to_string(support::root().join("examples/aws/wmrender.yaml")).unwrap();
    let text =
        support::registry::with_pull(&text.replace("api-int.prod-east.example.com", host), "mirror.invalid", &[key]);
    std::fs::write(scratch.path(&format!("{name}.yaml")), text).unwrap();
    let out = scratch.path(name);
    let r = wmrender(&[
        "render",
        "-f",
        scratch.path(&format!("{name}.yaml")).to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    out
}

fn publish(scratch: &Scratch, registry: &Registry, rendered: &Path, key: &Path, version: &str) -> String {
    let to = format!("{}/fleet/windows-bundle:main", registry.addr);
    let ca = scratch.ca.pem();
    let r = wmrender(&[
        "publish",
        "--rendered",
        rendered.to_str().unwrap(),
        "--to",
        &to,
        "--registry-ca",
        ca.to_str().unwrap(),
        "--sign-key",
        key.to_str().unwrap(),
        "--bundle-version",
        version,
    ]);
    assert_eq!(code(&r), 0, "{}", stderr(&r));
    String::from_utf8_lossy(&r.stdout).trim().to_string()
}

/// A node's folder as sync leaves it: the rendered bundle with its manifest, its kubeconfig, the registry's CA and
/// its name.
fn lay_out(root: &Path, rendered: &Path, kubeconfig: &Path, ca: &Path, name: &str, pulled: &str) {
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(rendered.join("node")).into_iter().map(|e| e.unwrap()) {
        if !e.file_type().is_file() {
            continue;
        }
        let rel = e.path().strip_prefix(rendered).unwrap().display().to_string();
        let np = NodePath::from_bundle_path(&rel).unwrap();
        let local = root.join(np.relative_slash());
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        let bytes = std::fs::read(e.path()).unwrap();
        std::fs::write(&local, &bytes).unwrap();
        let sha256 = wmrender_contract::sha256_hex(&bytes);
        files.push(NodeFile { path: np, sha256, size: bytes.len() as u64, kind: FileKind::Bundle, staged: false });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = NodeManifest { wmrender: "0.1.0".into(), files, pending: None, applied: true };
    std::fs::write(root.join("k/wmrender/manifest.json"), manifest.to_json()).unwrap();
    std::fs::copy(kubeconfig, root.join("k/kubeconfig")).unwrap();
    std::fs::copy(ca, root.join("k/ca-bundle.crt")).unwrap();
    std::fs::write(root.join("k/wmrender/applied.json"), json!({"nodeName": name}).to_string()).unwrap();
    // v1 came by pull already: the agent's record of it.
    let state = wmrender_node::pull::PulledState {
        reference: pulled.into(),
        version: 1,
        bundle: manifest.bundle_digest(),
        ..Default::default()
    };
    std::fs::write(root.join("k/wmrender/pulled.json"), serde_json::to_vec(&state).unwrap()).unwrap();
}

struct Outcome {
    rest_per_node_minute: f64,
    rss_growth_per_node_kib: f64,
    to_95: Duration,
    to_all: Duration,
    serve_copies: Duration,
    registry_bytes_per_node: f64,
}

fn run(n: usize, window: Duration) -> Outcome {
    let scratch = Scratch::new();
    let cp = ControlPlane::start();
    let registry = Registry::start(&scratch.path("registry"), &scratch.ca, None);
    let relay = Relay::start(&registry.addr);
    let (key, public) = scratch.key("ci");
    let v1 = render(&scratch, "v1", &public, "api-int.one.example.com");
    let v2 = render(&scratch, "v2", &public, "api-int.two.example.com");
    let v1_ref = publish(&scratch, &registry, &v1, &key, "1");
    let through_relay =
        |published: &str| format!("{}/fleet/windows-bundle@{}", relay.addr, published.split_once('@').unwrap().1);
    let v1_ref = through_relay(&v1_ref);

    // The Nodes, each agent's credentials and folder.
    let admin = cp.admin();
    let names: Vec<String> = (0..n).map(|i| format!("win-{i:05}")).collect();
    for name in &names {
        admin
            .create(
                "/api/v1/nodes",
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                        "annotations": {DESIRED_BUNDLE_ANNOTATION: v1_ref}}}),
            )
            .unwrap();
    }
    for name in &names {
        let root = scratch.path(&format!("nodes/{name}"));
        let kubeconfig = scratch.path(&format!("kubeconfigs/{name}"));
        std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
        cp.write_kubeconfig(&kubeconfig, &format!("system:node:{name}"), &["system:nodes"]);
        lay_out(&root, &v1, &kubeconfig, &scratch.ca.pem(), name, &v1_ref);
    }
    let pid = cp.apiserver_pid();
    let rss_before = rss_kib(pid);

    // The agents: a watch each, a pass when it wakes them (or every 2 minutes, as the service).
    let stop = Arc::new(AtomicBool::new(false));
    let staged_at: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::new()));
    let watching = Arc::new(AtomicUsize::new(0));
    let converged_v1 = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for name in &names {
        let root = scratch.path(&format!("nodes/{name}"));
        let (stop, staged_at, watching, converged_v1) =
            (stop.clone(), staged_at.clone(), watching.clone(), converged_v1.clone());
        let name = name.clone();
        threads.push(std::thread::spawn(move || {
            let folder = Folder(root.clone());
            let (wake, woken) = mpsc::channel::<()>();
            let watch = NodeWatch::of_node(&folder, move || {
                let _ = wake.send(());
            });
            // The registry client each agent's service keeps from pull to pull.
            let puller = wmrender_node::pull::Puller::default();
            let mut counted = false;
            while !stop.load(Ordering::SeqCst) {
                let _ = woken.recv_timeout(Duration::from_secs(120));
                let node = watch.node();
                if node.is_some() && !counted {
                    counted = true;
                    watching.fetch_add(1, Ordering::SeqCst);
                }
                let Some(pull) = wmrender_node::pull::pull(&folder, node.as_ref(), &puller) else { continue };
                let manifest =
                    NodeManifest::parse(&std::fs::read(root.join("k/wmrender/manifest.json")).unwrap()).unwrap();
                let result = ApplyResult {
                    status: ApplyStatus::Converged,
                    node_name: name.clone(),
                    bundle: manifest.bundle_digest(),
                    pull: Some(pull.clone()),
                    ..Default::default()
                };
                let said = wmrender_node::node_status::report_on(&root.join("k/kubeconfig"), &result, node.as_ref());
                match pull.outcome {
                    PullOutcome::Staged if said == "reported" => staged_at.lock().unwrap().push(Instant::now()),
                    PullOutcome::Current if said == "reported" => {
                        converged_v1.fetch_add(1, Ordering::SeqCst);
                    }
                    _ => {}
                }
            }
        }));
    }
    let deadline = Instant::now() + CONVERGE_LIMIT;
    while watching.load(Ordering::SeqCst) < n || converged_v1.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < deadline, "{} of {n} agents watching and converged", watching.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(200));
    }
    // At rest: the first pull of v1 is "current" (already on the node); settle, then count.
    std::thread::sleep(Duration::from_secs(3));
    let is_node = |user: &str| user.starts_with("system:node:");
    let before = cp.audit().iter().filter(|a| is_node(&a.user)).count();
    std::thread::sleep(window);
    let during = cp.audit().iter().filter(|a| is_node(&a.user)).count() - before;
    let rest_per_node_minute = during as f64 / n as f64 / (window.as_secs_f64() / 60.0);
    let rss_watching = rss_kib(pid);

    // Rollout: v2 published, every Node pointed at it.
    let v2_ref = through_relay(&publish(&scratch, &registry, &v2, &key, "2"));
    relay.take();
    let started = Instant::now();
    for name in &names {
        admin
            .merge_patch(
                &format!("/api/v1/nodes/{name}"),
                &json!({"metadata": {"annotations": {DESIRED_BUNDLE_ANNOTATION: v2_ref}}}),
            )
            .unwrap();
    }
    let want_95 = (n * 95).div_ceil(100);
    let mut to_95 = None;
    loop {
        let done = staged_at.lock().unwrap().len();
        if to_95.is_none() && done >= want_95 {
            to_95 = Some(started.elapsed());
        }
        if done >= n {
            break;
        }
        assert!(started.elapsed() < CONVERGE_LIMIT, "{done} of {n} staged v2");
        std::thread::sleep(Duration::from_millis(50));
    }
    let to_all = started.elapsed();
    let registry_bytes = relay.take();
    stop.store(true, Ordering::SeqCst);

    // The baseline: N clients fetching the whole bundle at once through the same relay.
    let manifest_url =
        format!("https://{}/v2/fleet/windows-bundle/manifests/{}", relay.addr, v2_ref.split_once('@').unwrap().1);
    let manifest = std::fs::read(registry.blob(v2_ref.split_once('@').unwrap().1)).unwrap();
    let m: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    let blobs: Vec<String> = m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&m["config"]])
        .map(|l| format!("https://{}/v2/fleet/windows-bundle/blobs/{}", relay.addr, l["digest"].as_str().unwrap()))
        .collect();
    let tls = support::registry::trusting(&std::fs::read(scratch.ca.pem()).unwrap());
    let started = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let (tls, manifest_url, blobs) = (tls.clone(), manifest_url.clone(), blobs.clone());
            std::thread::spawn(move || {
                let agent = ureq::Agent::config_builder().tls_config(tls).build().new_agent();
                let accept = "application/vnd.oci.image.manifest.v1+json";
                agent.get(&manifest_url).header("Accept", accept).call().unwrap().body_mut().read_to_vec().unwrap();
                for b in &blobs {
                    agent.get(b).call().unwrap().body_mut().read_to_vec().unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let serve_copies = started.elapsed();
    drop(threads);
    Outcome {
        rest_per_node_minute,
        rss_growth_per_node_kib: (rss_watching.saturating_sub(rss_before)) as f64 / n as f64,
        to_95: to_95.unwrap(),
        to_all,
        serve_copies,
        registry_bytes_per_node: registry_bytes as f64 / n as f64,
    }
}

fn main() {
    raise_fd_limit();
    let sizes: Vec<usize> = std::env::var("WMRENDER_BENCH_PULL_NODES")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let window =
        Duration::from_secs(std::env::var("WMRENDER_BENCH_WINDOW").ok().and_then(|v| v.parse().ok()).unwrap_or(60));
    println!("pull model: N agents watching their Nodes and pulling a one-file change (docs/pull.md)");
    println!(
        "{:>6} {:>14} {:>16} {:>12} {:>12} {:>14} {:>8} {:>14}",
        "N", "at rest /n/min", "apiserver KiB/n", "95% staged", "all staged", "N copies", "ratio", "registry B/n"
    );
    for n in sizes {
        let o = run(n, window);
        println!(
            "{:>6} {:>14.4} {:>16.1} {:>11.2}s {:>11.2}s {:>13.2}s {:>7.2}× {:>14.0}",
            n,
            o.rest_per_node_minute,
            o.rss_growth_per_node_kib,
            o.to_95.as_secs_f64(),
            o.to_all.as_secs_f64(),
            o.serve_copies.as_secs_f64(),
            o.to_95.as_secs_f64() / o.serve_copies.as_secs_f64(),
            o.registry_bytes_per_node,
        );
    }
}
