//! A stand-in Kubernetes API server for wmrender's cluster tests.
//!
//! **Why a stand-in**: no kube-apiserver (nor etcd) can be installed on the machines these tests run on. This crate
//! serves the REST API on `127.0.0.1:0` from a thread, over plain HTTP/1.1, and enforces the rules of the
//! Kubernetes API reference that wmrender's client relies on, so that a client which skips one fails here as it
//! would on a real cluster:
//!
//! - **Authentication**: every request needs `Authorization: Bearer <token>` with a token the server knows; otherwise
//!   401 `Unauthorized`. (Authorization — RBAC — is not enforced; the request log records who did what so a test can
//!   check it.)
//! - **Objects** keyed by (apiVersion, resource, namespace, name) under `/api/v1/…` and `/apis/{group}/{version}/…`,
//!   namespaced or cluster-scoped per kind; GET, LIST (`labelSelector`: `=`, `==`, `!=`, existence; `fieldSelector`:
//!   `metadata.name`, `metadata.namespace` and the fields the kind supports, anything else 400), POST (201;
//!   `AlreadyExists` 409; the kind and namespace in the body must match the URL; `generateName`), PUT (404 if absent;
//!   `Conflict` 409 when `metadata.resourceVersion` is given and stale), PATCH (merge, strategic merge, JSON patch;
//!   a `metadata.resourceVersion` in the patch is a precondition, 409 when stale; server-side apply is 415),
//!   DELETE (`preconditions.resourceVersion`/`uid` honoured). `metadata.resourceVersion` is bumped on every write
//!   from one counter; `uid` and `creationTimestamp` are the server's.
//! - **Status**: for kinds with a status subresource, writes to the object leave `.status` as it was; only
//!   `…/status` (or a dedicated subresource such as CSR `/approval`) changes it. Errors are `Status` objects with the
//!   API's reason, code and message.
//! - **Subresources** other files add through [`Subresource`] (CSR approval is in [`csr`], TokenRequest in
//!   [`token`]).
//!
//! Tests seed objects and read them back with [`ApiServer::put_object`] and [`ApiServer::object`], make the server
//! misbehave on purpose with [`ApiServer::inject`] (e.g. "the next 2 PATCHes of node x answer 409"), and check what a
//! client did with [`ApiServer::requests`]. [`ApiServer::write_kubeconfig`] writes a kubeconfig for it.
//!
//! A new subresource goes in its own file, like [`csr`]: a type implementing [`Subresource`], registered with
//! [`ApiServer::register`] (handlers registered later win over earlier ones for the same route):
//!
//! ```text
//! struct Eviction;
//! impl Subresource for Eviction {
//!     fn route(&self) -> (&str, &str, &str) { ("v1", "pods", "eviction") }
//!     fn handle(&self, state: &mut State, key: &Key, request: &Request) -> Response {
//!         // read state.store, decide, write with state.store.replace/remove, answer e.g.
//!         // Response::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.")
//!     }
//! }
//! server.register(Arc::new(Eviction));
//! ```
//!
//! A kind the stand-in does not know is added with [`ApiServer::register_kind`].

pub mod csr;
pub mod eviction;
pub mod http;
pub mod patch;
pub mod select;
pub mod status;
pub mod store;
pub mod token;

pub use http::Request;
pub use status::Response;
pub use store::{Key, Kind, StatusRule, Store};

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A handler for one subresource, e.g. `certificatesigningrequests/{name}/approval`, `pods/{name}/eviction`,
/// `serviceaccounts/{name}/token`. It runs with the server's state locked, after authentication.
pub trait Subresource: Send + Sync {
    /// (apiVersion, resource, subresource), e.g. `("v1", "pods", "eviction")`.
    fn route(&self) -> (&str, &str, &str);
    /// Answers a request to `key`'s subresource. The object may not exist: answer [`Response::not_found`] then.
    fn handle(&self, state: &mut State, key: &Key, request: &Request) -> Response;
}

/// Everything the server holds. Subresource handlers and [`ApiServer::with_state`] get it mutably.
#[derive(Default)]
pub struct State {
    pub store: Store,
    /// Bearer token → user name.
    pub tokens: BTreeMap<String, String>,
    faults: Vec<Fault>,
    log: Vec<Logged>,
}

/// A behaviour injected by a test: the next `times` requests that match answer `response` instead.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `GET`, `PATCH`, …; `None` for any method.
    pub method: Option<String>,
    pub resource: String,
    /// `None` for any object of the resource.
    pub name: Option<String>,
    /// `None` for the object itself, `Some("approval")` for a subresource.
    pub subresource: Option<String>,
    pub times: usize,
    pub response: Response,
}

impl Fault {
    /// The next `times` writes (`method`) of `resource`/`name` answer 409 Conflict, as a concurrent writer would
    /// cause.
    pub fn conflicts(method: &str, resource: &str, name: &str, times: usize) -> Fault {
        Fault {
            method: Some(method.into()),
            resource: resource.into(),
            name: Some(name.into()),
            subresource: None,
            times,
            response: Response::conflict(resource, name),
        }
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// The authenticated user; empty when authentication failed.
    pub user: String,
    pub content_type: String,
    pub code: u16,
}

pub struct ApiServer {
    addr: SocketAddr,
    token: String,
    state: Arc<Mutex<State>>,
    subresources: Arc<Mutex<Vec<Arc<dyn Subresource>>>>,
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
}

impl ApiServer {
    /// Starts a server on 127.0.0.1 with one admin token (user `system:admin`) and the CSR approval subresource.
    pub fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the listener's address");
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let token = format!("standin-{:x}-{}", nanos, std::process::id());
        let mut state = State::default();
        state.tokens.insert(token.clone(), "system:admin".into());
        let server = ApiServer {
            addr,
            token,
            state: Arc::new(Mutex::new(state)),
            subresources: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
            connections: Arc::new(Mutex::new(Vec::new())),
        };
        server.register(Arc::new(csr::Approval));
        server.register(Arc::new(csr::StatusKeepsApproval));
        server.register(Arc::new(token::TokenRequest));
        server.register(Arc::new(eviction::Eviction));
        let (state, subs, stop, conns) =
            (server.state.clone(), server.subresources.clone(), server.stop.clone(), server.connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                if let Ok(c) = stream.try_clone() {
                    conns.lock().expect("connections lock").push(c);
                }
                let (state, subs) = (state.clone(), subs.clone());
                std::thread::spawn(move || serve_connection(stream, &state, &subs));
            }
        });
        server
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin token (user `system:admin`).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A kubeconfig for this server with `token`.
    pub fn kubeconfig_with(&self, token: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: {}\nusers:\n- name: admin\n  \
             user:\n    token: {token}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    user: admin\n\
             current-context: standin\n",
            self.url()
        )
    }

    /// Writes a kubeconfig with the admin token to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_with(&self.token))
    }

    /// Makes `token` authenticate as `user` (e.g. a node-bootstrapper or node identity).
    pub fn add_token(&self, token: &str, user: &str) {
        self.with_state(|s| s.tokens.insert(token.into(), user.into()));
    }

    pub fn register(&self, handler: Arc<dyn Subresource>) {
        self.subresources.lock().expect("subresources lock").insert(0, handler);
    }

    pub fn register_kind(&self, kind: Kind) {
        self.with_state(|s| s.store.register_kind(kind));
    }

    /// Runs `f` with the state locked: for seeding, reading and changing objects as a controller would.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("state lock"))
    }

    /// Creates or replaces an object (its apiVersion and kind must be known), as a test's seed; returns it as
    /// stored.
    pub fn put_object(&self, object: Value) -> Value {
        self.with_state(|s| {
            let key = s.store.key_of(&object).unwrap_or_else(|| panic!("the stand-in does not know {object}"));
            if s.store.get(&key).is_some() { s.store.replace(&key, object) } else { s.store.create(key, object) }
        })
    }

    pub fn object(&self, api_version: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.with_state(|s| s.store.get(&Key::new(api_version, resource, namespace, name)).cloned())
    }

    pub fn delete_object(&self, api_version: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.with_state(|s| s.store.remove(&Key::new(api_version, resource, namespace, name)))
    }

    pub fn inject(&self, fault: Fault) {
        self.with_state(|s| s.faults.push(fault));
    }

    pub fn requests(&self) -> Vec<Logged> {
        self.with_state(|s| s.log.clone())
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop so it sees `stop`
        for c in self.connections.lock().map(|mut c| std::mem::take(&mut *c)).unwrap_or_default() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn serve_connection(stream: TcpStream, state: &Mutex<State>, subs: &Mutex<Vec<Arc<dyn Subresource>>>) {
    // An idle client connection is closed after a minute, so no thread outlives a test by much.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    while let Ok(Some(mut request)) = http::read_request(&mut reader) {
        let handlers: Vec<Arc<dyn Subresource>> = subs.lock().map(|s| s.clone()).unwrap_or_default();
        let response = {
            let Ok(mut state) = state.lock() else { return };
            let response = handle(&mut state, &handlers, &mut request);
            let target = if request.raw_query.is_empty() {
                request.path.clone()
            } else {
                format!("{}?{}", request.path, request.raw_query)
            };
            state.log.push(Logged {
                method: request.method.clone(),
                target,
                user: request.user.clone(),
                content_type: request.content_type().to_string(),
                code: response.code,
            });
            response
        };
        let close = request.header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
        if http::write_response(&mut writer, &response).is_err() || close {
            return;
        }
    }
}

/// Where a request goes: `/api/v1/…` or `/apis/{group}/{version}/…`, then `[namespaces/{ns}/]{resource}[/{name}[/{sub}]]`.
#[derive(Debug, PartialEq)]
pub struct Target {
    pub api_version: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse_target(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_version, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("v1".to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return None,
    };
    let at = |i: usize| rest.get(i).map(|s| s.to_string());
    // `namespaces/{name}/status` and `/finalize` are subresources of a Namespace, not a namespaced resource.
    let namespaced = rest.len() >= 3 && rest[0] == "namespaces" && !matches!(rest[2], "status" | "finalize");
    let (namespace, r) = if namespaced { (at(1), &rest[2..]) } else { (None, rest) };
    if r.is_empty() || r.len() > 3 || r.iter().any(|s| s.is_empty()) {
        return None;
    }
    Some(Target {
        api_version,
        resource: r[0].to_string(),
        namespace,
        name: r.get(1).map(|s| s.to_string()),
        subresource: r.get(2).map(|s| s.to_string()),
    })
}

fn not_served() -> Response {
    Response::failure(404, "NotFound", "the server could not find the requested resource".into(), "", "")
}

/// Authenticates, applies injected faults, then routes.
fn handle(state: &mut State, handlers: &[Arc<dyn Subresource>], request: &mut Request) -> Response {
    let token = request.header("authorization").and_then(|a| a.strip_prefix("Bearer ")).map(str::trim);
    match token.and_then(|t| state.tokens.get(t)) {
        Some(user) => request.user = user.clone(),
        None => return Response::unauthorized(),
    }
    if request.path == "/version" {
        return Response::ok(json!({ "major": "1", "minor": "33", "gitVersion": "v1.33.0-standin" }));
    }
    let Some(target) = parse_target(&request.path) else { return not_served() };
    let Some(kind) = state.store.kind_for_resource(&target.api_version, &target.resource).cloned() else {
        return not_served();
    };
    // A namespaced object needs a namespace in the URL and a cluster-scoped one must not have one (lists of a
    // namespaced resource may span all namespaces).
    if (target.namespace.is_some() && !kind.namespaced)
        || (kind.namespaced && target.namespace.is_none() && target.name.is_some())
    {
        return not_served();
    }
    let key = Key::new(
        &kind.api_version,
        &kind.resource,
        target.namespace.as_deref().unwrap_or(""),
        target.name.as_deref().unwrap_or(""),
    );
    if let Some(fault) = state.faults.iter_mut().find(|f| {
        f.times > 0
            && f.method.as_ref().is_none_or(|m| *m == request.method)
            && f.resource == kind.resource
            && f.name.as_ref().is_none_or(|n| Some(n) == target.name.as_ref())
            && f.subresource == target.subresource
    }) {
        fault.times -= 1;
        return fault.response.clone();
    }
    match (&target.name, &target.subresource) {
        (None, _) => collection(state, &kind, &target, request),
        (Some(_), None) => object(state, &kind, &key, request),
        (Some(_), Some(sub)) => {
            if let Some(h) =
                handlers.iter().find(|h| h.route() == (kind.api_version.as_str(), kind.resource.as_str(), sub.as_str()))
            {
                return h.handle(state, &key, request);
            }
            if sub == "status" && kind.status != StatusRule::None {
                return status_subresource(state, &kind, &key, request);
            }
            not_served()
        }
    }
}

/// Whether list items carry apiVersion and kind: the API drops them for built-in types, custom resources keep them.
fn builtin(api_version: &str) -> bool {
    match api_version.split_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

fn collection(state: &mut State, kind: &Kind, target: &Target, request: &Request) -> Response {
    let resource = store::qualified(&kind.api_version, &kind.resource);
    match request.method.as_str() {
        "GET" => {
            if request.query.get("watch").is_some_and(|w| w == "true" || w == "1") {
                return Response::bad_request("watch is not part of the stand-in; poll with GET");
            }
            let labels = match request.query.get("labelSelector").map(|s| select::Selector::labels(s)).transpose() {
                Ok(s) => s,
                Err(e) => return Response::bad_request(e),
            };
            let fields = match request
                .query
                .get("fieldSelector")
                .map(|s| select::Selector::fields(s, &resource, &kind.field_selectors))
                .transpose()
            {
                Ok(s) => s,
                Err(e) => return Response::bad_request(e),
            };
            let items: Vec<Value> = state
                .store
                .list(&kind.api_version, &kind.resource, target.namespace.as_deref())
                .into_iter()
                .filter(|o| labels.as_ref().is_none_or(|s| s.matches_labels(o)))
                .filter(|o| fields.as_ref().is_none_or(|s| s.matches_fields(o)))
                .map(|o| {
                    let mut o = o.clone();
                    if builtin(&kind.api_version)
                        && let Some(m) = o.as_object_mut()
                    {
                        m.remove("apiVersion");
                        m.remove("kind");
                    }
                    o
                })
                .collect();
            Response::ok(json!({
                "apiVersion": kind.api_version, "kind": format!("{}List", kind.kind),
                "metadata": { "resourceVersion": state.store.revision().to_string() }, "items": items,
            }))
        }
        "POST" => {
            let mut object = match request.json() {
                Ok(o) => o,
                Err(r) => return r,
            };
            if object["apiVersion"] != kind.api_version.as_str() || object["kind"] != kind.kind.as_str() {
                return Response::bad_request(format!(
                    "the API version and kind in the data ({}, {}) do not match the expected {}, {}",
                    object["apiVersion"], object["kind"], kind.api_version, kind.kind
                ));
            }
            let namespace = target.namespace.clone().unwrap_or_default();
            if kind.namespaced && namespace.is_empty() {
                return Response::method_not_allowed("POST to a namespaced resource without a namespace");
            }
            if let Some(ns) = object["metadata"]["namespace"].as_str()
                && kind.namespaced
                && ns != namespace
            {
                return Response::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                );
            }
            let name = match (object["metadata"]["name"].as_str(), object["metadata"]["generateName"].as_str()) {
                (Some(n), _) if !n.is_empty() => n.to_string(),
                (_, Some(prefix)) => format!("{prefix}{:05x}", state.store.revision() + 1),
                _ => {
                    return Response::invalid(
                        &resource,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    );
                }
            };
            let key = Key::new(&kind.api_version, &kind.resource, &namespace, &name);
            if state.store.get(&key).is_some() {
                return Response::already_exists(&resource, &name);
            }
            if kind.status == StatusRule::SubresourceClearedOnCreate
                && let Some(m) = object.as_object_mut()
            {
                m.remove("status");
            }
            if let Some(m) = object["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            if kind.kind == "CertificateSigningRequest" {
                // The API records who asked; a client cannot claim another requester.
                object["spec"]["username"] = request.user.clone().into();
                object["spec"]["groups"] = json!(groups_of(&request.user));
            }
            Response::created(state.store.create(key, object))
        }
        m => Response::method_not_allowed(m),
    }
}

/// The groups the API puts a user in (those wmrender's checks read).
fn groups_of(user: &str) -> Vec<String> {
    let mut groups = Vec::new();
    if user.starts_with("system:node:") {
        groups.push("system:nodes".to_string());
    }
    if let Some(rest) = user.strip_prefix("system:serviceaccount:") {
        groups.push("system:serviceaccounts".to_string());
        if let Some((namespace, _)) = rest.split_once(':') {
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
    }
    groups.push("system:authenticated".to_string());
    groups
}

/// The precondition every update honours: a resourceVersion in the request must be the stored one.
fn stale(old: &Value, new: &Value) -> bool {
    match new["metadata"]["resourceVersion"].as_str() {
        Some(rv) if !rv.is_empty() => old["metadata"]["resourceVersion"].as_str() != Some(rv),
        _ => false,
    }
}

/// A PUT body, or the patch of a PATCH applied to `old`. `Err` is the API's answer to a bad request.
pub fn updated(old: &Value, request: &Request, resource: &str, name: &str) -> Result<Value, Response> {
    let body = request.json()?;
    match request.method.as_str() {
        "PUT" => {
            if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
                return Err(Response::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    body["metadata"]["name"].as_str().unwrap_or("")
                )));
            }
            if stale(old, &body) {
                return Err(Response::conflict(resource, name));
            }
            Ok(body)
        }
        "PATCH" => {
            let mut new = old.clone();
            match request.content_type() {
                "application/merge-patch+json" => patch::merge(&mut new, &body),
                "application/strategic-merge-patch+json" => patch::strategic(&mut new, &body),
                "application/json-patch+json" => {
                    patch::json_patch(&mut new, &body).map_err(|e| Response::invalid(resource, name, e))?
                }
                other => return Err(Response::unsupported_media_type(other)),
            }
            if stale(old, &new) {
                return Err(Response::conflict(resource, name));
            }
            if new["metadata"]["name"] != old["metadata"]["name"] {
                return Err(Response::invalid(resource, name, "metadata.name: Invalid value: field is immutable"));
            }
            Ok(new)
        }
        m => Err(Response::method_not_allowed(m)),
    }
}

fn object(state: &mut State, kind: &Kind, key: &Key, request: &Request) -> Response {
    let resource = key.qualified_resource();
    let Some(old) = state.store.get(key).cloned() else {
        return match request.method.as_str() {
            "GET" | "PUT" | "PATCH" | "DELETE" => Response::not_found(&resource, &key.name),
            m => Response::method_not_allowed(m),
        };
    };
    match request.method.as_str() {
        "GET" => Response::ok(old),
        "PUT" | "PATCH" => {
            let mut new = match updated(&old, request, &resource, &key.name) {
                Ok(n) => n,
                Err(r) => return r,
            };
            if new["apiVersion"] != old["apiVersion"] || new["kind"] != old["kind"] {
                return Response::bad_request("the API version and kind of the object cannot change");
            }
            if kind.status != StatusRule::None {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            Response::ok(state.store.replace(key, new))
        }
        "DELETE" => {
            let options: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let pre = &options["preconditions"];
            let mismatch =
                |field: &str| pre[field].as_str().is_some_and(|want| old["metadata"][field].as_str() != Some(want));
            if mismatch("resourceVersion") || mismatch("uid") {
                return Response::conflict(&resource, &key.name);
            }
            state.store.remove(key);
            Response::success(&key.resource, &key.name)
        }
        m => Response::method_not_allowed(m),
    }
}

/// `…/status`: GET reads the object; PUT and PATCH change its status only.
fn status_subresource(state: &mut State, _kind: &Kind, key: &Key, request: &Request) -> Response {
    let resource = key.qualified_resource();
    let Some(old) = state.store.get(key).cloned() else { return Response::not_found(&resource, &key.name) };
    if request.method == "GET" {
        return Response::ok(old);
    }
    let new = match updated(&old, request, &resource, &key.name) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let mut object = old;
    object["status"] = new.get("status").cloned().unwrap_or(Value::Null);
    Response::ok(state.store.replace(key, object))
}
