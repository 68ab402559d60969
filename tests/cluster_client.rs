//! wmrender's cluster client (src/cluster) against a real kube-apiserver (tests/support/apiserver.rs), as the user
//! holding exactly the `wmrender-import` role docs/without-operator.md lists: `import --kubeconfig` reads what
//! `import --from-dir` reads and only reads, naming itself in every request's User-Agent; an unusable kubeconfig is
//! exit 2; an unreachable or refusing API server is exit 3.
#![cfg(feature = "cluster")]

mod support;

use std::path::Path;
use support::apiserver::{ControlPlane, WMRENDER_USER};
use support::{code, root, stderr, wmrender};

/// The AWS dump of fixtures/import, created in the cluster as the cluster's operators would hold it.
fn seeded() -> ControlPlane {
    let cp = ControlPlane::start();
    let dump = root().join("fixtures/import/aws");
    let mut files: Vec<_> = std::fs::read_dir(&dump).unwrap().map(|f| f.unwrap().path()).collect();
    files.sort();
    for f in files {
        let doc: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let items = match doc["items"].as_array() {
            Some(items) => items.clone(),
            None => vec![doc],
        };
        for item in items {
            cp.admin().seed(&item);
        }
    }
    cp
}

/// The public key import needs (no cluster object holds it), written beside `out`.
fn public_key(out: &Path) -> std::path::PathBuf {
    let key = out.with_extension("pub");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp ops\n")
        .unwrap();
    key
}

fn import(kubeconfig: &Path, out: &Path) -> std::process::Output {
    let key = public_key(out);
    wmrender(&[
        "import",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--image",
        "ami-0123456789abcdef0",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ])
}

#[test]
fn import_from_the_cluster_equals_import_from_the_dump_and_only_reads() {
    let cp = seeded();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    cp.wmrender_kubeconfig(&kubeconfig, "wmrender-import");
    let live = tmp.path().join("live/wmrender.yaml");
    let o = import(&kubeconfig, &live);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let dumped = tmp.path().join("dumped/wmrender.yaml");
    let dump = root().join("fixtures/import/aws");
    let key = public_key(&dumped);
    let o = wmrender(&[
        "import",
        "--from-dir",
        dump.to_str().unwrap(),
        "--image",
        "ami-0123456789abcdef0",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "-o",
        dumped.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // The first two lines name the source.
    let body = |p: &Path| std::fs::read_to_string(p).unwrap().lines().skip(2).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&live), body(&dumped));
    // The API server's audit log: reads only, all allowed by the documented role, each naming wmrender.
    let log = cp.requests_by(WMRENDER_USER);
    assert!(log.len() >= 7, "{log:?}");
    assert!(log.iter().all(|r| matches!(r.verb.as_str(), "get" | "list")), "read-only: {log:?}");
    assert!(log.iter().all(|r| r.code == 200 || r.code == 404), "every read allowed: {log:?}");
    let agent = format!("wmrender/{} (", env!("CARGO_PKG_VERSION"));
    assert!(log.iter().all(|r| r.user_agent.starts_with(&agent)), "the User-Agent names wmrender: {log:?}");
}

#[test]
fn an_unusable_kubeconfig_is_exit_2_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("wmrender.yaml");
    let missing = tmp.path().join("no-such-kubeconfig");
    let o = import(&missing, &out);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("no-such-kubeconfig"), "{}", stderr(&o));
    let garbage = tmp.path().join("garbage");
    std::fs::write(&garbage, "clusters: [this is not a kubeconfig\n").unwrap();
    let o = import(&garbage, &out);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("garbage"), "{}", stderr(&o));
    let no_context = tmp.path().join("no-context");
    std::fs::write(&no_context, "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n").unwrap();
    let o = import(&no_context, &out);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn a_refused_connection_a_stranger_or_a_user_without_the_role_is_exit_3() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("wmrender.yaml");
    let kubeconfig = tmp.path().join("kubeconfig");
    let port = {
        let cp = ControlPlane::start();
        cp.wmrender_kubeconfig(&kubeconfig, "wmrender-import");
        cp.port
    };
    // The server is gone; its port refuses (nothing else binds it in this short window on 127.0.0.1).
    let o = import(&kubeconfig, &out);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("could not be reached"), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("127.0.0.1:{port}")), "{}", stderr(&o));

    // A certificate of another CA: not authenticated (401).
    let cp = seeded();
    let other = ControlPlane::start();
    let stranger = other.credentials("wmrender-ops", &[]);
    std::fs::write(&kubeconfig, support::apiserver::kubeconfig_text(&cp.url, &cp.path("ca.crt"), &stranger)).unwrap();
    let o = import(&kubeconfig, &out);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("401"), "{}", stderr(&o));
    // Authenticated, but without the role: forbidden (403), named.
    cp.write_kubeconfig(&kubeconfig, "someone-else", &[]);
    let o = import(&kubeconfig, &out);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("403") && stderr(&o).contains("infrastructures"), "{}", stderr(&o));
    assert!(!out.exists());
}
