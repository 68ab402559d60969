//! BYOH hosts: what WMCO's `windows-instances` parser accepts (IPv4 or a DNS name, `username=<user>`), and the
//! support matrix for the hosts' Windows versions.

use super::matrix::support;
use super::names;
use super::{Decoded, is_dns1123_subdomain};
use crate::diagnostics::Diagnostics;
use crate::inputs::schema::ClusterInputs;
use std::collections::{BTreeMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

pub fn check(inputs: &ClusterInputs, decoded: &Decoded, d: &mut Diagnostics) {
    // Without a platform there is no row of the support matrix to check versions against.
    let row = decoded.get(&inputs.spec.platform).map(|p| support(p.kind()));
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    // A fleet's hosts mostly share one user name: each name that passed is not checked again.
    let mut good_users: HashSet<&str> = HashSet::new();
    for host in inputs.spec.byoh.iter().flatten() {
        let addr = &host.address;
        if addr.parse::<Ipv6Addr>().is_ok() || addr.contains(':') {
            d.push(
                addr.error(format!("`{}` is an IPv6 address; WMCO reaches BYOH hosts over IPv4 only", addr.value))
                    .expected("an IPv4 address or a DNS name that resolves to IPv4"),
            );
        } else if addr.parse::<Ipv4Addr>().is_err() && (!is_dns1123_subdomain(addr) || looks_numeric(addr)) {
            let looks_numeric = looks_numeric(addr);
            let lower = addr.to_ascii_lowercase();
            if lower != addr.value && is_dns1123_subdomain(&lower) && !looks_numeric {
                d.push(
                    addr.error(format!("`{}` has upper-case letters", addr.value.escape_debug()))
                        .expected("a lower-case DNS name")
                        .hint(format!("write `{lower}`: WMCO matches BYOH hosts by their lower-case name")),
                );
            } else {
                d.push(
                    addr.error(format!("`{}` is not an IPv4 address or DNS name", addr.value.escape_debug())).expected(
                        if looks_numeric {
                            "four numbers 0-255, e.g. 10.1.42.1"
                        } else {
                            "a lower-case DNS name, e.g. win1.example.com"
                        },
                    ),
                );
            }
        }
        let key = addr.to_ascii_lowercase();
        if let Some(first) = seen.insert(key, addr.loc.line) {
            d.push(
                addr.error(format!("BYOH host `{}` is listed twice (first at line {first})", addr.value))
                    .expected("each host once"),
            );
        }
        let user = &host.username;
        let checked = if good_users.contains(user.value.as_str()) { Ok(()) } else { names::check_byoh_user_name(user) };
        if let Err(why) = checked {
            d.push(
                user.error(if user.is_empty() {
                    "the user name is empty".to_string()
                } else {
                    format!("`{}` {why}", user.value.escape_debug())
                })
                    .expected("at most 20 characters, none of \" / \\ [ ] : ; | = , + * ? < > @ ' ` ( ) { } &, no control or invisible characters, not only dots or spaces, not starting with `-` or holding ` -`")
                    .hint("WMCO takes everything after `username=` verbatim, so a stray space or newline becomes part of the name"),
            );
        } else {
            good_users.insert(&user.value);
        }
        if let (Some(v), Some(row)) = (&host.windows_version, row)
            && !row.versions.contains(&v.value)
        {
            let allowed: Vec<String> = row.versions.iter().map(|v| format!("\"{v}\"")).collect();
            d.push(
                v.error(format!("Windows Server {} is not supported on {}", v.value, row.display))
                    .expected(allowed.join(" or ")),
            );
        }
    }
}

/// `10.0.0.500` is a syntactically valid DNS name, but no real one ends in a numeric label: it is a mistyped IPv4.
fn looks_numeric(addr: &str) -> bool {
    addr.rsplit('.').next().is_some_and(|last| !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
}
