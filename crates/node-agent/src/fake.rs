//! A stand-in for Windows in the Linux unit tests. Files are real (a temporary folder stands for `C:\`); the
//! SCM, registry, processes and PowerShell are simulated, and the simulation enforces the rules the engine relies
//! on, as Windows does:
//! - creating a service that exists fails (1073), and one marked for deletion fails (1072);
//! - deleting a running service only marks it; it goes when it stops;
//! - stopping a service whose dependents run fails (1051); stopping a stopped one fails (1062);
//! - starting a running service fails (1056); starting one whose executable is missing fails (2);
//! - a service may ignore stop requests ("stalled") or take a while; killing its process stops it;
//! - a file held by a running service (its executable, and what the test says it holds) cannot be replaced,
//!   only renamed away;
//! - starting a service whose dependencies are not running is allowed (Wine's SCM allows it) but recorded, so
//!   tests assert the engine's start order;
//! - a reboot starts only the automatic services, in no particular order (Windows starts them all at once);
//! - processes other than services (a pod's containerd shim) run from a program until they are killed;
//! - the agent's own service, once started, records its process and program as the real one does at its start;
//! - with `wine_stop_quirks`, Wine's SCM: no pid while a service is stop-pending, a killed stop-pending service
//!   stays stop-pending, and a service whose process is gone may be started again;
//! - the LocalMachine Root store refuses a certificate already there (CRYPT_E_EXISTS) and bytes that are not a
//!   DER certificate;
//! - PowerShell returns what the test scripted; unscripted, it behaves like Wine's stub (exit 0, no output).

use crate::system::Files;
use crate::system::{RunState, ScriptRun, ServiceConfig, ServiceStatus, SysError, SysResult, System};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;
use wmrender_contract::NodePath;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopBehaviour {
    Immediate,
    After(Duration),
    /// Ignores stop requests.
    Never,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Created(String),
    Updated(String),
    Deleted(String),
    /// A start request, with the dependencies that were not running at that moment.
    Started {
        name: String,
        deps_not_running: Vec<String>,
    },
    StopRequested(String),
    Killed(String),
    Replaced {
        from: NodePath,
        to: NodePath,
    },
    Script {
        script: NodePath,
        args: Vec<String>,
    },
    Env {
        name: String,
        value: Option<String>,
    },
    /// A certificate added to / removed from the LocalMachine Root store (sha256 of its DER).
    RootAdded(String),
    RootRemoved(String),
}

#[derive(Clone, Debug)]
struct FakeService {
    config: ServiceConfig,
    state: RunState,
    pid: Option<u32>,
    stop: StopBehaviour,
    stop_requested_at: Option<Duration>,
    marked_for_deletion: bool,
    /// wmrender's mark on the service.
    marked: bool,
    /// Files the running process holds besides its executable (kube-log-runner's child, say).
    holds: Vec<NodePath>,
}

struct Inner {
    services: BTreeMap<String, FakeService>,
    /// Behaviour set by a test before the service exists.
    behaviours: BTreeMap<String, (StopBehaviour, Vec<NodePath>)>,
    events: Vec<Event>,
    env: BTreeMap<String, String>,
    scripts: BTreeMap<NodePath, VecDeque<ScriptRun>>,
    boot: u64,
    /// The LocalMachine Root store: DER certificates, each once (the store refuses a duplicate add).
    root_store: Vec<Vec<u8>>,
    dns: String,
    fqdn: String,
    ip: Option<Ipv4Addr>,
    next_pid: u32,
    /// Processes that are not services (pid → program): they hold their program's file while they run.
    processes: BTreeMap<u32, NodePath>,
    /// This process (the agent): pid and program.
    current: (u32, NodePath),
    clock: Duration,
    /// Wine's SCM: dependencies are stored (and ordered nothing) but read back as an empty list.
    hide_dependencies: bool,
    /// Wine's SCM around stops: see the module's notes.
    wine_stop_quirks: bool,
    /// How often each service was asked about (its configuration or its state), since the test last took them.
    queries: BTreeMap<String, u32>,
    /// How often the Root store was read.
    root_reads: u32,
}

/// Clones are handles on the same simulated machine.
#[derive(Clone)]
pub struct FakeSystem {
    pub dir: Rc<tempfile::TempDir>,
    inner: Rc<RefCell<Inner>>,
}

fn err<T>(code: u32, what: impl std::fmt::Display) -> SysResult<T> {
    Err(SysError(format!("{what} (os error {code})")))
}

/// The executable of a command line: the quoted first part, or up to the first space.
pub fn executable(command: &str) -> Option<NodePath> {
    let exe = match command.strip_prefix('"') {
        Some(rest) => rest.split('"').next()?,
        None => command.split(' ').next()?,
    };
    NodePath::parse(exe).ok()
}

impl Default for FakeSystem {
    fn default() -> Self {
        FakeSystem::new()
    }
}

impl FakeSystem {
    /// How often each service was asked about since the last call (each question to the SCM costs a round trip
    /// to services.exe).
    pub fn take_queries(&self) -> BTreeMap<String, u32> {
        std::mem::take(&mut self.inner.borrow_mut().queries)
    }

    /// How often the LocalMachine Root store was read.
    pub fn root_reads(&self) -> u32 {
        self.inner.borrow().root_reads
    }

    pub fn new() -> FakeSystem {
        FakeSystem {
            dir: Rc::new(tempfile::tempdir().expect("temporary folder")),
            inner: Rc::new(RefCell::new(Inner {
                services: BTreeMap::new(),
                behaviours: BTreeMap::new(),
                events: Vec::new(),
                env: BTreeMap::new(),
                scripts: BTreeMap::new(),
                boot: 1,
                root_store: Vec::new(),
                dns: "WIN-Node-1".into(),
                fqdn: "WIN-Node-1.Example.Internal".into(),
                ip: Some(Ipv4Addr::new(10, 0, 0, 5)),
                next_pid: 100,
                processes: BTreeMap::new(),
                current: (1, NodePath::known(wmrender_contract::paths::AGENT_EXE)),
                clock: Duration::ZERO,
                hide_dependencies: false,
                wine_stop_quirks: false,
                queries: BTreeMap::new(),
                root_reads: 0,
            })),
        }
    }

    pub fn events(&self) -> Vec<Event> {
        self.inner.borrow().events.clone()
    }

    pub fn clear_events(&self) {
        self.inner.borrow_mut().events.clear();
    }

    /// Time spent in `sleep`.
    pub fn clock(&self) -> Duration {
        self.inner.borrow().clock
    }

    pub fn set_stop_behaviour(&self, name: &str, stop: StopBehaviour) {
        let mut inner = self.inner.borrow_mut();
        if let Some(s) = inner.services.get_mut(name) {
            s.stop = stop;
        }
        inner.behaviours.entry(name.into()).or_insert((StopBehaviour::Immediate, vec![])).0 = stop;
    }

    pub fn set_holds(&self, name: &str, holds: &[&str]) {
        let holds: Vec<NodePath> = holds.iter().map(|h| NodePath::known(h)).collect();
        let mut inner = self.inner.borrow_mut();
        if let Some(s) = inner.services.get_mut(name) {
            s.holds = holds.clone();
        }
        inner.behaviours.entry(name.into()).or_insert((StopBehaviour::Immediate, vec![])).1 = holds;
    }

    /// Queues a result for a script; the last one queued repeats.
    pub fn script(&self, script: &str, exit_code: i32, stdout: &str) {
        let run = ScriptRun { exit_code, stdout: stdout.into(), stderr: String::new() };
        self.inner.borrow_mut().scripts.entry(NodePath::known(script)).or_default().push_back(run);
    }

    /// Forgets what was queued for a script.
    pub fn clear_script(&self, script: &str) {
        self.inner.borrow_mut().scripts.remove(&NodePath::known(script));
    }

    pub fn set_dns(&self, host: &str, fqdn: &str) {
        let mut inner = self.inner.borrow_mut();
        inner.dns = host.into();
        inner.fqdn = fqdn.into();
    }

    pub fn hide_dependencies(&self) {
        self.inner.borrow_mut().hide_dependencies = true;
    }

    pub fn wine_stop_quirks(&self) {
        self.inner.borrow_mut().wine_stop_quirks = true;
    }

    pub fn set_ip(&self, ip: Option<Ipv4Addr>) {
        self.inner.borrow_mut().ip = ip;
    }

    /// Puts a certificate into the Root store as if the node had it already (not the agent's).
    pub fn preinstall_root(&self, der: &[u8]) {
        self.inner.borrow_mut().root_store.push(der.to_vec());
    }

    pub fn root_store(&self) -> Vec<Vec<u8>> {
        self.inner.borrow().root_store.clone()
    }

    pub fn env(&self, name: &str) -> Option<String> {
        self.inner.borrow().env.get(name).cloned()
    }

    pub fn status(&self, name: &str) -> Option<ServiceStatus> {
        self.service(name).ok().flatten()
    }

    pub fn state_of(&self, name: &str) -> Option<RunState> {
        self.status(name).map(|s| s.state)
    }

    pub fn service_names(&self) -> Vec<String> {
        self.inner.borrow().services.keys().cloned().collect()
    }

    /// Starts a process that is not a service (a pod's containerd shim) from `program`; its pid.
    pub fn spawn(&self, program: &str) -> u32 {
        let mut inner = self.inner.borrow_mut();
        inner.next_pid += 1;
        let pid = inner.next_pid;
        inner.processes.insert(pid, NodePath::known(program));
        pid
    }

    /// Makes this process the one with `pid` (the agent service's own, say).
    pub fn set_current_pid(&self, pid: u32) {
        self.inner.borrow_mut().current.0 = pid;
    }

    /// Adds a service wmrender did not create (no mark), running.
    pub fn add_foreign_service(&self, config: ServiceConfig) {
        let mut inner = self.inner.borrow_mut();
        inner.next_pid += 1;
        let pid = inner.next_pid;
        let service = FakeService {
            config: config.clone(),
            state: RunState::Running,
            pid: Some(pid),
            stop: StopBehaviour::Immediate,
            stop_requested_at: None,
            marked_for_deletion: false,
            marked: false,
            holds: vec![],
        };
        inner.services.insert(config.name, service);
    }

    /// The process of a service dies (a crash, or someone ended it).
    pub fn crash(&self, name: &str) {
        let mut inner = self.inner.borrow_mut();
        if let Some(s) = inner.services.get_mut(name) {
            s.state = RunState::Stopped;
            s.pid = None;
        }
    }

    /// A reboot: every process ends, services marked for deletion go, the boot id changes, and automatic
    /// services start again.
    pub fn reboot(&self) {
        let mut inner = self.inner.borrow_mut();
        inner.services.retain(|_, s| !s.marked_for_deletion);
        inner.processes.clear();
        inner.boot += 1;
        let mut pid = inner.next_pid;
        let mut agent = None;
        for (name, s) in inner.services.iter_mut() {
            (s.state, s.pid, s.stop_requested_at) = (RunState::Stopped, None, None);
            if s.config.automatic {
                pid += 1;
                (s.state, s.pid) = (RunState::Running, Some(pid));
                if name == wmrender_contract::paths::AGENT_SERVICE {
                    agent = Some(pid);
                }
            }
        }
        inner.next_pid = pid;
        drop(inner);
        if let Some(pid) = agent {
            self.record_agent_service(pid);
        }
    }

    /// What the agent service writes when it starts (agent_service::record_running), for its process `pid`.
    fn record_agent_service(&self, pid: u32) {
        let program = self.local(&NodePath::known(wmrender_contract::paths::AGENT_EXE));
        let sha256 = crate::digest::sha256_file(&program).unwrap_or_default();
        let record = crate::agent_service::Running { pid, sha256 };
        let path = self.local(&NodePath::known(wmrender_contract::paths::AGENT_RUNNING));
        std::fs::write(path, serde_json::to_vec(&record).unwrap()).unwrap();
    }

    fn exists(&self, p: &NodePath) -> bool {
        self.local(p).is_file()
    }
}

impl Inner {
    fn finish_stop(&mut self, name: &str) {
        let Some(s) = self.services.get_mut(name) else { return };
        (s.state, s.pid, s.stop_requested_at) = (RunState::Stopped, None, None);
        if s.marked_for_deletion {
            self.services.remove(name);
        }
    }

    fn holder_of(&self, path: &NodePath) -> Option<String> {
        let same = |p: &NodePath| p.as_str().eq_ignore_ascii_case(path.as_str());
        let service = self
            .services
            .iter()
            .filter(|(_, s)| s.state != RunState::Stopped && s.pid.is_some())
            .find(|(_, s)| executable(&s.config.command).iter().chain(&s.holds).any(same))
            .map(|(n, _)| n.clone());
        service.or_else(|| self.processes.iter().find(|(_, p)| same(p)).map(|(pid, _)| format!("process {pid}")))
    }
}

impl crate::system::Files for FakeSystem {
    fn root(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl System for FakeSystem {
    fn service(&self, name: &str) -> SysResult<Option<ServiceStatus>> {
        *self.inner.borrow_mut().queries.entry(name.to_string()).or_default() += 1;
        let inner = self.inner.borrow();
        let shown = |s: &FakeService| {
            let mut config = s.config.clone();
            if inner.hide_dependencies {
                config.dependencies.clear();
            }
            let pid = if inner.wine_stop_quirks && s.state == RunState::StopPending { None } else { s.pid };
            ServiceStatus { config, state: s.state, pid, marked: s.marked }
        };
        Ok(inner.services.get(name).map(shown))
    }

    fn create_service(&mut self, config: &ServiceConfig) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        match inner.services.get(&config.name) {
            Some(s) if s.marked_for_deletion => return err(1072, "the service is marked for deletion"),
            Some(_) => return err(1073, "the service exists"),
            None => {}
        }
        let (stop, holds) = inner.behaviours.get(&config.name).cloned().unwrap_or((StopBehaviour::Immediate, vec![]));
        let service = FakeService {
            config: config.clone(),
            state: RunState::Stopped,
            pid: None,
            stop,
            stop_requested_at: None,
            marked_for_deletion: false,
            marked: true,
            holds,
        };
        inner.services.insert(config.name.clone(), service);
        inner.events.push(Event::Created(config.name.clone()));
        Ok(())
    }

    fn mark_service(&mut self, name: &str) -> SysResult<()> {
        match self.inner.borrow_mut().services.get_mut(name) {
            Some(s) => {
                s.marked = true;
                Ok(())
            }
            None => err(1060, "no such service"),
        }
    }

    fn update_service(&mut self, config: &ServiceConfig) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        match inner.services.get_mut(&config.name) {
            None => return err(1060, "no such service"),
            Some(s) if s.marked_for_deletion => return err(1072, "the service is marked for deletion"),
            Some(s) => s.config = config.clone(),
        }
        inner.events.push(Event::Updated(config.name.clone()));
        Ok(())
    }

    fn delete_service(&mut self, name: &str) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        let running = match inner.services.get_mut(name) {
            None => return err(1060, "no such service"),
            Some(s) if s.marked_for_deletion => return err(1072, "the service is marked for deletion"),
            Some(s) => {
                s.marked_for_deletion = true;
                s.state != RunState::Stopped
            }
        };
        if !running {
            inner.services.remove(name);
        }
        inner.events.push(Event::Deleted(name.into()));
        Ok(())
    }

    fn start_service(&mut self, name: &str) -> SysResult<()> {
        let exe = {
            let inner = self.inner.borrow();
            match inner.services.get(name) {
                None => return err(1060, "no such service"),
                Some(s) if s.marked_for_deletion => return err(1072, "the service is marked for deletion"),
                // Wine starts a service whose process is gone, whatever state it still reports.
                Some(s) if s.state != RunState::Stopped && !(inner.wine_stop_quirks && s.pid.is_none()) => {
                    return err(1056, "the service is already running");
                }
                Some(s) => executable(&s.config.command),
            }
        };
        if !exe.as_ref().is_some_and(|e| self.exists(e)) {
            return err(2, format!("the service's executable {exe:?} is not there"));
        }
        let mut inner = self.inner.borrow_mut();
        let deps = inner.services.get(name).map(|s| s.config.dependencies.clone()).unwrap_or_default();
        let deps_not_running =
            deps.into_iter().filter(|d| inner.services.get(d).is_none_or(|s| s.state != RunState::Running)).collect();
        inner.next_pid += 1;
        let pid = inner.next_pid;
        if let Some(s) = inner.services.get_mut(name) {
            (s.state, s.pid) = (RunState::Running, Some(pid));
        }
        inner.events.push(Event::Started { name: name.into(), deps_not_running });
        drop(inner);
        if name == wmrender_contract::paths::AGENT_SERVICE {
            self.record_agent_service(pid);
        }
        Ok(())
    }

    fn stop_service(&mut self, name: &str) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        let behaviour = match inner.services.get(name) {
            None => return err(1060, "no such service"),
            Some(s) if s.state == RunState::Stopped => return err(1062, "the service is not running"),
            Some(s) => s.stop,
        };
        let dependent_running = inner
            .services
            .iter()
            .any(|(_, s)| s.state != RunState::Stopped && s.config.dependencies.iter().any(|d| d == name));
        if dependent_running {
            return err(1051, "a stop request was sent to a service that other running services depend on");
        }
        inner.events.push(Event::StopRequested(name.into()));
        let now = inner.clock;
        match behaviour {
            StopBehaviour::Immediate => inner.finish_stop(name),
            StopBehaviour::After(_) => {
                if let Some(s) = inner.services.get_mut(name) {
                    (s.state, s.stop_requested_at) = (RunState::StopPending, Some(now));
                }
            }
            StopBehaviour::Never => {
                // It acknowledges the request and never stops (the Wine rig's stalled fake does so).
                if inner.wine_stop_quirks
                    && let Some(s) = inner.services.get_mut(name)
                {
                    s.state = RunState::StopPending;
                }
            }
        }
        Ok(())
    }

    fn kill_process(&mut self, pid: u32) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        if inner.processes.remove(&pid).is_some() {
            inner.events.push(Event::Killed(format!("process {pid}")));
            return Ok(());
        }
        let Some(name) = inner.services.iter().find(|(_, s)| s.pid == Some(pid)).map(|(n, _)| n.clone()) else {
            return err(87, format!("no process {pid}"));
        };
        inner.events.push(Event::Killed(name.clone()));
        let quirk = inner.wine_stop_quirks;
        match inner.services.get_mut(&name) {
            // Wine: the process is gone, the state stays stop-pending.
            Some(s) if quirk && s.state == RunState::StopPending => s.pid = None,
            _ => inner.finish_stop(&name),
        }
        Ok(())
    }

    fn process_alive(&self, pid: u32) -> bool {
        let inner = self.inner.borrow();
        inner.services.values().any(|s| s.pid == Some(pid)) || inner.processes.contains_key(&pid)
    }

    fn processes_running(&self, programs: &[NodePath]) -> SysResult<Vec<(u32, NodePath)>> {
        let inner = self.inner.borrow();
        let wanted = |p: &NodePath| programs.iter().any(|w| w.as_str().eq_ignore_ascii_case(p.as_str()));
        let mut out: Vec<(u32, NodePath)> =
            inner.processes.iter().filter(|(_, p)| wanted(p)).map(|(pid, p)| (*pid, p.clone())).collect();
        for s in inner.services.values().filter(|s| s.state != RunState::Stopped) {
            if let (Some(pid), Some(exe)) = (s.pid, executable(&s.config.command))
                && wanted(&exe)
            {
                out.push((pid, exe));
            }
        }
        Ok(out)
    }

    fn current_process(&self) -> (u32, PathBuf) {
        let inner = self.inner.borrow();
        (inner.current.0, self.local(&inner.current.1))
    }

    fn machine_env(&self, name: &str) -> SysResult<Option<String>> {
        Ok(self.inner.borrow().env.get(name).cloned())
    }

    fn set_machine_env(&mut self, name: &str, value: Option<&str>) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        match value {
            Some(v) => inner.env.insert(name.into(), v.into()),
            None => inner.env.remove(name),
        };
        inner.events.push(Event::Env { name: name.into(), value: value.map(String::from) });
        Ok(())
    }

    fn run_script(&mut self, script: &NodePath, args: &[String]) -> SysResult<ScriptRun> {
        let mut inner = self.inner.borrow_mut();
        inner.events.push(Event::Script { script: script.clone(), args: args.to_vec() });
        let queue = inner.scripts.entry(script.clone()).or_default();
        let run = if queue.len() > 1 { queue.pop_front() } else { queue.front().cloned() };
        Ok(run.unwrap_or(ScriptRun { exit_code: 0, stdout: String::new(), stderr: String::new() }))
    }

    fn dns_host_name(&self, fully_qualified: bool) -> SysResult<String> {
        let inner = self.inner.borrow();
        Ok(if fully_qualified { inner.fqdn.clone() } else { inner.dns.clone() })
    }

    fn default_route_ipv4(&self) -> SysResult<Option<Ipv4Addr>> {
        Ok(self.inner.borrow().ip)
    }

    fn boot_id(&self) -> SysResult<String> {
        Ok(format!("boot-{}", self.inner.borrow().boot))
    }

    fn root_certificates(&self) -> SysResult<Vec<Vec<u8>>> {
        self.inner.borrow_mut().root_reads += 1;
        Ok(self.inner.borrow().root_store.clone())
    }

    fn add_root_certificate(&mut self, der: &[u8]) -> SysResult<()> {
        let mut inner = self.inner.borrow_mut();
        if !wmrender_contract::ca_bundle::is_der_certificate(der) {
            return Err(SysError("ASN1 bad tag value met (CRYPT_E_ASN1_BADTAG 0x8009310b)".into()));
        }
        if inner.root_store.iter().any(|c| c == der) {
            return Err(SysError("the object or property already exists (CRYPT_E_EXISTS 0x80092005)".into()));
        }
        inner.root_store.push(der.to_vec());
        inner.events.push(Event::RootAdded(wmrender_contract::sha256_hex(der)));
        Ok(())
    }

    fn remove_root_certificate(&mut self, sha256: &str) -> SysResult<bool> {
        let mut inner = self.inner.borrow_mut();
        let before = inner.root_store.len();
        inner.root_store.retain(|c| wmrender_contract::sha256_hex(c) != sha256);
        let removed = inner.root_store.len() != before;
        if removed {
            inner.events.push(Event::RootRemoved(sha256.into()));
        }
        Ok(removed)
    }

    fn replace_file(&mut self, from: &NodePath, to: &NodePath) -> SysResult<()> {
        if let Some(holder) = self.inner.borrow().holder_of(to) {
            return err(32, format!("{to} is in use by service `{holder}`"));
        }
        std::fs::rename(self.local(from), self.local(to)).map_err(|e| SysError(e.to_string()))?;
        self.inner.borrow_mut().events.push(Event::Replaced { from: from.clone(), to: to.clone() });
        Ok(())
    }

    fn remove_file(&mut self, path: &NodePath) -> SysResult<()> {
        if let Some(holder) = self.inner.borrow().holder_of(path) {
            return err(32, format!("{path} is in use by {holder}"));
        }
        std::fs::remove_file(self.local(path)).map_err(|e| SysError(e.to_string()))
    }

    fn sleep(&self, d: Duration) {
        let mut inner = self.inner.borrow_mut();
        inner.clock += d;
        let now = inner.clock;
        let done: Vec<String> = inner
            .services
            .iter()
            .filter(|(_, s)| matches!((s.stop, s.stop_requested_at), (StopBehaviour::After(after), Some(at)) if at + after <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in done {
            inner.finish_stop(&name);
        }
    }
}
