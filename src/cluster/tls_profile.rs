//! The cluster's TLS security profile: `apiservers.config.openshift.io/cluster` `spec.tlsSecurityProfile`, which
//! OpenShift's components serve by (WMCO's metrics endpoint since its #4340). Its types, as openshift/api
//! (`config/v1/types_tlssecurityprofile.go`, `TLSProfiles`) defines them: `Old`, `Intermediate` (also when nothing is
//! set), `Modern`, and `Custom` with its own ciphers (OpenSSL names) and `minTLSVersion`. Read as untrusted input:
//! an unknown type or version is an error, never a looser profile.

use super::{Cluster, ClusterError};
use serde_json::Value;

const APISERVER: &str = "/apis/config.openshift.io/v1/apiservers/cluster";

/// A profile, in openshift/api's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsProfile {
    /// `Old`, `Intermediate`, `Modern` or `Custom`.
    pub kind: String,
    /// `VersionTLS10` … `VersionTLS13`.
    pub min_version: String,
    /// OpenSSL cipher names (and TLS 1.3's IANA names).
    pub ciphers: Vec<String>,
    /// The key exchange groups allowed (`X25519`, `secp256r1`, …), most preferred first; empty: no opinion.
    pub groups: Vec<String>,
}

/// The groups of every named profile.
const NAMED_GROUPS: [&str; 4] = ["X25519MLKEM768", "X25519", "secp256r1", "secp384r1"];
const GROUPS: [&str; 7] =
    ["X25519", "secp256r1", "secp384r1", "secp521r1", "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"];

/// TLS 1.3's ciphers (IANA names), which every profile lists and none chooses among.
pub const TLS13: [&str; 3] = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"];

const INTERMEDIATE_TLS12: [&str; 6] = [
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
];

const OLD_MORE: [&str; 15] = [
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

const VERSIONS: [&str; 4] = ["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"];

/// The most names a Custom profile's `ciphers` or `groups` may list: the `Old` profile, the longest, lists 24
/// ciphers and openshift/api knows 7 groups, so a far longer list is no profile but an object to be wary of.
const MAX_NAMES: usize = 64;
/// The longest cipher or group name read: OpenSSL's cipher names run to about 30 bytes, IANA's to about 50.
const MAX_NAME_BYTES: usize = 64;

impl TlsProfile {
    /// One of the named profiles (openshift/api's `TLSProfiles`, `config/v1/types_tlssecurityprofile.go` of 2026-07).
    pub fn named(kind: &str) -> Option<TlsProfile> {
        let strings = |l: &[&[&str]]| l.iter().flat_map(|p| p.iter().map(|s| s.to_string())).collect::<Vec<_>>();
        let (min, ciphers) = match kind {
            "Old" => ("VersionTLS10", strings(&[&TLS13, &INTERMEDIATE_TLS12, &OLD_MORE])),
            "Intermediate" => ("VersionTLS12", strings(&[&TLS13, &INTERMEDIATE_TLS12])),
            "Modern" => ("VersionTLS13", strings(&[&TLS13])),
            _ => return None,
        };
        let groups = strings(&[&NAMED_GROUPS]);
        Some(TlsProfile { kind: kind.to_string(), min_version: min.to_string(), ciphers, groups })
    }

    /// The profile an `APIServer` object asks for (none set: `Intermediate`).
    pub fn of_apiserver(apiserver: &Value) -> Result<TlsProfile, String> {
        let profile = &apiserver["spec"]["tlsSecurityProfile"];
        // Read from the cluster: a value of the wrong type is refused, never read as a looser default.
        let kind = match &profile["type"] {
            Value::Null => "",
            Value::String(k) => k.as_str(),
            _ => return Err("the TLS security profile's `type` is not a string".into()),
        };
        if kind.is_empty() && profile.get("custom").is_none() {
            return Ok(TlsProfile::named("Intermediate").unwrap_or_else(unreachable_profile));
        }
        if kind != "Custom" {
            return TlsProfile::named(kind).ok_or_else(|| {
                format!("the TLS security profile type `{}` is not one OpenShift has", kind.escape_debug())
            });
        }
        let custom = &profile["custom"];
        let min_version = match &custom["minTLSVersion"] {
            Value::Null => "VersionTLS12".to_string(),
            Value::String(v) => v.clone(),
            _ => return Err("the Custom profile's `minTLSVersion` is not a string".into()),
        };
        if !VERSIONS.contains(&min_version.as_str()) {
            return Err(format!("`{}` is not a TLS version OpenShift has", min_version.escape_debug()));
        }
        let ciphers = strings_of(&custom["ciphers"], "ciphers")?;
        if ciphers.is_empty() {
            return Err("the Custom TLS security profile lists no cipher".into());
        }
        let groups = strings_of(&custom["groups"], "groups")?;
        if let Some(unknown) = groups.iter().find(|g| !GROUPS.contains(&g.as_str())) {
            return Err(format!("`{}` is not a TLS group OpenShift has", unknown.escape_debug()));
        }
        Ok(TlsProfile { kind: "Custom".into(), min_version, ciphers, groups })
    }
}

/// A list of names of the Custom profile (absent: empty); anything else is refused, as are more names than
/// [`MAX_NAMES`], longer ones than [`MAX_NAME_BYTES`] and any but printable ASCII: they end up in log lines.
fn strings_of(value: &Value, field: &str) -> Result<Vec<String>, String> {
    let not = || format!("the Custom profile's `{field}` is not a list of strings");
    let items = match value {
        Value::Null => return Ok(vec![]),
        Value::Array(items) => items,
        _ => return Err(not()),
    };
    if items.len() > MAX_NAMES {
        return Err(format!(
            "the Custom profile's `{field}` lists {} names, more than the {MAX_NAMES} wmrender reads",
            items.len()
        ));
    }
    let mut names = Vec::with_capacity(items.len());
    for item in items {
        let name = item.as_str().ok_or_else(not)?;
        if name.len() > MAX_NAME_BYTES {
            return Err(format!(
                "the Custom profile's `{field}` holds a name of {} bytes, longer than the {MAX_NAME_BYTES} wmrender reads",
                name.len()
            ));
        }
        if !name.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            return Err(format!(
                "the Custom profile's `{field}` holds `{}`, which is not a name of printable ASCII characters",
                name.escape_default()
            ));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

fn unreachable_profile() -> TlsProfile {
    TlsProfile { kind: "Intermediate".into(), min_version: "VersionTLS12".into(), ciphers: vec![], groups: vec![] }
}

/// The cluster's profile. A cluster without the `APIServer` object (not OpenShift) serves `Intermediate`.
pub async fn fetch(cluster: &Cluster) -> Result<TlsProfile, ClusterError> {
    let apiserver = cluster.get(APISERVER).await?.unwrap_or(Value::Null);
    TlsProfile::of_apiserver(&apiserver)
        .map_err(|why| ClusterError::Api { what: "the APIServer `cluster`'s spec.tlsSecurityProfile".into(), why })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_of_the_wrong_type_is_refused_never_loosened() {
        let profile = |p: Value| TlsProfile::of_apiserver(&json!({"spec": {"tlsSecurityProfile": p}}));
        assert!(profile(json!({"type": 7})).unwrap_err().contains("`type` is not a string"));
        let custom = |c: Value| profile(json!({"type": "Custom", "custom": c}));
        assert!(custom(json!({"minTLSVersion": 13, "ciphers": ["TLS_AES_128_GCM_SHA256"]})).is_err());
        assert!(custom(json!({"ciphers": ["TLS_AES_128_GCM_SHA256", 5]})).unwrap_err().contains("`ciphers`"));
        assert!(
            custom(json!({"ciphers": ["TLS_AES_128_GCM_SHA256"], "groups": [1]})).unwrap_err().contains("`groups`")
        );
        assert!(custom(json!({"ciphers": ["TLS_AES_128_GCM_SHA256"], "groups": "X25519"})).is_err());
        assert!(custom(json!({"ciphers": ["TLS_AES_128_GCM_SHA256"]})).is_ok());
    }

    #[test]
    fn the_profile_is_the_apiservers_and_intermediate_when_none_is_set() {
        let of = |p: Value| TlsProfile::of_apiserver(&json!({"spec": {"tlsSecurityProfile": p}}));
        assert_eq!(TlsProfile::of_apiserver(&Value::Null).unwrap().kind, "Intermediate");
        let modern = of(json!({"type": "Modern", "modern": {}})).unwrap();
        assert_eq!((modern.min_version.as_str(), modern.ciphers.len()), ("VersionTLS13", 3));
        assert_eq!(of(json!({"type": "Old", "old": {}})).unwrap().ciphers.len(), 24);
        assert_eq!(of(json!({"type": "Intermediate"})).unwrap().ciphers.len(), 9);
        let custom =
            of(json!({"type": "Custom", "custom": {"ciphers": ["ECDHE-RSA-AES256-GCM-SHA384"], "minTLSVersion": "VersionTLS12"}}))
                .unwrap();
        assert_eq!(custom.ciphers, ["ECDHE-RSA-AES256-GCM-SHA384"]);
        assert!(of(json!({"type": "Lax"})).is_err());
        assert!(of(json!({"type": "Custom", "custom": {"ciphers": ["X"], "minTLSVersion": "VersionSSL3"}})).is_err());
        assert!(of(json!({"type": "Custom", "custom": {"ciphers": []}})).is_err());
        let grouped = json!({"type": "Custom", "custom": {"ciphers": ["X"], "minTLSVersion": "VersionTLS12", "groups": ["secp384r1"]}});
        assert_eq!(of(grouped).unwrap().groups, ["secp384r1"]);
        assert!(of(json!({"type": "Custom", "custom": {"ciphers": ["X"], "groups": ["brainpool"]}})).is_err());
    }

    #[test]
    fn a_custom_profiles_names_are_capped_in_number_and_length() {
        let custom = |c: Value| {
            TlsProfile::of_apiserver(&json!({"spec": {"tlsSecurityProfile": {"type": "Custom", "custom": c}}}))
        };
        let many = |n: usize| vec!["ECDHE-RSA-AES128-GCM-SHA256"; n];
        assert_eq!(custom(json!({"ciphers": many(MAX_NAMES)})).unwrap().ciphers.len(), MAX_NAMES);
        let err = custom(json!({"ciphers": many(MAX_NAMES + 1)})).unwrap_err();
        assert!(err.contains("`ciphers` lists 65 names"), "{err}");
        let err = custom(json!({"ciphers": ["X"], "groups": vec!["X25519"; MAX_NAMES + 1]})).unwrap_err();
        assert!(err.contains("`groups` lists 65 names"), "{err}");
        let long = "A".repeat(MAX_NAME_BYTES + 1);
        let err = custom(json!({"ciphers": [long]})).unwrap_err();
        assert!(err.contains("`ciphers` holds a name of 65 bytes"), "{err}");
        assert!(custom(json!({"ciphers": ["A".repeat(MAX_NAME_BYTES)]})).is_ok());
    }

    #[test]
    fn a_custom_profiles_names_are_printable_ascii_and_unknown_ciphers_are_kept() {
        let custom = |c: Value| {
            TlsProfile::of_apiserver(&json!({"spec": {"tlsSecurityProfile": {"type": "Custom", "custom": c}}}))
        };
        let err = custom(json!({"ciphers": ["ECDHE-RSA-AES128-GCM-SHA256", "AES\u{2011}GCM"]})).unwrap_err();
        assert!(err.contains("`ciphers` holds `AES\\u{2011}GCM`, which is not a name of printable ASCII"), "{err}");
        let err = custom(json!({"ciphers": ["X"], "groups": ["X25519\n"]})).unwrap_err();
        assert!(err.contains("`groups` holds `X25519\\n`"), "{err}");
        // A well-formed name wmrender does not know is the server's to leave out, as before.
        assert_eq!(custom(json!({"ciphers": ["NOT-A-CIPHER"]})).unwrap().ciphers, ["NOT-A-CIPHER"]);
    }
}
