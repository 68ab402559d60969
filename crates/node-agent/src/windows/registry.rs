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

/// A service's `Description` and `DependOnService` as the SCM stored them. Read here because Wine's
/// `QueryServiceConfig` returns no dependencies although it stores them.
pub fn service_description_and_dependencies(name: &str) -> SysResult<(String, Vec<String>)> {
    let key = RegKey::predef(HKEY_LOCAL_MACHINE)
        .open_subkey_with_flags(format!(r"{SERVICES_KEY}\{name}"), KEY_READ)
        .map_err(|e| err(format!("cannot open the registry key of service `{name}`"), e))?;
    let description = key.get_value::<String, _>("Description").unwrap_or_default();
    let dependencies: Vec<String> = key.get_value::<Vec<String>, _>("DependOnService").unwrap_or_default();
    Ok((description, dependencies.into_iter().filter(|d| !d.is_empty()).collect()))
}
