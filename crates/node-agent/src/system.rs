//! Everything the agent asks of Windows, behind one trait: the Service Control Manager, machine-level environment
//! variables, the LocalMachine Root certificate store, processes, PowerShell steps and the node's identity. Files go through the real file system under a
//! root (`C:\` on Windows; a folder standing for it in tests), so only what Linux cannot do is faked.
//!
//! Implementations: `windows::WindowsSystem` (the real one, built for x86_64-pc-windows-gnu) and `fake::FakeSystem`
//! (unit tests on Linux; it enforces the SCM rules the engine relies on).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;
use wmrender_contract::NodePath;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SysError(pub String);

pub type SysResult<T> = Result<T, SysError>;

/// A service's state as the SCM reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Stopped,
    StartPending,
    StopPending,
    Running,
    /// Paused, continue pending and the like: treated as running for convergence.
    Other,
}

/// A service's configuration as the agent sets it and reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceConfig {
    pub name: String,
    /// The full command line (`BinaryPathName`).
    pub command: String,
    pub description: String,
    pub dependencies: Vec<String>,
    /// Automatic start at boot.
    pub automatic: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceStatus {
    pub config: ServiceConfig,
    pub state: RunState,
    /// The process id while the service runs.
    pub pid: Option<u32>,
    /// The service carries wmrender's mark (a value the agent writes on the services it creates or adopts): with
    /// the agent's own record, what allows it to delete a service.
    pub marked: bool,
}

/// A service's state and process, without its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunStatus {
    pub state: RunState,
    /// The process id while the service runs.
    pub pid: Option<u32>,
}

/// What a step script printed and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptRun {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Where the node's files are: what reading and writing them needs, and all a pull needs.
pub trait Files {
    /// The local folder that stands for `C:\` (on Windows, `C:\` itself).
    fn root(&self) -> PathBuf;

    /// The local path of a node path.
    fn local(&self, path: &NodePath) -> PathBuf {
        let mut p = self.root();
        for c in path.components() {
            p.push(c);
        }
        p
    }

    /// Removes the file at a node path; one that is not there counts as removed. The error names the file.
    fn remove_if_there(&self, path: &NodePath) -> Result<(), String> {
        match std::fs::remove_file(self.local(path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("cannot remove {path}: {e}")),
            _ => Ok(()),
        }
    }
}

/// A folder that stands for `C:\`: a node's files without the rest of the system (tests, tools).
pub struct Folder(pub PathBuf);

impl Files for Folder {
    fn root(&self) -> PathBuf {
        self.0.clone()
    }
}

pub trait System: Files {
    /// `None` when no service of that name exists.
    fn service(&self, name: &str) -> SysResult<Option<ServiceStatus>>;
    /// A service's state and process alone, `None` when no service of that name exists: what most questions of a
    /// pass need, and cheaper to ask than [`System::service`], which reads the configuration too.
    fn run_status(&self, name: &str) -> SysResult<Option<RunStatus>> {
        Ok(self.service(name)?.map(|s| RunStatus { state: s.state, pid: s.pid }))
    }
    /// Creates a service (own process, LocalSystem) with this configuration and the recovery actions that restart
    /// it when its process dies, and marks it as wmrender's.
    fn create_service(&mut self, config: &ServiceConfig) -> SysResult<()>;
    /// Marks an existing service as wmrender's (one the agent adopts).
    fn mark_service(&mut self, name: &str) -> SysResult<()>;
    /// Changes an existing service's command, description, dependencies and start type, and sets the recovery
    /// actions again.
    fn update_service(&mut self, config: &ServiceConfig) -> SysResult<()>;
    /// Marks a stopped service for deletion.
    fn delete_service(&mut self, name: &str) -> SysResult<()>;
    /// Asks the SCM to start a service; does not wait for it to run.
    fn start_service(&mut self, name: &str) -> SysResult<()>;
    /// Sends a stop request; does not wait.
    fn stop_service(&mut self, name: &str) -> SysResult<()>;
    /// Ends a process at once (a service that did not stop within the bounded wait).
    fn kill_process(&mut self, pid: u32) -> SysResult<()>;
    /// Whether a process still runs. Wine's SCM goes on reporting a service whose process was killed as running
    /// (or stop-pending); what counts is the process.
    fn process_alive(&self, pid: u32) -> bool;
    /// The processes running one of these programs (compared without case), as (pid, program).
    fn processes_running(&self, programs: &[NodePath]) -> SysResult<Vec<(u32, NodePath)>>;
    /// This process: its id and the program it runs.
    fn current_process(&self) -> (u32, PathBuf);

    /// A machine-level environment variable (HKLM), `None` when unset.
    fn machine_env(&self, name: &str) -> SysResult<Option<String>>;
    /// Sets (`Some`) or removes (`None`) a machine-level environment variable.
    fn set_machine_env(&mut self, name: &str, value: Option<&str>) -> SysResult<()>;

    /// Runs a rendered PowerShell script with literal arguments (no shell in between).
    fn run_script(&mut self, script: &NodePath, args: &[String]) -> SysResult<ScriptRun>;

    /// The DNS host name, or with `fully_qualified` host name and primary DNS suffix (not the NetBIOS name).
    fn dns_host_name(&self, fully_qualified: bool) -> SysResult<String>;
    /// The IPv4 address of the interface that holds the default route with the lowest metric.
    fn default_route_ipv4(&self) -> SysResult<Option<Ipv4Addr>>;
    /// Something that changes at every boot and only then (the boot time, to the second).
    fn boot_id(&self) -> SysResult<String>;

    /// The DER bytes of every certificate in the LocalMachine Root store.
    fn root_certificates(&self) -> SysResult<Vec<Vec<u8>>>;
    /// Adds a DER certificate to the LocalMachine Root store. Fails when it is already there (the store adds
    /// new certificates only) or is not a certificate.
    fn add_root_certificate(&mut self, der: &[u8]) -> SysResult<()>;
    /// Removes from the LocalMachine Root store the certificate whose DER has this sha256 (lower-case hex); false
    /// when no such certificate is there.
    fn remove_root_certificate(&mut self, sha256: &str) -> SysResult<bool>;

    /// Moves `from` over `to`, replacing it. Windows refuses to replace (or delete) the executable of a running
    /// process, but lets it be renamed: the swap of staged binaries relies on both rules.
    fn replace_file(&mut self, from: &NodePath, to: &NodePath) -> SysResult<()> {
        std::fs::rename(self.local(from), self.local(to))
            .map_err(|e| SysError(format!("cannot move {from} to {to}: {e}")))
    }

    /// Deletes a file. Windows refuses to delete the executable of a running process.
    fn remove_file(&mut self, path: &NodePath) -> SysResult<()> {
        std::fs::remove_file(self.local(path)).map_err(|e| SysError(format!("cannot remove {path}: {e}")))
    }

    fn sleep(&self, d: Duration);
}
