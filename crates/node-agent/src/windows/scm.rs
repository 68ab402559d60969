//! The Service Control Manager. Services are created and changed with `windows-service`'s `ServiceInfo`, then
//! given their command line verbatim with `ChangeServiceConfigW` (the crate would quote and escape it as one
//! program path; the rendered command is already a complete Windows command line), their description and
//! recovery actions (restart after 5 s, 10 s, 30 s; the count resets after 5 minutes without a failure).

use super::{host, registry};
use crate::system::{RunState, RunStatus, ServiceConfig, ServiceStatus, SysError, SysResult};
use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::os::windows::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;
use windows_service::service::{
    Service, ServiceAccess, ServiceAction, ServiceActionType, ServiceDependency, ServiceErrorControl,
    ServiceFailureActions, ServiceFailureResetPeriod, ServiceInfo, ServiceStartType, ServiceState, ServiceType,
};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
use windows_sys::Win32::System::Services::{ChangeServiceConfigW, SERVICE_NO_CHANGE};

const ERROR_SERVICE_DOES_NOT_EXIST: i32 = 1060;
const ERROR_SERVICE_MARKED_FOR_DELETE: i32 = 1072;
const ERROR_INVALID_LEVEL: i32 = 124;
/// A start request the SCM could not hand on at the moment: asked once more after [`START_AGAIN_AFTER`]. Wine's
/// services.exe answers ERROR_INTERNAL_ERROR when it fails to reach a starting service's control pipe under load;
/// Windows' SCM answers ERROR_SERVICE_DATABASE_LOCKED while another change holds its database.
const TRANSIENT_START_ERRORS: [i32; 2] = [ERROR_INTERNAL_ERROR, 1055];
/// What Wine answers, now and then on a busy machine, to a service start and to CreateProcess ([`super::script`]).
pub(super) const ERROR_INTERNAL_ERROR: i32 = 1359;
pub(super) const START_AGAIN_AFTER: Duration = Duration::from_secs(1);

fn err(what: String, e: windows_service::Error) -> SysError {
    SysError(format!("{what}: {}", said(e).0))
}

/// The error alone, for a request whose caller names the service and what it asked (cannot start service `x`),
/// so that it is not said twice.
fn said(e: windows_service::Error) -> SysError {
    match e {
        windows_service::Error::Winapi(io) => SysError(io.to_string()),
        other => SysError(other.to_string()),
    }
}

/// The Windows error code under a windows-service error, if there is one.
fn os_error(e: &windows_service::Error) -> Option<i32> {
    match e {
        windows_service::Error::Winapi(io) => io.raw_os_error(),
        _ => None,
    }
}

fn no_such_service(e: &windows_service::Error) -> bool {
    os_error(e) == Some(ERROR_SERVICE_DOES_NOT_EXIST)
}

/// One connection to the SCM for the life of a [`super::WindowsSystem`]. Each connection is an RPC binding to
/// `services.exe` and costs more than the query it serves, and a pass asks about every service several times: under
/// Wine, connecting per call made up most of a pass's time with the SCM. A connection that failed a call is dropped,
/// and the next call connects again.
#[derive(Default)]
pub struct Connection(RefCell<Option<ServiceManager>>);

impl Connection {
    /// Calls `f` with the connection (connecting first when there is none), and keeps the connection when `f`
    /// succeeded or `keep` holds for its error.
    fn with<T>(
        &self,
        f: impl FnOnce(&ServiceManager) -> windows_service::Result<T>,
        keep: impl FnOnce(&windows_service::Error) -> bool,
    ) -> SysResult<windows_service::Result<T>> {
        let mut slot = self.0.borrow_mut();
        let manager = match slot.take() {
            Some(m) => m,
            None => ServiceManager::local_computer(
                None::<&str>,
                ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE,
            )
            .map_err(|e| err("cannot reach the Service Control Manager".into(), e))?,
        };
        let result = f(&manager);
        if result.as_ref().err().is_none_or(keep) {
            *slot = Some(manager);
        }
        Ok(result)
    }

    /// `None` when there is no such service.
    fn open(&self, name: &str, access: ServiceAccess) -> SysResult<Option<Service>> {
        match self.with(|m| m.open_service(name, access), no_such_service)? {
            Ok(s) => Ok(Some(s)),
            Err(e) if no_such_service(&e) => Ok(None),
            Err(e) => Err(err(format!("cannot open service `{name}`"), e)),
        }
    }

    fn open_existing(&self, name: &str, access: ServiceAccess) -> SysResult<Service> {
        self.open(name, access)?.ok_or_else(|| SysError(format!("service `{name}` does not exist")))
    }

    pub fn query(&self, name: &str) -> SysResult<Option<ServiceStatus>> {
        let Some(svc) = self.open(name, ServiceAccess::QUERY_CONFIG | ServiceAccess::QUERY_STATUS)? else {
            return Ok(None);
        };
        let config = svc.query_config().map_err(|e| err(format!("cannot read the configuration of `{name}`"), e))?;
        let run = run_status(&svc, name)?;
        let stored = registry::service_key(name)?;
        Ok(Some(ServiceStatus {
            config: ServiceConfig {
                name: name.into(),
                command: config.executable_path.to_string_lossy().into_owned(),
                description: stored.description,
                dependencies: stored.dependencies,
                automatic: config.start_type == ServiceStartType::AutoStart,
            },
            state: run.state,
            pid: run.pid,
            marked: stored.marked,
        }))
    }

    /// The state and process alone: no configuration, no registry.
    pub fn run_status(&self, name: &str) -> SysResult<Option<RunStatus>> {
        match self.open(name, ServiceAccess::QUERY_STATUS)? {
            Some(svc) => run_status(&svc, name).map(Some),
            None => Ok(None),
        }
    }

    pub fn create(&self, config: &ServiceConfig) -> SysResult<()> {
        let svc = self.with(|m| m.create_service(&info(config), CHANGE), |_| false)?.map_err(said)?;
        registry::mark_service(&config.name)?;
        finish_config(&svc, config)
    }

    pub fn update(&self, config: &ServiceConfig) -> SysResult<()> {
        let svc = self.open_existing(&config.name, CHANGE)?;
        svc.change_config(&info(config)).map_err(said)?;
        finish_config(&svc, config)
    }

    pub fn delete(&self, name: &str) -> SysResult<()> {
        match self.open_existing(name, ServiceAccess::DELETE)?.delete() {
            Ok(()) => Ok(()),
            // Deleted before, and still open somewhere: it goes when the last handle closes, as this delete would.
            Err(e) if os_error(&e) == Some(ERROR_SERVICE_MARKED_FOR_DELETE) => Ok(()),
            Err(e) => Err(said(e)),
        }
    }

    pub fn start(&self, name: &str) -> SysResult<()> {
        let service = self.open_existing(name, ServiceAccess::START)?;
        match service.start::<&OsStr>(&[]) {
            Err(e) if os_error(&e).is_some_and(|code| TRANSIENT_START_ERRORS.contains(&code)) => {
                std::thread::sleep(START_AGAIN_AFTER);
                service.start::<&OsStr>(&[])
            }
            other => other,
        }
        .map_err(said)
    }

    pub fn stop(&self, name: &str) -> SysResult<()> {
        self.open_existing(name, ServiceAccess::STOP)?.stop().map(|_| ()).map_err(said)
    }
}

fn run_status(svc: &Service, name: &str) -> SysResult<RunStatus> {
    let status = svc.query_status().map_err(|e| err(format!("cannot read the state of `{name}`"), e))?;
    let mut state = match status.current_state {
        ServiceState::Stopped => RunState::Stopped,
        ServiceState::StartPending => RunState::StartPending,
        ServiceState::StopPending => RunState::StopPending,
        ServiceState::Running => RunState::Running,
        _ => RunState::Other,
    };
    let mut pid = status.process_id.filter(|p| *p != 0);
    // Wine's SCM goes on reporting a service whose process was killed as running, with the dead pid (Windows
    // reports it stopped, and Wine starts it again on request): a service without a live process is stopped.
    if let Some(p) = pid
        && state != RunState::Stopped
        && !host::process_alive(p)
    {
        (state, pid) = (RunState::Stopped, None);
    }
    Ok(RunStatus { state, pid })
}

fn info(config: &ServiceConfig) -> ServiceInfo {
    ServiceInfo {
        name: OsString::from(&config.name),
        display_name: OsString::from(&config.name),
        service_type: ServiceType::OWN_PROCESS,
        start_type: if config.automatic { ServiceStartType::AutoStart } else { ServiceStartType::OnDemand },
        error_control: ServiceErrorControl::Normal,
        // Replaced by the verbatim command line right after.
        executable_path: PathBuf::from(&config.command),
        launch_arguments: vec![],
        dependencies: config.dependencies.iter().map(|d| ServiceDependency::Service(d.into())).collect(),
        account_name: None,
        account_password: None,
    }
}

const CHANGE: ServiceAccess =
    ServiceAccess::CHANGE_CONFIG.union(ServiceAccess::QUERY_CONFIG).union(ServiceAccess::START);

fn finish_config(svc: &Service, config: &ServiceConfig) -> SysResult<()> {
    let name = &config.name;
    set_command_line(svc, &config.command, &config.dependencies)
        .map_err(|e| SysError(format!("cannot set the command of `{name}`: {e}")))?;
    svc.set_description(&config.description).map_err(|e| err(format!("cannot set the description of `{name}`"), e))?;
    let restart = |secs| ServiceAction { action_type: ServiceActionType::Restart, delay: Duration::from_secs(secs) };
    let actions = ServiceFailureActions {
        reset_period: ServiceFailureResetPeriod::After(Duration::from_secs(300)),
        reboot_msg: None,
        command: None,
        actions: Some(vec![restart(5), restart(10), restart(30)]),
    };
    // A service that stops by itself with an error is restarted too, not only one that crashes.
    let recovery =
        svc.update_failure_actions(actions).and_then(|()| svc.set_failure_actions_on_non_crash_failures(true));
    match recovery {
        Ok(()) => Ok(()),
        // Wine's SCM has no recovery actions (ChangeServiceConfig2 answers "invalid level"); the agent's loop
        // starts a service that died at its next pass instead.
        Err(e) if os_error(&e) == Some(ERROR_INVALID_LEVEL) => Ok(()),
        Err(e) => Err(err(format!("cannot set the recovery actions of `{name}`"), e)),
    }
}

/// Sets the command line verbatim, and the dependencies again in the same call: Wine's SCM reads a null
/// dependency list as "none" and would drop what `CreateService` stored (Windows keeps them; passing the list is
/// right for both). The list is double-NUL-terminated: each name ends with a NUL, and an empty name ends the list.
fn set_command_line(svc: &Service, command: &str, dependencies: &[String]) -> std::io::Result<()> {
    let wide: Vec<u16> = OsStr::new(command).encode_wide().chain(std::iter::once(0)).collect();
    let mut deps: Vec<u16> = Vec::new();
    for d in dependencies {
        deps.extend(OsStr::new(d).encode_wide());
        deps.push(0);
    }
    deps.push(0);
    if dependencies.is_empty() {
        deps.push(0);
    }
    // SAFETY: a valid service handle with SERVICE_CHANGE_CONFIG, and NUL-terminated UTF-16 strings (the
    // dependencies double-NUL-terminated) that outlive the call; null pointers leave the other settings as they are.
    let ok = unsafe {
        ChangeServiceConfigW(
            svc.raw_handle(),
            SERVICE_NO_CHANGE,
            SERVICE_NO_CHANGE,
            SERVICE_NO_CHANGE,
            wide.as_ptr(),
            std::ptr::null(),
            std::ptr::null_mut(),
            deps.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if ok == 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}
