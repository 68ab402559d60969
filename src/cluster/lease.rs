//! Leader election through a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` package does it, so
//! that of several `wmrender controller` replicas exactly one acts at a time:
//!
//! - a replica holds the Lease while `spec.renewTime + spec.leaseDurationSeconds` is in the future and it is
//!   `spec.holderIdentity`; it renews well before that (every [`Lease::renew_every`]);
//! - another replica takes the Lease over only once the holder's term has run out (its process died, or lost the
//!   API server), raising `spec.leaseTransitions`;
//! - every write carries the resourceVersion read, so two replicas racing for it cannot both win: the loser's write
//!   is refused (409) and it stays a follower.
//!
//! Times are the API server's RFC 3339 micro-times; the clocks of the replicas are assumed to agree within a small
//! part of the lease duration, as client-go assumes.

use super::{API_TIMEOUT, Body, Cluster, ClusterError};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// One replica's view of one Lease.
#[derive(Clone, Debug)]
pub struct Lease {
    pub namespace: String,
    pub name: String,
    /// This replica (its pod's name, or host and process id).
    pub identity: String,
    /// How long a term lasts without a renewal.
    pub duration: Duration,
}

/// Who holds the Lease after an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// This replica: it may act until it next fails to renew.
    Me,
    /// Another replica (its identity; empty when it won a race for a Lease this replica saw missing).
    Other { identity: String },
}

impl Lease {
    /// Renewals come at a third of the term, so two can fail before it runs out.
    pub fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    fn path(&self) -> String {
        format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}", self.namespace, self.name)
    }

    fn collection(&self) -> String {
        format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", self.namespace)
    }

    /// Takes the Lease if it is free or its term has run out, or renews it if this replica holds it.
    pub async fn acquire_or_renew(&self, cluster: &Cluster) -> Result<Holder, ClusterError> {
        let deadline = Instant::now() + API_TIMEOUT;
        let now = Timestamp::now();
        let seconds = self.duration.as_secs().max(1);
        let Some(current) = cluster.get_until(&self.path(), deadline).await? else {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": { "name": self.name, "namespace": self.namespace },
                "spec": { "holderIdentity": self.identity, "leaseDurationSeconds": seconds,
                          "acquireTime": micro(now), "renewTime": micro(now), "leaseTransitions": 0 },
            });
            return match cluster.call(http::Method::POST, &self.collection(), Some(Body::json(&lease)), deadline).await
            {
                Ok(_) => Ok(Holder::Me),
                // Another replica created it first.
                Err(e) if e.is(409) => Ok(Holder::Other { identity: String::new() }),
                Err(e) => Err(cluster.failed(&http::Method::POST, &self.collection(), e)),
            };
        };
        let spec = &current["spec"];
        let holder = spec["holderIdentity"].as_str().unwrap_or("").to_string();
        let mine = holder == self.identity;
        if !mine && !holder.is_empty() && !expired(spec, now) {
            return Ok(Holder::Other { identity: holder });
        }
        let mut lease = current.clone();
        lease["spec"]["holderIdentity"] = self.identity.clone().into();
        lease["spec"]["leaseDurationSeconds"] = seconds.into();
        lease["spec"]["renewTime"] = micro(now).into();
        if !mine {
            lease["spec"]["acquireTime"] = micro(now).into();
            let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);
            lease["spec"]["leaseTransitions"] = (transitions + 1).into();
        }
        match cluster.call(http::Method::PUT, &self.path(), Some(Body::json(&lease)), deadline).await {
            Ok(_) => Ok(Holder::Me),
            // Someone wrote it since it was read: whoever did holds it now.
            Err(e) if e.is(409) => Ok(Holder::Other { identity: holder }),
            Err(e) => Err(cluster.failed(&http::Method::PUT, &self.path(), e)),
        }
    }

    /// Gives the Lease up (on a clean stop), so a successor need not wait for the term to run out: as client-go's
    /// `ReleaseOnCancel`, the holder is cleared and the duration set to one second. Only this replica's own Lease.
    /// A conflict (a renewal this replica sent just before it stopped, applied after the read) is read again, up to
    /// the API time-out.
    pub async fn release(&self, cluster: &Cluster) -> Result<(), ClusterError> {
        let deadline = Instant::now() + API_TIMEOUT;
        loop {
            let Some(mut lease) = cluster.get_until(&self.path(), deadline).await? else { return Ok(()) };
            if lease["spec"]["holderIdentity"].as_str() != Some(self.identity.as_str()) {
                return Ok(());
            }
            lease["spec"]["holderIdentity"] = Value::Null;
            lease["spec"]["leaseDurationSeconds"] = 1.into();
            match cluster.call(http::Method::PUT, &self.path(), Some(Body::json(&lease)), deadline).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is(409) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(cluster.failed(&http::Method::PUT, &self.path(), e)),
            }
        }
    }
}

/// A `MicroTime` as the API writes it.
fn micro(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Whether the term of the Lease's holder has run out at `now` (a Lease without a readable renew time or duration
/// has no term left).
fn expired(spec: &Value, now: Timestamp) -> bool {
    let renewed = spec["renewTime"].as_str().and_then(|t| t.parse::<Timestamp>().ok());
    let seconds = spec["leaseDurationSeconds"].as_i64();
    match (renewed, seconds) {
        (Some(r), Some(s)) => r.checked_add(SignedDuration::from_secs(s)).map(|end| end <= now).unwrap_or(true),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_runs_out_after_the_renew_time_and_duration() {
        let now: Timestamp = "2026-11-25T16:00:00Z".parse().unwrap();
        let spec = |renew: &str, secs: i64| json!({ "renewTime": renew, "leaseDurationSeconds": secs });
        assert!(!expired(&spec("2026-11-25T15:59:50.000000Z", 15), now));
        assert!(expired(&spec("2026-11-25T15:59:44.999999Z", 15), now));
        assert!(expired(&json!({ "leaseDurationSeconds": 15 }), now), "no renew time: free");
        assert!(expired(&json!({ "renewTime": "garbage", "leaseDurationSeconds": 15 }), now));
        assert_eq!(micro(now), "2026-11-25T16:00:00.000000Z");
    }
}
