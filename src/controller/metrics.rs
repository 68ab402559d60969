//! What the controller exposes on `--metrics-address`: Prometheus metrics (`GET /metrics`, the text exposition
//! format 0.0.4) and the probes of its Deployment (`GET /healthz`: the process answers; `GET /readyz`: its first
//! view of the cluster is complete and, on the leader, the desired state reads), over HTTPS ([`super::tls`]) or,
//! when asked for, plain HTTP. A small HTTP/1.1 responder: one request per connection, bounded reads.

use super::tls::Tls;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// The controller's numbers, shared by its tasks.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    leader: bool,
    ready: bool,
    /// Why the desired state cannot be read (the leader's last pass), which makes the replica not ready.
    blocked: Option<String>,
    /// Windows hosts by state (`configured`, `not-configured`, `no-node`, `tainted`, `failing`, `refused`,
    /// `waiting`, `leaving`), as of the last reconcile.
    nodes: BTreeMap<String, u64>,
    reconciles: u64,
    reconcile_seconds: f64,
    /// Steps taken by kind (`sync`, `untaint`, `taint`, `prune`, `approve`) and result (`ok`, `error`).
    steps: BTreeMap<(String, String), u64>,
}

impl Metrics {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn set_leader(&self, leader: bool) {
        self.with(|m| m.leader = leader);
    }

    pub fn set_ready(&self) {
        self.with(|m| m.ready = true);
    }

    /// Whether the replica is ready, and if not why.
    pub fn ready(&self) -> Result<(), String> {
        self.with(|m| match (&m.blocked, m.ready) {
            (_, false) => Err("the first view of the cluster is not complete".to_string()),
            (Some(why), true) => Err(format!("the desired state cannot be read: {why}")),
            (None, true) => Ok(()),
        })
    }

    /// The desired state read (`None`), or why not.
    pub fn set_blocked(&self, why: Option<String>) {
        self.with(|m| m.blocked = why);
    }

    /// The states of every instance after a reconcile that took `took`.
    pub fn reconciled(&self, states: &BTreeMap<String, u64>, took: Duration) {
        self.with(|m| {
            m.nodes = states.clone();
            m.reconciles += 1;
            m.reconcile_seconds += took.as_secs_f64();
        });
    }

    pub fn step(&self, kind: &str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.with(|m| *m.steps.entry((kind.to_string(), result.to_string())).or_default() += 1);
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        self.with(|m| {
            let mut out = String::new();
            let _ = writeln!(out, "# HELP wmrender_controller_leader Whether this replica holds the Lease.");
            let _ = writeln!(out, "# TYPE wmrender_controller_leader gauge");
            let _ = writeln!(out, "wmrender_controller_leader {}", u8::from(m.leader));
            let _ =
                writeln!(out, "# HELP wmrender_controller_nodes Windows instances by state, at the last reconcile.");
            let _ = writeln!(out, "# TYPE wmrender_controller_nodes gauge");
            for (state, n) in &m.nodes {
                let _ = writeln!(out, "wmrender_controller_nodes{{state=\"{state}\"}} {n}");
            }
            let _ = writeln!(
                out,
                "# HELP wmrender_controller_desired_state_valid Whether the desired state (render, inventory, Machines) \
                 read whole at the last reconcile; while it does not, nothing is done."
            );
            let _ = writeln!(out, "# TYPE wmrender_controller_desired_state_valid gauge");
            let _ = writeln!(out, "wmrender_controller_desired_state_valid {}", u8::from(m.blocked.is_none()));
            let _ = writeln!(out, "# HELP wmrender_controller_reconcile_seconds Time spent deciding and acting.");
            let _ = writeln!(out, "# TYPE wmrender_controller_reconcile_seconds summary");
            let _ = writeln!(out, "wmrender_controller_reconcile_seconds_sum {}", m.reconcile_seconds);
            let _ = writeln!(out, "wmrender_controller_reconcile_seconds_count {}", m.reconciles);
            let _ = writeln!(out, "# HELP wmrender_controller_steps_total Steps taken, by kind and result.");
            let _ = writeln!(out, "# TYPE wmrender_controller_steps_total counter");
            for ((kind, result), n) in &m.steps {
                let _ = writeln!(out, "wmrender_controller_steps_total{{step=\"{kind}\",result=\"{result}\"}} {n}");
            }
            out
        })
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until the task is dropped: over TLS with `tls` (each
/// connection with the certificate and profile loaded last), else plain HTTP (`--metrics-plain-http`).
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, tls: Option<Arc<Tls>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let metrics = metrics.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => respond(stream, &metrics).await,
                Some(tls) => {
                    let acceptor = tls.acceptor();
                    // A client that refuses the profile's versions or ciphers ends here, at the handshake.
                    if let Ok(Ok(stream)) = tokio::time::timeout(IO_TIMEOUT, acceptor.accept(stream)).await {
                        respond(stream, &metrics).await;
                    }
                }
            }
        });
    }
}

/// How long a client may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One request, one answer, then the connection is closed.
async fn respond<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, metrics: &Metrics) {
    let mut buf = vec![0u8; 4096];
    let read = tokio::time::timeout(IO_TIMEOUT, stream.read(&mut buf)).await;
    let Ok(Ok(n)) = read else { return };
    let request = String::from_utf8_lossy(&buf[..n]);
    let path = request.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = match path {
        "/metrics" => ("200 OK", metrics.render()),
        "/healthz" => ("200 OK", "ok\n".to_string()),
        "/readyz" => match metrics.ready() {
            Ok(()) => ("200 OK", "ok\n".to_string()),
            Err(why) => ("503 Service Unavailable", format!("{}\n", why.replace('\n', " "))),
        },
        _ => ("404 Not Found", "not found\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(IO_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_state_and_step() {
        let m = Metrics::default();
        m.set_leader(true);
        m.reconciled(&[("configured".to_string(), 3), ("no-node".to_string(), 1)].into(), Duration::from_millis(250));
        m.step("sync", true);
        m.step("sync", false);
        let text = m.render();
        for line in [
            "wmrender_controller_leader 1",
            "wmrender_controller_nodes{state=\"configured\"} 3",
            "wmrender_controller_nodes{state=\"no-node\"} 1",
            "wmrender_controller_reconcile_seconds_count 1",
            "wmrender_controller_steps_total{step=\"sync\",result=\"error\"} 1",
            "wmrender_controller_desired_state_valid 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        m.set_ready();
        m.set_blocked(Some("nodes.yaml:3:5: expected a list".into()));
        assert!(m.render().lines().any(|l| l == "wmrender_controller_desired_state_valid 0"));
        assert!(m.ready().unwrap_err().contains("nodes.yaml:3:5"));
    }
}
