//! The agent's report on its own Node, as node-problem-detector reports on a node: after each pass, with the node's
//! own credentials (the kubeconfig kubelet's TLS bootstrap wrote, `C:\k\kubeconfig`), it sets the condition
//! `wmrender.dev/Configured` in the Node's status and, after a converged pass, the annotation with the digest of the
//! bundle it applied ([`wmrender_contract::node_status`]). The NodeRestriction admission plugin lets a node do
//! exactly this to its own Node and nothing to another's, nor to its own taints.
//!
//! Before kubelet joined the node there is no such kubeconfig and nothing to report on. A report that fails never
//! fails the pass: the result line says why (`nodeReport`), and the next pass tries again.

use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wmrender_contract::node_status::{
    AGENT_ANNOTATION, BUNDLE_ANNOTATION, CONDITION_TYPE, PAYLOAD_ANNOTATION, PAYLOAD_PULL_CONDITION_TYPE,
    PULL_CONDITION_TYPE, PULLED_BUNDLE_ANNOTATION, PULLED_PAYLOAD_ANNOTATION, REASON_CONVERGED, REASON_FAILED,
    REASON_PENDING, REASON_PULLED, REASON_REFUSED, REASON_RETRYING, REASON_SYNCED_SINCE,
};
use wmrender_contract::{ApplyResult, ApplyStatus, PullOutcome, PullReport};

/// The bound on each request: a pass must not hang on an API server that does not answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest condition message (the API takes 32 KiB; a reader wants the gist).
const MESSAGE_MAX: usize = 1000;

/// Reports `result` on the Node it names, through the kubeconfig at `kubeconfig`. Returns what `nodeReport` says:
/// `reported`, or why nothing was reported.
pub fn report(kubeconfig: &Path, result: &ApplyResult) -> String {
    report_on(kubeconfig, result, None)
}

/// [`report`], comparing with `cached` (the service's watch on its Node) instead of asking for the Node.
pub fn report_on(kubeconfig: &Path, result: &ApplyResult, cached: Option<&Value>) -> String {
    if result.node_name.is_empty() {
        return "not reported: the node's name is not known yet".into();
    }
    if !kubeconfig.exists() {
        return "not reported: the node has not joined yet (no kubeconfig from kubelet)".into();
    }
    match Client::from_kubeconfig(kubeconfig).and_then(|c| c.report(result, cached)) {
        Ok(()) => "reported".into(),
        Err(e) => format!("not reported: {e}"),
    }
}

/// The condition a pass's result gives: (status, reason, message).
pub fn condition(result: &ApplyResult) -> (&'static str, &'static str, String) {
    let (status, reason, message) = match result.status {
        ApplyStatus::Converged => ("True", REASON_CONVERGED, format!("the bundle {} is applied", result.bundle)),
        ApplyStatus::Failed => ("False", REASON_FAILED, result.errors.join("; ")),
        ApplyStatus::Pending => ("Unknown", REASON_PENDING, result.pending.join("; ")),
    };
    (status, reason, shorten(message))
}

/// The condition a pull gives: (status, reason).
pub fn pull_condition(pull: &PullReport) -> (&'static str, &'static str) {
    match pull.outcome {
        PullOutcome::Current if pull.on_node.is_none() => ("True", REASON_SYNCED_SINCE),
        PullOutcome::Staged | PullOutcome::Current => ("True", REASON_PULLED),
        PullOutcome::Refused => ("False", REASON_REFUSED),
        PullOutcome::Retrying => ("Unknown", REASON_RETRYING),
    }
}

fn shorten(message: String) -> String {
    if message.chars().count() > MESSAGE_MAX {
        message.chars().take(MESSAGE_MAX).chain("…".chars()).collect()
    } else {
        message
    }
}

/// The condition entry to write when the Node's differs (its transition time kept while its status stays).
fn changed(node: &Value, kind: &str, status: &str, reason: &str, message: String) -> Option<Value> {
    let current = node["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null);
    if current["status"] == status && current["reason"] == reason && current["message"] == message.as_str() {
        return None;
    }
    let now = crate::log::utc_now();
    let since = if current["status"] == status { current["lastTransitionTime"].clone() } else { now.clone().into() };
    Some(json!({
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": now, "lastTransitionTime": since,
    }))
}

/// The parts of a kubeconfig the agent uses: its current context's cluster and user.
#[derive(Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    users: Vec<Named<UserEntry>>,
    #[serde(default)]
    contexts: Vec<Named<ContextEntry>>,
    #[serde(rename = "current-context", default)]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: T,
}

#[derive(Deserialize)]
struct ClusterEntry {
    server: String,
    #[serde(rename = "certificate-authority", default)]
    ca_file: Option<String>,
    #[serde(rename = "certificate-authority-data", default)]
    ca_data: Option<String>,
}

#[derive(Deserialize, Default)]
struct UserEntry {
    #[serde(rename = "client-certificate", default)]
    cert_file: Option<String>,
    #[serde(rename = "client-certificate-data", default)]
    cert_data: Option<String>,
    #[serde(rename = "client-key", default)]
    key_file: Option<String>,
    #[serde(rename = "client-key-data", default)]
    key_data: Option<String>,
    #[serde(default)]
    token: Option<String>,
}

#[derive(Deserialize)]
struct ContextEntry {
    cluster: String,
    user: String,
}

/// An HTTPS client to the API server as the node.
pub struct Client {
    agent: ureq::Agent,
    /// For watches: no bound on the whole answer, which streams for up to an hour.
    watching: ureq::Agent,
    server: String,
    token: Option<String>,
}

impl Client {
    /// Reads the kubeconfig (YAML or JSON, as kubelet writes it) and the files it names, relative paths from its
    /// folder.
    pub fn from_kubeconfig(path: &Path) -> Result<Client, String> {
        use base64::Engine;
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let config: Kubeconfig = serde_saphyr::from_str(&text)
            .map_err(|_| format!("{} is not a kubeconfig this agent can read", path.display()))?;
        let context = match config.contexts.iter().find(|c| c.name == config.current_context) {
            Some(c) => &c.value,
            None if config.contexts.len() == 1 => &config.contexts[0].value,
            None => return Err(format!("{} has no current context", path.display())),
        };
        let cluster = &config
            .clusters
            .iter()
            .find(|c| c.name == context.cluster)
            .ok_or_else(|| format!("{} names no cluster `{}`", path.display(), context.cluster))?
            .value;
        let default_user = UserEntry::default();
        let user = config.users.iter().find(|u| u.name == context.user).map(|u| &u.value).unwrap_or(&default_user);
        let base = path.parent().unwrap_or(Path::new("."));
        let bytes = |file: &Option<String>, data: &Option<String>, what: &str| -> Result<Option<Vec<u8>>, String> {
            if let Some(d) = data {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(d.trim())
                    .map_err(|_| format!("the kubeconfig's {what} data is not base64"))?;
                return Ok(Some(decoded));
            }
            match file {
                Some(f) => {
                    let p = resolve(base, f);
                    std::fs::read(&p).map(Some).map_err(|e| format!("cannot read {what} {}: {e}", p.display()))
                }
                None => Ok(None),
            }
        };
        let pem_error = |what: &str| format!("the kubeconfig's {what} is not PEM");
        let roots = match bytes(&cluster.ca_file, &cluster.ca_data, "certificate authority")? {
            Some(pem) => {
                let certs = certificates(&pem).map_err(|_| pem_error("certificate authority"))?;
                ureq::tls::RootCerts::new_with_certs(&certs)
            }
            None => ureq::tls::RootCerts::WebPki,
        };
        let cert = bytes(&user.cert_file, &user.cert_data, "client certificate")?;
        let key = bytes(&user.key_file, &user.key_data, "client key")?;
        let client_cert = match (cert, key) {
            (Some(c), Some(k)) => {
                let chain = certificates(&c).map_err(|_| pem_error("client certificate"))?;
                let key = ureq::tls::PrivateKey::from_pem(&k).map_err(|_| pem_error("client key"))?;
                Some(ureq::tls::ClientCert::new_with_certs(&chain, key))
            }
            _ => None,
        };
        if client_cert.is_none() && user.token.is_none() {
            return Err(format!("{} holds no credentials of the node", path.display()));
        }
        if !cluster.server.starts_with("https://") {
            return Err(format!("{} names a server that is not https", path.display()));
        }
        let tls = ureq::tls::TlsConfig::builder().root_certs(roots).client_cert(client_cert).build();
        let user_agent = format!("wmrender-node/{} (windows)", env!("CARGO_PKG_VERSION"));
        let agent = ureq::Agent::config_builder()
            .tls_config(tls.clone())
            // The node reaches api-int directly, as kubelet does (NO_PROXY holds it).
            .proxy(None)
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .user_agent(user_agent.clone())
            .build()
            .new_agent();
        let watching = ureq::Agent::config_builder()
            .tls_config(tls)
            .proxy(None)
            .timeout_connect(Some(TIMEOUT))
            .timeout_recv_response(Some(TIMEOUT))
            // A watch ends by its own timeout; a little longer, and it is dead.
            .timeout_recv_body(Some(Duration::from_secs(crate::node_watch::WATCH_SECONDS + 60)))
            .http_status_as_error(false)
            .user_agent(user_agent)
            .build()
            .new_agent();
        Ok(Client {
            agent,
            watching,
            server: cluster.server.trim_end_matches('/').to_string(),
            token: user.token.clone(),
        })
    }

    fn send(&self, method: &str, path: &str, content_type: &str, body: Option<&Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.server);
        let mut request = ureq::http::Request::builder().method(method).uri(&url).header("Accept", "application/json");
        if let Some(t) = &self.token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        let request = request
            .header("Content-Type", content_type)
            .body(body.map(|b| b.to_string()).unwrap_or_default())
            .map_err(|e| e.to_string())?;
        let mut response = self.agent.run(request).map_err(|e| format!("{method} {url}: {e}"))?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            Ok(value)
        } else {
            let message = value["message"].as_str().unwrap_or("").chars().take(300).collect::<String>();
            Err(format!("{method} {path}: the API server answered {status}: {message}"))
        }
    }

    /// Sets the condition (its transition time kept while its status stays) and, for a converged pass, the bundle
    /// and payload annotations; with a pull, its condition too, and once a pulled bundle converged, the
    /// pulled-bundle annotation. A Node already saying so is not written again.
    pub fn report(&self, result: &ApplyResult, cached: Option<&Value>) -> Result<(), String> {
        let path = format!("/api/v1/nodes/{}", result.node_name);
        let node = match cached.filter(|n| n["metadata"]["name"] == result.node_name.as_str()) {
            Some(n) => n.clone(),
            None => self.send("GET", &path, "application/json", None)?,
        };
        let mut conditions = Vec::new();
        let (status, reason, message) = condition(result);
        conditions.extend(changed(&node, CONDITION_TYPE, status, reason, message));
        for (kind, pull) in [(PULL_CONDITION_TYPE, &result.pull), (PAYLOAD_PULL_CONDITION_TYPE, &result.payload_pull)] {
            if let Some(pull) = pull {
                let (status, reason) = pull_condition(pull);
                conditions.extend(changed(&node, kind, status, reason, shorten(pull.message.clone())));
            }
        }
        if !conditions.is_empty() {
            // Strategic merge: conditions merge by type, so kubelet's own stay as they are.
            let patch = json!({ "status": { "conditions": conditions } });
            self.send("PATCH", &format!("{path}/status"), "application/strategic-merge-patch+json", Some(&patch))?;
        }
        let mut annotations = serde_json::Map::new();
        let current = |key: &str| node["metadata"]["annotations"][key].as_str().map(str::to_string);
        if result.status == ApplyStatus::Converged {
            if current(BUNDLE_ANNOTATION).as_deref() != Some(result.bundle.as_str()) {
                annotations.insert(BUNDLE_ANNOTATION.into(), result.bundle.clone().into());
            }
            for (key, digest) in [(PAYLOAD_ANNOTATION, &result.payload), (AGENT_ANNOTATION, &result.agent)] {
                if !digest.is_empty() && current(key).as_deref() != Some(digest.as_str()) {
                    annotations.insert(key.into(), digest.clone().into());
                }
            }
            // What was pulled, while it is on the node; once a sync delivered another since, the annotation goes
            // (null in a merge patch), so that no one takes the node to run what it names.
            for (key, pull) in
                [(PULLED_BUNDLE_ANNOTATION, &result.pull), (PULLED_PAYLOAD_ANNOTATION, &result.payload_pull)]
            {
                let Some(pull) = pull else { continue };
                match &pull.on_node {
                    Some(on_node) if current(key).as_ref() != Some(on_node) => {
                        annotations.insert(key.into(), on_node.clone().into());
                    }
                    // Only when the pull says so (not when it could not tell: a record it cannot read).
                    None if current(key).is_some() && matches!(pull.outcome, PullOutcome::Current) => {
                        annotations.insert(key.into(), Value::Null);
                    }
                    _ => {}
                }
            }
        }
        if !annotations.is_empty() {
            let patch = json!({ "metadata": { "annotations": annotations } });
            self.send("PATCH", &path, "application/merge-patch+json", Some(&patch))?;
        }
        Ok(())
    }

    /// A watch as the node: its events, one JSON object a line, as they come.
    pub fn watch(&self, path: &str) -> Result<std::io::BufReader<ureq::BodyReader<'static>>, String> {
        let url = format!("{}{path}", self.server);
        let mut request = ureq::http::Request::builder().method("GET").uri(&url).header("Accept", "application/json");
        if let Some(t) = &self.token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        let request = request.body(()).map_err(|e| e.to_string())?;
        let response = self.watching.run(request).map_err(|e| format!("GET {url}: {e}"))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(format!("watch {path}: the API server answered {status}"));
        }
        Ok(std::io::BufReader::new(response.into_body().into_reader()))
    }

    /// A request as the node, for tests of what the node may do: the answer, or the API server's refusal.
    pub fn request(&self, method: &str, path: &str, content_type: &str, body: Option<&Value>) -> Result<Value, String> {
        self.send(method, path, content_type, body)
    }
}

fn certificates(pem: &[u8]) -> Result<Vec<ureq::tls::Certificate<'static>>, ()> {
    let certs: Vec<_> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() { Err(()) } else { Ok(certs) }
}

/// A path of the kubeconfig: absolute as it is (`C:\…` on the node), else from the kubeconfig's folder.
fn resolve(base: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() || file.get(1..3) == Some(":\\") { p.to_path_buf() } else { base.join(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_becomes_a_condition() {
        let mut r = ApplyResult { status: ApplyStatus::Converged, bundle: "sha256:ab".into(), ..Default::default() };
        assert_eq!(condition(&r), ("True", REASON_CONVERGED, "the bundle sha256:ab is applied".into()));
        r.status = ApplyStatus::Failed;
        r.errors = vec!["kube-proxy: exited".into(), "x".repeat(2000)];
        let (s, reason, m) = condition(&r);
        assert_eq!((s, reason), ("False", REASON_FAILED));
        assert!(m.starts_with("kube-proxy: exited; ") && m.chars().count() == MESSAGE_MAX + 1, "{}", m.len());
        r.status = ApplyStatus::Pending;
        r.pending = vec!["kubelet waits".into()];
        assert_eq!(condition(&r), ("Unknown", REASON_PENDING, "kubelet waits".into()));
    }

    #[test]
    fn nothing_is_reported_before_the_node_joined() {
        let dir = tempfile::tempdir().unwrap();
        let r = ApplyResult { node_name: "win-a".into(), ..Default::default() };
        assert!(report(&dir.path().join("kubeconfig"), &r).contains("not joined"));
        let nameless = ApplyResult::default();
        assert!(report(&dir.path().join("kubeconfig"), &nameless).contains("name"));
        std::fs::write(dir.path().join("kubeconfig"), "clusters: [").unwrap();
        assert!(report(&dir.path().join("kubeconfig"), &r).contains("not a kubeconfig"));
    }
}
