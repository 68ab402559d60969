//! The one way wmrender talks to an API server. Every request:
//!
//! - names wmrender in its `User-Agent` (`wmrender/VERSION (OS/ARCH)`, as client-go's programs name themselves), so
//!   an API server's audit log says who sent it;
//! - is bounded: by the deadline of the step it belongs to (the drain's `--drain-timeout`, the CSR wait's
//!   `--csr-timeout`, the reboot's `--reboot-timeout`), or else by [`API_TIMEOUT`], its retries included;
//! - is retried by wmrender alone (kube-rs's own retry layer is off: it would retry a 429 fifteen times past any
//!   time-out the user gave), when the answer is transient — 429 Too Many Requests, 503 or 504 until the deadline,
//!   no answer at all (a refused or dropped connection) [`NO_ANSWER_ATTEMPTS`] times — after 0.5 s, then 1 s, 2 s,
//!   4 s and 5 s between tries (the server's `Retry-After` lengthens a pause up to 5 s), never past the deadline.
//!   Any other answer is final.

use super::ClusterError;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The bound on one API request and its retries when the step it belongs to has no time-out of its own.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause before the first retry; it doubles up to [`BACKOFF_MAX`].
pub const BACKOFF_FIRST: Duration = Duration::from_millis(500);
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Tries of a request that gets no answer: enough for an API server restarting behind its load balancer, few
/// enough that a wrong or dead address fails in seconds.
pub const NO_ANSWER_ATTEMPTS: u32 = 3;

/// `wmrender/0.1.0 (linux/x86_64)`.
pub fn user_agent() -> String {
    format!("wmrender/{} ({}/{})", env!("CARGO_PKG_VERSION"), std::env::consts::OS, std::env::consts::ARCH)
}

/// A client for the cluster a kubeconfig names (its current context).
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    /// The API server's URL, for messages.
    pub server: String,
}

/// Why one call did not succeed.
#[derive(Clone, Debug)]
pub enum CallError {
    /// The API server answered with an error status.
    Status { code: u16, reason: String, message: String },
    /// No answer before the deadline, or none at all (refused, reset, TLS): the text says which.
    NoAnswer(String),
}

impl CallError {
    /// Whether the API server answered `code`.
    pub fn is(&self, code: u16) -> bool {
        matches!(self, CallError::Status { code: c, .. } if *c == code)
    }

    fn transient(&self) -> bool {
        match self {
            CallError::Status { code, .. } => matches!(code, 429 | 503 | 504),
            CallError::NoAnswer(_) => true,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status { code, reason, message } => {
                write!(f, "the API server answered {code} {reason}: {message}")
            }
            CallError::NoAnswer(why) => write!(f, "the API server could not be reached: {why}"),
        }
    }
}

/// A request body: JSON with its content type (`application/json`, `application/merge-patch+json`, …).
pub struct Body<'a> {
    pub content_type: &'a str,
    pub json: &'a Value,
}

impl<'a> Body<'a> {
    pub fn json(json: &'a Value) -> Body<'a> {
        Body { content_type: "application/json", json }
    }

    pub fn merge_patch(json: &'a Value) -> Body<'a> {
        Body { content_type: "application/merge-patch+json", json }
    }
}

impl Cluster {
    pub async fn connect(kubeconfig: &Path) -> Result<Cluster, ClusterError> {
        let bad = |why: String| ClusterError::Kubeconfig { path: kubeconfig.to_path_buf(), why };
        let file = Kubeconfig::read_from(kubeconfig).map_err(|e| bad(format!("cannot be read: {e}")))?;
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| bad(format!("cannot be used: {e}")))?;
        Cluster::with_config(config, bad)
    }

    /// From inside a pod: its ServiceAccount's token and the cluster's CA, as every in-cluster client.
    pub fn in_cluster() -> Result<Cluster, ClusterError> {
        let path = std::path::PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount");
        let bad = |why: String| ClusterError::Kubeconfig { path: path.clone(), why };
        let config = kube::Config::incluster()
            .map_err(|e| bad(format!("there is no in-cluster configuration ({e}): give --kubeconfig outside a pod")))?;
        Cluster::with_config(config, bad)
    }

    fn with_config(mut config: kube::Config, bad: impl Fn(String) -> ClusterError) -> Result<Cluster, ClusterError> {
        config.default_retry = false;
        // Each call is bounded by its deadline (below); these only keep one attempt from outliving a short one.
        config.connect_timeout = Some(API_TIMEOUT);
        config.read_timeout = None;
        let agent = http::HeaderValue::from_str(&user_agent()).map_err(|e| bad(e.to_string()))?;
        config.headers.push((http::header::USER_AGENT, agent));
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(|e| bad(format!("cannot make a client from it: {e}")))?;
        Ok(Cluster { client, server })
    }

    /// The kube-rs client, for the watches of `kube::runtime` (they resume from a resource version and list again
    /// on 410 Gone); it carries the same User-Agent and has no retries of its own.
    pub fn kube_client(&self) -> kube::Client {
        self.client.clone()
    }

    /// `VERB https://server/path`, for messages.
    pub fn what(&self, method: &http::Method, path: &str) -> String {
        format!("{method} {}{path}", self.server.trim_end_matches('/'))
    }

    /// One call, retried while the answer is transient, until `deadline`.
    pub async fn call(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Body<'_>>,
        deadline: Instant,
    ) -> Result<Value, CallError> {
        let bytes = body.as_ref().map(|b| serde_json::to_vec(b.json).unwrap_or_default());
        let mut pause = BACKOFF_FIRST;
        let mut unanswered = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.once(&method, path, body.as_ref().map(|b| b.content_type), &bytes, left).await {
                Ok(v) => return Ok(v),
                Err((e, _)) if !e.transient() => return Err(e),
                Err((e, retry_after)) => {
                    if matches!(e, CallError::NoAnswer(_)) {
                        unanswered += 1;
                        if unanswered >= NO_ANSWER_ATTEMPTS {
                            return Err(e);
                        }
                    }
                    let wait = pause.max(retry_after.unwrap_or_default()).min(BACKOFF_MAX);
                    if Instant::now() + wait >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                    pause = (pause * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// One attempt, bounded by `limit`; on failure also the server's `Retry-After`.
    async fn once(
        &self,
        method: &http::Method,
        path: &str,
        content_type: Option<&str>,
        body: &Option<Vec<u8>>,
        limit: Duration,
    ) -> Result<Value, (CallError, Option<Duration>)> {
        if limit.is_zero() {
            return Err((CallError::NoAnswer("the time-out passed before the request was sent".into()), None));
        }
        let mut builder = http::Request::builder().method(method.clone()).uri(path);
        if let Some(ct) = content_type {
            builder = builder.header(http::header::CONTENT_TYPE, ct);
        }
        let request = builder
            .body(body.clone().unwrap_or_default())
            .map_err(|e| (CallError::NoAnswer(format!("the request could not be made: {e}")), None))?;
        let response = match tokio::time::timeout(limit, self.client.send(request.map(kube::client::Body::from))).await
        {
            Err(_) => return Err((CallError::NoAnswer(format!("no answer within {}s", limit.as_secs_f32())), None)),
            Ok(Err(e)) => return Err((CallError::NoAnswer(e.to_string()), None)),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let left = limit.saturating_sub(Duration::from_millis(1));
        let bytes = match tokio::time::timeout(left.max(Duration::from_millis(1)), read_body(response)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => return Err((CallError::NoAnswer(format!("the answer was cut off: {e}")), None)),
            Err(_) => return Err((CallError::NoAnswer("the answer did not arrive in time".into()), None)),
        };
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                (CallError::Status { code: status.as_u16(), reason: "Invalid".into(), message: e.to_string() }, None)
            });
        }
        // An error answer is a Status object; anything else is shown as its code only (never its text: it is
        // the server's, possibly a proxy's HTML page).
        let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let reason = parsed["reason"].as_str().unwrap_or(status.canonical_reason().unwrap_or("")).to_string();
        let message = parsed["message"].as_str().unwrap_or("").chars().take(500).collect();
        Err((CallError::Status { code: status.as_u16(), reason, message }, retry_after))
    }

    /// GET within `deadline`; `None` for 404.
    pub async fn get_until(&self, path: &str, deadline: Instant) -> Result<Option<Value>, ClusterError> {
        match self.call(http::Method::GET, path, None, deadline).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is(404) => Ok(None),
            Err(e) => Err(self.failed(&http::Method::GET, path, e)),
        }
    }

    /// GET bounded by [`API_TIMEOUT`]; `None` for 404.
    pub async fn get(&self, path: &str) -> Result<Option<Value>, ClusterError> {
        self.get_until(path, Instant::now() + API_TIMEOUT).await
    }

    /// The items of a list (none for 404: the kind is not served).
    pub async fn list(&self, path: &str) -> Result<Vec<Value>, ClusterError> {
        Ok(self.get(path).await?.and_then(|l| l["items"].as_array().cloned()).unwrap_or_default())
    }

    /// A failed call in wmrender's words: what was asked, and the answer.
    pub fn failed(&self, method: &http::Method, path: &str, e: CallError) -> ClusterError {
        ClusterError::Api { what: self.what(method, path), why: e.to_string() }
    }
}

async fn read_body(response: http::Response<kube::client::Body>) -> Result<Vec<u8>, String> {
    use http_body_util::BodyExt;
    response.into_body().collect().await.map(|c| c.to_bytes().to_vec()).map_err(|e| e.to_string())
}
