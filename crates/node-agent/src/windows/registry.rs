//! The registry: machine-level environment variables (REG_SZ under the Session Manager's Environment key, where
//! services read them at their next start after a reboot) and what the SCM stores per service.

use crate::system::{SysError, SysResult};
use std::io::ErrorKind;
use winreg::RegKey;
use winreg::enums::{HKEY_LOCAL_MACHINE, KEY_READ, KEY_SET_VALUE};

const ENV_KEY: &str = r"SYSTEM\CurrentControlSet\Control\Session Manager\Environment";
const SERVICES_KEY: &str = r"SYSTEM\CurrentControlSet\Services";

fn err(what: String, e: std::io::Error) -> SysError {
    SysError(format!("{what}: {e}"))
}

pub fn machine_env(name: &str) -> SysResult<Option<String>> {
    let key = RegKey::predef(HKEY_LOCAL_MACHINE)
        .open_subkey_with_flags(ENV_KEY, KEY_READ)
        .map_err(|e| err(format!("cannot open HKLM\\{ENV_KEY}"), e))?;
    match key.get_value::<String, _>(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(err(format!("cannot read {name}"), e)),
    }
}

pub fn set_machine_env(name: &str, value: Option<&str>) -> SysResult<()> {
    let key = RegKey::predef(HKEY_LOCAL_MACHINE)
        .open_subkey_with_flags(ENV_KEY, KEY_READ | KEY_SET_VALUE)
        .map_err(|e| err(format!("cannot open HKLM\\{ENV_KEY}"), e))?;
    match value {
        Some(v) => key.set_value(name, &v).map_err(|e| err(format!("cannot set {name}"), e)),
        None => match key.delete_value(name) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err(format!("cannot remove {name}"), e)),
        },
    }
}

/// wmrender's mark on a service: a value in the service's registry key, beside what the SCM stores. Only an
/// administrator can write there, as only an administrator can create services.
const MARK_VALUE: &str = "WmrenderManaged";
const MARK: &str = "wmrender-node";

/// What the registry holds of a service besides what `QueryServiceConfig` returns.
pub struct ServiceKey {
    pub description: String,
    pub dependencies: Vec<String>,
    /// wmrender's mark.
    pub marked: bool,
}

/// A service's `Description`, `DependOnService` and wmrender's mark as stored. Read here because Wine's
/// `QueryServiceConfig` returns no dependencies although it stores them.
pub fn service_key(name: &str) -> SysResult<ServiceKey> {
    let key = RegKey::predef(HKEY_LOCAL_MACHINE)
        .open_subkey_with_flags(format!(r"{SERVICES_KEY}\{name}"), KEY_READ)
        .map_err(|e| err(format!("cannot open the registry key of service `{name}`"), e))?;
    let description = key.get_value::<String, _>("Description").unwrap_or_default();
    let dependencies: Vec<String> = key.get_value::<Vec<String>, _>("DependOnService").unwrap_or_default();
    let marked = key.get_value::<String, _>(MARK_VALUE).is_ok_and(|v| v == MARK);
    Ok(ServiceKey { description, dependencies: dependencies.into_iter().filter(|d| !d.is_empty()).collect(), marked })
}

/// Puts wmrender's mark on a service.
pub fn mark_service(name: &str) -> SysResult<()> {
    let key = RegKey::predef(HKEY_LOCAL_MACHINE)
        .open_subkey_with_flags(format!(r"{SERVICES_KEY}\{name}"), KEY_READ | KEY_SET_VALUE)
        .map_err(|e| err(format!("cannot open the registry key of service `{name}`"), e))?;
    key.set_value(MARK_VALUE, &MARK).map_err(|e| err(format!("cannot mark service `{name}` as wmrender's"), e))
}
