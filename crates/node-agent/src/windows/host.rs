//! The node's identity and processes: DNS host name, boot id, and ending a stalled service's process.

use crate::system::{SysError, SysResult};
use std::time::{SystemTime, UNIX_EPOCH};
use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::SystemInformation::{
    ComputerNamePhysicalDnsFullyQualified, ComputerNamePhysicalDnsHostname, GetComputerNameExW, GetTickCount64,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, GetProcessTimes, OpenProcess, PROCESS_NAME_WIN32, PROCESS_QUERY_LIMITED_INFORMATION,
    PROCESS_TERMINATE, QueryFullProcessImageNameW, TerminateProcess,
};
use wmrender_contract::NodePath;

pub fn dns_host_name(fully_qualified: bool) -> SysResult<String> {
    let kind = if fully_qualified { ComputerNamePhysicalDnsFullyQualified } else { ComputerNamePhysicalDnsHostname };
    let mut buf = vec![0u16; 512];
    let mut len = buf.len() as u32;
    // SAFETY: `buf` holds `len` UTF-16 units; the call writes at most that many and sets `len` to what it wrote.
    let ok = unsafe { GetComputerNameExW(kind, buf.as_mut_ptr(), &mut len) };
    if ok == 0 {
        return Err(SysError(format!("GetComputerNameExW: {}", std::io::Error::last_os_error())));
    }
    Ok(String::from_utf16_lossy(&buf[..(len as usize).min(buf.len())]))
}

pub fn kill_process(pid: u32) -> SysResult<()> {
    // SAFETY: plain Win32 calls on a handle this function opens and closes.
    unsafe {
        let h = OpenProcess(PROCESS_TERMINATE, 0, pid);
        if h.is_null() {
            return Err(SysError(format!("cannot open process {pid}: {}", std::io::Error::last_os_error())));
        }
        let ok = TerminateProcess(h, 1);
        let e = std::io::Error::last_os_error();
        CloseHandle(h);
        if ok == 0 { Err(SysError(format!("cannot end process {pid}: {e}"))) } else { Ok(()) }
    }
}

/// `GetExitCodeProcess`'s answer for a process that has not ended.
const STILL_ACTIVE: u32 = 259;
const ERROR_ACCESS_DENIED: i32 = 5;

/// Whether process `pid` runs. A process that cannot be opened for lack of rights exists; any other failure to
/// open it means there is no such process.
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: plain Win32 calls on a handle this function opens and closes.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return std::io::Error::last_os_error().raw_os_error() == Some(ERROR_ACCESS_DENIED);
        }
        let mut code = 0u32;
        let ok = GetExitCodeProcess(h, &mut code);
        CloseHandle(h);
        ok == 0 || code == STILL_ACTIVE
    }
}

/// Changes at each boot and only then. The start time of the Service Control Manager (`services.exe`, which
/// Windows starts once per boot and cannot run without) is exact; Wine restarts it at a simulated reboot while its
/// tick count keeps the Linux host's uptime. When it cannot be read, now minus the uptime, rounded to 10 s.
pub fn boot_id() -> SysResult<String> {
    if let Some(t) = scm_start_time() {
        return Ok(format!("scm-{t}"));
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    // SAFETY: no arguments.
    let uptime = unsafe { GetTickCount64() } / 1000;
    Ok(format!("uptime-{}", (now.saturating_sub(uptime) + 5) / 10 * 10))
}

fn scm_start_time() -> Option<u64> {
    let pid = process_id("services.exe")?;
    // SAFETY: plain Win32 calls on a handle this function opens and closes; FILETIMEs are plain data.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return None;
        }
        let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
        let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
        let ok = GetProcessTimes(h, &mut created, &mut exited, &mut kernel, &mut user);
        CloseHandle(h);
        let t = (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime);
        (ok != 0 && t != 0).then_some(t)
    }
}

/// The program a process runs (its full path), `None` when it cannot be opened.
fn process_image(pid: u32) -> Option<String> {
    // SAFETY: plain Win32 calls on a handle this function opens and closes, with a buffer of the size given.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return None;
        }
        let mut buf = vec![0u16; 1024];
        let mut len = buf.len() as u32;
        let ok = QueryFullProcessImageNameW(h, PROCESS_NAME_WIN32, buf.as_mut_ptr(), &mut len);
        CloseHandle(h);
        (ok != 0).then(|| String::from_utf16_lossy(&buf[..(len as usize).min(buf.len())]))
    }
}

/// Every process whose program is one of `programs` (compared without case).
pub fn processes_running(programs: &[NodePath]) -> SysResult<Vec<(u32, NodePath)>> {
    let mut out = Vec::new();
    for pid in process_ids()? {
        let Some(image) = process_image(pid) else { continue };
        if let Some(p) = programs.iter().find(|p| p.as_str().eq_ignore_ascii_case(&image)) {
            out.push((pid, p.clone()));
        }
    }
    Ok(out)
}

/// The ids of every process, from a Toolhelp snapshot.
fn process_ids() -> SysResult<Vec<u32>> {
    // SAFETY: the snapshot handle is closed before returning; the entry is plain data with its size set.
    unsafe {
        let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
        if snap == INVALID_HANDLE_VALUE {
            return Err(SysError(format!("cannot list processes: {}", std::io::Error::last_os_error())));
        }
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut ids = Vec::new();
        let mut more = Process32FirstW(snap, &mut entry) != 0;
        while more {
            ids.push(entry.th32ProcessID);
            more = Process32NextW(snap, &mut entry) != 0;
        }
        CloseHandle(snap);
        Ok(ids)
    }
}

fn process_id(exe: &str) -> Option<u32> {
    // SAFETY: the snapshot handle is closed before returning; the entry is plain data with its size set.
    unsafe {
        let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
        if snap == INVALID_HANDLE_VALUE {
            return None;
        }
        let mut entry: PROCESSENTRY32W = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
        let mut found = None;
        let mut more = Process32FirstW(snap, &mut entry) != 0;
        while more {
            let len = entry.szExeFile.iter().position(|c| *c == 0).unwrap_or(entry.szExeFile.len());
            if String::from_utf16_lossy(&entry.szExeFile[..len]).eq_ignore_ascii_case(exe) {
                found = Some(entry.th32ProcessID);
                break;
            }
            more = Process32NextW(snap, &mut entry) != 0;
        }
        CloseHandle(snap);
        found
    }
}
