//! `wmrender-node run` under the Service Control Manager: registers the control handler, reports running, and
//! runs the loop of run.rs until a stop or shutdown request, which ends the current wait at once.

use super::WindowsSystem;
use crate::run::{Ended, run_loop};
use crate::timing::Timing;
use std::ffi::OsString;
use std::sync::{OnceLock, mpsc};
use std::time::Duration;
use windows_service::service::{
    ServiceControl, ServiceControlAccept, ServiceExitCode, ServiceState, ServiceStatus, ServiceType,
};
use windows_service::service_control_handler::{self, ServiceControlHandlerResult};
use windows_service::{define_windows_service, service_dispatcher};
use wmrender_contract::paths::AGENT_SERVICE;

/// The SCM calls `service_main` without our arguments: the timing read in main() waits here.
static TIMING: OnceLock<Timing> = OnceLock::new();

const NOT_STARTED_BY_SCM: i32 = 1063;

define_windows_service!(ffi_service_main, service_main);

/// Why `run` could not be handed to the SCM.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(
        "`run` is started by the Service Control Manager (service `wmrender-node`); in a console use `run --foreground`"
    )]
    NotAService,
    #[error("cannot reach the Service Control Manager: {0}")]
    Scm(String),
}

/// Hands this process to the SCM; returns when the service has stopped.
pub fn dispatch(timing: Timing) -> Result<(), DispatchError> {
    let _ = TIMING.set(timing);
    service_dispatcher::start(AGENT_SERVICE, ffi_service_main).map_err(|e| match e {
        windows_service::Error::Winapi(io) if io.raw_os_error() == Some(NOT_STARTED_BY_SCM) => {
            DispatchError::NotAService
        }
        other => DispatchError::Scm(other.to_string()),
    })
}

/// What ends a wait between two passes.
enum Wake {
    /// A stop or shutdown request.
    Stop,
    /// The Node's desired bundle changed: a pass now.
    Node,
}

/// The service-specific exit code of a service that ends to hand over to a new agent: not 0, so the SCM's recovery
/// actions (restart after 5 s; set for non-crash failures too) start the new program.
const HAND_OVER: u32 = 1;

fn status(state: ServiceState, accept: ServiceControlAccept) -> ServiceStatus {
    ServiceStatus {
        service_type: ServiceType::OWN_PROCESS,
        current_state: state,
        controls_accepted: accept,
        exit_code: ServiceExitCode::Win32(0),
        checkpoint: 0,
        wait_hint: Duration::default(),
        process_id: None,
    }
}

fn service_main(_arguments: Vec<OsString>) {
    let timing = TIMING.get().cloned().unwrap_or_default();
    let (stop_tx, stop_rx) = mpsc::channel();
    let wake_tx = stop_tx.clone();
    let handler = move |control| match control {
        ServiceControl::Stop | ServiceControl::Shutdown => {
            let _ = stop_tx.send(Wake::Stop);
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
        _ => ServiceControlHandlerResult::NotImplemented,
    };
    let Ok(handle) = service_control_handler::register(AGENT_SERVICE, handler) else { return };
    let mut sys = WindowsSystem::new(timing.clone());
    // Before it reports running: whoever started it (sync's apply) reads which program runs once it runs.
    crate::agent_service::record_running(&sys);
    let accept = ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN;
    if handle.set_service_status(status(ServiceState::Running, accept)).is_err() {
        return;
    }
    // The watch on its Node: a new desired bundle ends the wait at once, as a stop request does.
    let watch = crate::node_watch::NodeWatch::of_node(&sys, move || {
        let _ = wake_tx.send(Wake::Node);
    });
    let (ended, _) = run_loop(&mut sys, &timing, Some(&watch), &mut |pause| match stop_rx.recv_timeout(pause) {
        Ok(Wake::Node) | Err(mpsc::RecvTimeoutError::Timeout) => false,
        Ok(Wake::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
    });
    let mut stopped = status(ServiceState::Stopped, ServiceControlAccept::empty());
    if ended == Ended::HandOver {
        stopped.exit_code = ServiceExitCode::ServiceSpecific(HAND_OVER);
    }
    let _ = handle.set_service_status(stopped);
}
