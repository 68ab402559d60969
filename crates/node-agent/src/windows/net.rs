//! NODE_IP: the IPv4 address of the interface that holds the default route with the lowest metric (what WMCO's
//! `Get-NetRoute -DestinationPrefix 0.0.0.0/0 | Get-NetIPAddress` finds), through the IP Helper API.

use crate::system::{SysError, SysResult};
use std::net::Ipv4Addr;
use windows_sys::Win32::NetworkManagement::IpHelper::{
    FreeMibTable, GetIpForwardTable2, GetUnicastIpAddressTable, MIB_IPFORWARD_TABLE2, MIB_UNICASTIPADDRESS_TABLE,
};
use windows_sys::Win32::Networking::WinSock::AF_INET;

pub fn default_route_ipv4() -> SysResult<Option<Ipv4Addr>> {
    let Some(interface) = default_route_interface()? else { return Ok(None) };
    let mut table: *mut MIB_UNICASTIPADDRESS_TABLE = std::ptr::null_mut();
    // SAFETY: the API allocates the table, which is read within its NumEntries and freed with FreeMibTable.
    unsafe {
        let rc = GetUnicastIpAddressTable(AF_INET, &mut table);
        if rc != 0 || table.is_null() {
            return Err(SysError(format!("GetUnicastIpAddressTable failed (error {rc})")));
        }
        let rows = std::slice::from_raw_parts((*table).Table.as_ptr(), (*table).NumEntries as usize);
        let mut found = None;
        for row in rows.iter().filter(|r| r.InterfaceIndex == interface && r.Address.si_family == AF_INET) {
            let ip = Ipv4Addr::from(row.Address.Ipv4.sin_addr.S_un.S_addr.to_ne_bytes());
            // An automatic private address (169.254/16) is what Windows falls back to without DHCP.
            if found.is_none() || found.is_some_and(|f: Ipv4Addr| f.is_link_local()) {
                found = Some(ip);
            }
        }
        FreeMibTable(table as *const _);
        Ok(found)
    }
}

fn default_route_interface() -> SysResult<Option<u32>> {
    let mut table: *mut MIB_IPFORWARD_TABLE2 = std::ptr::null_mut();
    // SAFETY: as above.
    unsafe {
        let rc = GetIpForwardTable2(AF_INET, &mut table);
        if rc != 0 || table.is_null() {
            return Err(SysError(format!("GetIpForwardTable2 failed (error {rc})")));
        }
        let rows = std::slice::from_raw_parts((*table).Table.as_ptr(), (*table).NumEntries as usize);
        let best = rows
            .iter()
            .filter(|r| {
                r.DestinationPrefix.PrefixLength == 0
                    && r.DestinationPrefix.Prefix.si_family == AF_INET
                    && r.DestinationPrefix.Prefix.Ipv4.sin_addr.S_un.S_addr == 0
            })
            .min_by_key(|r| r.Metric)
            .map(|r| r.InterfaceIndex);
        FreeMibTable(table as *const _);
        Ok(best)
    }
}
