//! Leader election through a Lease (src/cluster/lease.rs) against a real kube-apiserver: one holder at a time, a
//! renewal keeps it, a successor takes over only once the holder's term ran out (or it released the Lease, even
//! with one of its own renewals still on the wire), and two replicas racing for a free Lease cannot both win.
#![cfg(feature = "cluster")]

mod support;

use std::time::Duration;
use support::apiserver::ControlPlane;
use wmrender::cluster::Cluster;
use wmrender::cluster::lease::{Holder, Lease};

/// The Lease the replicas elect through, as the API serves it.
const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/wmrender/leases/wmrender-controller";

fn lease(identity: &str, secs: u64) -> Lease {
    Lease {
        namespace: "wmrender".into(),
        name: "wmrender-controller".into(),
        identity: identity.into(),
        duration: Duration::from_secs(secs),
    }
}

/// The API server with the namespace `wmrender`, and a kubeconfig for the replicas holding the documented
/// `wmrender-controller` role alone (the Lease rules among it).
fn control_plane() -> (ControlPlane, std::path::PathBuf) {
    let cp = ControlPlane::start();
    cp.namespace("wmrender");
    let kubeconfig = cp.path("leader.kubeconfig");
    cp.wmrender_kubeconfig(&kubeconfig, "wmrender-controller");
    (cp, kubeconfig)
}

#[test]
fn one_replica_holds_the_lease_until_its_term_runs_out_or_it_lets_go() {
    let (cp, kubeconfig) = control_plane();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let cluster = Cluster::connect(&kubeconfig).await.unwrap();
        let (a, b) = (lease("replica-a", 3), lease("replica-b", 3));
        // Two replicas race for the free Lease: exactly one wins.
        let (ra, rb) = tokio::join!(a.acquire_or_renew(&cluster), b.acquire_or_renew(&cluster));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!((ra == Holder::Me) ^ (rb == Holder::Me), "{ra:?} {rb:?}");
        let (leader, follower) = if ra == Holder::Me { (a, b) } else { (b, a) };
        // The leader renews; the follower sees it held.
        for _ in 0..3 {
            tokio::time::sleep(leader.renew_every()).await;
            assert_eq!(leader.acquire_or_renew(&cluster).await.unwrap(), Holder::Me);
            assert_eq!(
                follower.acquire_or_renew(&cluster).await.unwrap(),
                Holder::Other { identity: leader.identity.clone() }
            );
        }
        // The leader stops renewing (killed): once its term runs out the follower takes over.
        tokio::time::sleep(Duration::from_millis(3200)).await;
        assert_eq!(follower.acquire_or_renew(&cluster).await.unwrap(), Holder::Me);
        assert_eq!(
            leader.acquire_or_renew(&cluster).await.unwrap(),
            Holder::Other { identity: follower.identity.clone() }
        );
        // A clean stop lets go at once.
        follower.release(&cluster).await.unwrap();
        assert_eq!(leader.acquire_or_renew(&cluster).await.unwrap(), Holder::Me);
    });
    let lease = cp.admin().get(LEASE_PATH).unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 2, "{lease}");
}

/// A replica that stops while one of its own renewals is still on the wire: the renewal may land between the
/// release's read and its write (the release is refused with a conflict and must read again), or after the release
/// (then it is refused, carrying the old resourceVersion). Either way the Lease ends free. Raced many times, so the
/// orders the API server can apply the four requests in all come up.
#[test]
fn a_release_racing_the_holders_own_renewal_still_lets_go() {
    let (cp, kubeconfig) = control_plane();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cluster = runtime.block_on(Cluster::connect(&kubeconfig)).unwrap();
    let leader = lease("replica-a", 15);
    for round in 0..40 {
        assert_eq!(runtime.block_on(leader.acquire_or_renew(&cluster)).unwrap(), Holder::Me, "round {round}");
        let before = cp.admin().get(LEASE_PATH).unwrap()["spec"]["leaseTransitions"].as_i64();
        let (renewed, released) =
            runtime.block_on(async { tokio::join!(leader.acquire_or_renew(&cluster), leader.release(&cluster)) });
        released.unwrap();
        renewed.unwrap();
        let lease = cp.admin().get(LEASE_PATH).unwrap();
        let spec = &lease["spec"];
        // The one order that leaves it held: the renewal read the Lease after the release had freed it, which makes
        // it a new term (a stopping replica never starts a renewal after its release).
        let new_term = spec["leaseTransitions"].as_i64() == before.map(|t| t + 1);
        assert!(spec["holderIdentity"].is_null() || new_term, "round {round}: still held: {lease}");
    }
}
