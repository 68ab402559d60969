//! `spec.sshPublicKey`: the OpenSSH public key that the rendered `windows-user-data` Secret authorises on
//! Machine-backed nodes in the mode without the operator (with WMCO, WMCO derives it from `cloud-private-key`).
//!
//! Accepted: one public key line, `<type> <base64> [comment]`, of a type WMCO's nodes accept (ed25519, ECDSA
//! on the NIST curves, RSA of at least 2048 bits), whose base64 decodes to a key blob of the same type. The
//! checked value is `<type> <base64>` without the comment, as WMCO writes it (`ssh.MarshalAuthorizedKey`): the
//! comment is free text and has no business in a script. A private key pasted here is refused without showing
//! the value or its source line, so that it never reaches a terminal or a CI log.

use super::Decoded;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::inputs::schema::{ClusterInputs, Platform};
use base64::Engine as _;
use russh::keys::ssh_key::public::KeyData;
use russh::keys::{PublicKey, ssh_key};

/// The key types accepted, as written at the start of the line.
const TYPES: &[&str] = &["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa"];
const MIN_RSA_BITS: usize = 2048;
const EXPECTED: &str = "one OpenSSH public key line: ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa (at least \
                        2048 bits) followed by its base64, as in the `.pub` file ssh-keygen writes";

/// The key line as the user data writes it: `<type> <base64>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizedKey(String);

impl AuthorizedKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether the rendered manifest has a `windows-user-data` Secret to carry the key: the mode without the operator
/// (with WMCO the Secret is WMCO's) on a platform whose nodes are Machines.
fn secret_rendered(inputs: &ClusterInputs) -> bool {
    !inputs.spec.operator.install && !matches!(inputs.spec.platform.value, Platform::None)
}

/// Checks the key where it is needed or given; `Some` when the Secret is rendered with it.
pub fn check(inputs: &ClusterInputs, decoded: &Decoded, d: &mut Diagnostics) -> Option<AuthorizedKey> {
    let spec = &inputs.spec;
    let rendered = secret_rendered(inputs);
    let Some(key) = &spec.ssh_public_key else {
        if rendered && let Some(first) = spec.machine_sets.first() {
            d.push(
                Diagnostic::error(
                    &first.at.loc,
                    "spec.sshPublicKey",
                    "MachineSets without the operator need `sshPublicKey`: their Machines boot with the \
                     `windows-user-data` Secret, which authorises it for sync",
                )
                .expected(EXPECTED)
                .hint(
                    "add `sshPublicKey:` under `spec` with the public half of the key sync connects with (the `.pub` \
                     file); with `operator.install: true` WMCO renders the Secret instead",
                ),
            );
        }
        return None;
    };
    // Its own decoding error says what to fix.
    decoded.get(key)?;
    if looks_private(key) {
        d.push(
            key.error("this is a private key; `sshPublicKey` takes the public half only")
                .expected(EXPECTED)
                .hint(
                    "remove it from the file (and from Git history, if it was committed) and write the contents of \
                       the `.pub` file instead, e.g. `ssh-keygen -y -f KEY`",
                )
                .without_source(),
        );
        return None;
    }
    let checked = match parse(key) {
        Ok(k) => k,
        Err(why) => {
            d.push(key.error(format!("not an OpenSSH public key: {why}")).expected(EXPECTED));
            return None;
        }
    };
    if !rendered {
        let why = if spec.operator.install {
            "with the operator, WMCO renders `windows-user-data` from the `cloud-private-key` Secret"
        } else {
            "platform `none` has no Machines"
        };
        d.push(key.warning(format!("`sshPublicKey` is not used: {why}")));
        return None;
    }
    Some(checked)
}

/// PEM and PuTTY private keys, and the base64 of an OpenSSH private key pasted without its armour.
fn looks_private(value: &str) -> bool {
    value.contains("PRIVATE KEY")
        || value.contains("-----BEGIN")
        || value.contains("PuTTY-User-Key-File")
        // base64 of the magic `openssh-key-v1\0` that starts every OpenSSH private key.
        || value.contains("b3BlbnNzaC1rZXktdjEA")
}

/// The key line, checked; the error says why in words that never quote the value.
fn parse(value: &str) -> Result<AuthorizedKey, String> {
    let value = value.trim();
    if value.contains(['\n', '\r']) {
        return Err("it spans several lines".into());
    }
    let mut fields = value.split_ascii_whitespace();
    let (kind, data) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    if !TYPES.contains(&kind) {
        return Err(if kind.contains("-cert-v01@openssh.com") {
            "a certificate, not a key".into()
        } else {
            "the line does not start with an accepted key type".into()
        });
    }
    let blob = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| format!("the text after `{kind}` is not base64"))?;
    // The blob starts with its own type name (a uint32 length, then the name); it must be the one written.
    let inner = blob.get(4..).zip(blob.get(..4)).and_then(|(rest, len)| {
        let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
        rest.get(..len)
    });
    if inner != Some(kind.as_bytes()) {
        return Err(format!("the key inside the base64 is not an `{kind}` key"));
    }
    let key = PublicKey::from_openssh(&format!("{kind} {data}")).map_err(|e| match e {
        ssh_key::Error::AlgorithmUnknown => format!("the key inside the base64 is not an `{kind}` key"),
        _ => format!("the `{kind}` key inside the base64 is malformed"),
    })?;
    if let KeyData::Rsa(rsa) = key.key_data() {
        let bits = rsa.n().as_positive_bytes().map(bit_length).unwrap_or(0);
        if bits < MIN_RSA_BITS {
            return Err(format!("an RSA key of {bits} bits; at least {MIN_RSA_BITS} are required"));
        }
    }
    Ok(AuthorizedKey(format!("{kind} {data}")))
}

/// Bits of a big-endian unsigned number without leading zero bytes, as OpenSSH counts a key's size.
fn bit_length(bytes: &[u8]) -> usize {
    match bytes.first() {
        Some(first) => bytes.len() * 8 - first.leading_zeros() as usize,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Public halves made with ssh-keygen for these tests; the private halves were never kept.
    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp wmrender-example";
    const ECDSA_256: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBEXAMPLE";
    const ECDSA_256_OK: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBJZldErvA6AEOn7Q\
                                lmmFJSclQkz7UzBZcQEtVYUq2LmxAGWKOzdt9UWS4uxU9+HjFoM3kkg3PI4SKhgpatQBxtU= t";
    const RSA_1024: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDGSr1aGGcNXn5W4lKNge7W4S5qSovo7bja91IQqMLac82qjAfIFANO\
                            /1YGsBjUhnQfwFbRZrgX+SJxyamNflr2abHQv0PIeOt9wSDCerEokE1pVCw6PxS37J2+PEvd1HGsdi9wjbzZWXe1lTC/\
                            9MJzH89Y8ysvfa2v1pdEd5Es+Q== t";
    const RSA_2048: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDR57Fipd3z5lsbzK6u7rMmp9tn5zYjdEmtmMZvUKcNwYfS+dBJkTgtNp7\
                            saRToobR/GqWObt/NAKUdq5V7nmTWKIqKS8S92vrnpCtJihk3+FB91W9UfVZxUtPegaKevvPrNePpXAHPPBIq6onxgUoL\
                            5bxrkksEkKugg8dclmq4KOm/oDwBVnSAowMmtcwp7HGPXtNMXGYI8ARx2OQno45pXXmAM9jsOQz8umh3AjNYzUBHAEcHcvI\
                            ueAzsB0Orw5Xa74VvADCe1dvPIJYQvps/yU0WSiKsbVnbJFkGg76mQvFP0JC11jYLsmI4sAnAYJIgYW7FLB64+A6Fdk1P0aK5 t";
    const ECDSA_521: &str = "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBAGbCDe/BKuhFe0a4Ta/8z\
                             7s4quKqTB4sIIF6gMWwK+tDUrg0JiAixdrndOusp6sqO9Uxw46tnVz/Z5zI9OW18NpRQCzCb9f72ink9b1HoPwyQllafr9\
                             WAcmIXjkcUHQyI5fSZUzgn3zwwuoZR/jaGqNMl5kagFQZ9njGO3tonbxVTNnew== t";

    #[test]
    fn accepted_keys_lose_their_comment() {
        assert_eq!(parse(ED25519).unwrap().as_str(), ED25519.trim_end_matches(" wmrender-example"));
        assert!(parse(RSA_2048).is_ok());
        assert!(parse(ECDSA_521).is_ok());
        assert!(parse(ECDSA_256_OK).is_ok());
        assert!(parse(&format!("  {ED25519}\n")).is_ok(), "a block scalar's trailing newline");
    }

    #[test]
    fn refused_keys_say_why_without_quoting_the_key() {
        let cases = [
            (RSA_1024, "an RSA key of 1024 bits"),
            ("ssh-dss AAAAB3NzaC1kc3M=", "accepted key type"),
            ("ssh-ed25519-cert-v01@openssh.com AAAA", "a certificate"),
            ("ssh-ed25519 not*base64", "not base64"),
            // The ed25519 blob written as an RSA key.
            ("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp", "not an `ssh-rsa` key"),
            // A valid header with a truncated point.
            (ECDSA_256, "malformed"),
            ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp\nx", "several lines"),
            ("", "accepted key type"),
        ];
        for (value, why) in cases {
            let err = parse(value).expect_err(value);
            assert!(err.contains(why), "{value}: {err}");
            assert!(!err.contains("AAAA"), "{err}");
        }
    }

    #[test]
    fn private_keys_are_recognised() {
        // Synthetic armour and magic, not a key.
        assert!(looks_private("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"));
        assert!(looks_private("-----BEGIN RSA PRIVATE KEY-----"));
        assert!(looks_private("b3BlbnNzaC1rZXktdjEAAAAABG5vbmU="));
        assert!(looks_private("PuTTY-User-Key-File-3: ssh-ed25519"));
        assert!(!looks_private(ED25519));
        assert!(!looks_private(RSA_2048));
    }

    #[test]
    fn bit_length_counts_like_openssh() {
        assert_eq!(bit_length(&[0x80, 0]), 16);
        assert_eq!(bit_length(&[0x7f, 0]), 15);
        assert_eq!(bit_length(&[]), 0);
    }
}
