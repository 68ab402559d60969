//! The real Windows system: the SCM through the `windows-service` crate (and `ChangeServiceConfigW` for the raw
//! command line), machine environment variables in the registry (`winreg`), the LocalMachine Root store (crypt32), processes, node identity and routes
//! through Win32 (`windows-sys`), and PowerShell steps through `powershell.exe -File`.

mod certstore;
mod host;
mod net;
mod registry;
mod scm;
mod script;
pub mod service;

use crate::system::{Files, RunStatus, ScriptRun, ServiceConfig, ServiceStatus, SysResult, System};
use crate::timing::Timing;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;
use wmrender_contract::NodePath;

pub struct WindowsSystem {
    timing: Timing,
    scm: scm::Connection,
}

impl WindowsSystem {
    pub fn new(timing: Timing) -> WindowsSystem {
        WindowsSystem { timing, scm: scm::Connection::default() }
    }
}

impl Files for WindowsSystem {
    fn root(&self) -> PathBuf {
        PathBuf::from(r"C:\")
    }
}

impl System for WindowsSystem {
    fn service(&self, name: &str) -> SysResult<Option<ServiceStatus>> {
        self.scm.query(name)
    }

    fn run_status(&self, name: &str) -> SysResult<Option<RunStatus>> {
        self.scm.run_status(name)
    }

    fn create_service(&mut self, config: &ServiceConfig) -> SysResult<()> {
        self.scm.create(config)
    }

    fn update_service(&mut self, config: &ServiceConfig) -> SysResult<()> {
        self.scm.update(config)
    }

    fn mark_service(&mut self, name: &str) -> SysResult<()> {
        registry::mark_service(name)
    }

    fn delete_service(&mut self, name: &str) -> SysResult<()> {
        self.scm.delete(name)
    }

    fn start_service(&mut self, name: &str) -> SysResult<()> {
        self.scm.start(name)
    }

    fn stop_service(&mut self, name: &str) -> SysResult<()> {
        self.scm.stop(name)
    }

    fn kill_process(&mut self, pid: u32) -> SysResult<()> {
        host::kill_process(pid)
    }

    fn process_alive(&self, pid: u32) -> bool {
        host::process_alive(pid)
    }

    fn processes_running(&self, programs: &[NodePath]) -> SysResult<Vec<(u32, NodePath)>> {
        host::processes_running(programs)
    }

    fn current_process(&self) -> (u32, PathBuf) {
        (
            std::process::id(),
            std::env::current_exe()
                .unwrap_or_else(|_| self.local(&NodePath::known(wmrender_contract::paths::AGENT_EXE))),
        )
    }

    fn machine_env(&self, name: &str) -> SysResult<Option<String>> {
        registry::machine_env(name)
    }

    fn set_machine_env(&mut self, name: &str, value: Option<&str>) -> SysResult<()> {
        registry::set_machine_env(name, value)
    }

    fn run_script(&mut self, script: &NodePath, args: &[String]) -> SysResult<ScriptRun> {
        script::run(&self.local(script), args, self.timing.step_timeout)
    }

    fn dns_host_name(&self, fully_qualified: bool) -> SysResult<String> {
        host::dns_host_name(fully_qualified)
    }

    fn default_route_ipv4(&self) -> SysResult<Option<Ipv4Addr>> {
        net::default_route_ipv4()
    }

    fn boot_id(&self) -> SysResult<String> {
        host::boot_id()
    }

    fn root_certificates(&self) -> SysResult<Vec<Vec<u8>>> {
        certstore::certificates()
    }

    fn add_root_certificate(&mut self, der: &[u8]) -> SysResult<()> {
        certstore::add(der)
    }

    fn remove_root_certificate(&mut self, sha256: &str) -> SysResult<bool> {
        certstore::remove(sha256)
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}
