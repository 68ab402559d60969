//! The trusted CA bundle (`C:\k\ca-bundle.crt`): PEM certificates, read as untrusted input. The whole bundle is
//! checked before anything is imported, so a bad bundle changes nothing. Text between blocks is allowed (bundles
//! carry comments, as the cluster's `ca-bundle.crt` does); any block other than a certificate is refused, and an
//! error never echoes a block's content (a private key pasted by mistake must not reach a log).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const BEGIN: &str = "-----BEGIN ";
const END: &str = "-----END ";
const DASHES: &str = "-----";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("the CA bundle is not text (UTF-8)")]
    NotText,
    #[error("line {line}: a `{label}` block, where only certificates (`BEGIN CERTIFICATE`) belong in a CA bundle")]
    NotACertificate { line: usize, label: String },
    #[error("line {line}: the certificate that begins here has no `-----END CERTIFICATE-----` line")]
    Unterminated { line: usize },
    #[error("line {line}: `-----END` without a `-----BEGIN CERTIFICATE-----` before it")]
    StrayEnd { line: usize },
    #[error("line {line}: the certificate that begins here is not valid base64")]
    Base64 { line: usize },
    #[error("line {line}: the certificate that begins here is not a DER-encoded X.509 certificate")]
    NotDer { line: usize },
    #[error("the CA bundle holds text but no certificate")]
    Empty,
}

/// The DER bytes of each certificate, in bundle order. An empty (or blank) bundle has none.
pub fn parse_ca_bundle(bytes: &[u8]) -> Result<Vec<Vec<u8>>, BundleError> {
    let text = std::str::from_utf8(bytes).map_err(|_| BundleError::NotText)?;
    let mut certificates = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let number = index + 1;
        if let Some((begun, body)) = open.as_mut() {
            if line.starts_with(END) {
                if line != "-----END CERTIFICATE-----" {
                    return Err(BundleError::Unterminated { line: *begun });
                }
                let der = STANDARD.decode(body.as_bytes()).map_err(|_| BundleError::Base64 { line: *begun })?;
                if !is_der_certificate(&der) {
                    return Err(BundleError::NotDer { line: *begun });
                }
                certificates.push(der);
                open = None;
            } else if line.starts_with(BEGIN) {
                return Err(BundleError::Unterminated { line: *begun });
            } else {
                body.push_str(line);
            }
        } else if let Some(rest) = line.strip_prefix(BEGIN) {
            let label = rest.strip_suffix(DASHES).unwrap_or(rest);
            if label != "CERTIFICATE" {
                // The label only, never the content: "PRIVATE KEY" is what this refuses most.
                let label: String = label.chars().filter(|c| c.is_ascii_alphanumeric() || *c == ' ').take(40).collect();
                return Err(BundleError::NotACertificate { line: number, label });
            }
            open = Some((number, String::new()));
        } else if line.starts_with(END) {
            return Err(BundleError::StrayEnd { line: number });
        }
    }
    if let Some((line, _)) = open {
        return Err(BundleError::Unterminated { line });
    }
    if certificates.is_empty() && !text.trim().is_empty() && !text.lines().all(is_comment_or_blank) {
        return Err(BundleError::Empty);
    }
    Ok(certificates)
}

fn is_comment_or_blank(line: &str) -> bool {
    let line = line.trim();
    line.is_empty() || line.starts_with('#')
}

/// An X.509 certificate's outer shape: a DER SEQUENCE that fills the bytes exactly and holds three elements
/// (to-be-signed certificate, algorithm, signature), the first two themselves SEQUENCEs. Windows' store checks the
/// rest when the certificate is added.
pub fn is_der_certificate(der: &[u8]) -> bool {
    let Some((0x30, content, rest)) = der_element(der) else { return false };
    if !rest.is_empty() {
        return false;
    }
    let Some((0x30, _, after_tbs)) = der_element(content) else { return false };
    let Some((0x30, _, after_algorithm)) = der_element(after_tbs) else { return false };
    matches!(der_element(after_algorithm), Some((0x03, _, [])))
}

/// One DER element: (tag, content, what follows). Definite lengths only, as DER requires.
fn der_element(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count].iter().fold(0usize, |n, b| (n << 8) | *b as usize);
        (length, &rest[count..])
    };
    if rest.len() < length {
        return None;
    }
    Some((tag, &rest[..length], &rest[length..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal certificate shape: SEQUENCE { SEQUENCE {INTEGER n}, SEQUENCE {}, BIT STRING {0} }.
    pub fn fake_der(n: u8) -> Vec<u8> {
        vec![0x30, 0x0b, 0x30, 0x03, 0x02, 0x01, n, 0x30, 0x00, 0x03, 0x02, 0x00, 0x00]
    }

    fn pem(der: &[u8]) -> String {
        format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", STANDARD.encode(der))
    }

    #[test]
    fn certificates_with_comments_between_them() {
        let text = format!("# first\n{}\n# second\r\n{}", pem(&fake_der(1)), pem(&fake_der(2)));
        assert_eq!(parse_ca_bundle(text.as_bytes()).unwrap(), vec![fake_der(1), fake_der(2)]);
        assert_eq!(parse_ca_bundle(b"").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(parse_ca_bundle(b"\n# no additional CAs\n").unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn bad_bundles_are_refused_without_echoing_content() {
        let key = "-----BEGIN PRIVATE KEY-----\nTUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3Z2dTakFnRUFBb0lCQVFD\n-----END PRIVATE KEY-----\n";
        let text = format!("{}{key}", pem(&fake_der(1)));
        let e = parse_ca_bundle(text.as_bytes()).unwrap_err();
        assert_eq!(e, BundleError::NotACertificate { line: 4, label: "PRIVATE KEY".into() });
        assert!(!e.to_string().contains("TUlJ"), "{e}");
        let cut = pem(&fake_der(1)).replace("-----END CERTIFICATE-----\n", "");
        assert_eq!(parse_ca_bundle(cut.as_bytes()), Err(BundleError::Unterminated { line: 1 }));
        let bad64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert_eq!(parse_ca_bundle(bad64.as_bytes()), Err(BundleError::Base64 { line: 1 }));
        let not_der =
            format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", STANDARD.encode(b"hello"));
        assert_eq!(parse_ca_bundle(not_der.as_bytes()), Err(BundleError::NotDer { line: 1 }));
        assert_eq!(parse_ca_bundle(b"just text"), Err(BundleError::Empty));
        assert_eq!(parse_ca_bundle(b"-----END CERTIFICATE-----"), Err(BundleError::StrayEnd { line: 1 }));
        assert_eq!(parse_ca_bundle(&[0xff, 0xfe]), Err(BundleError::NotText));
    }

    #[test]
    fn der_shape() {
        assert!(is_der_certificate(&fake_der(7)));
        let mut trailing = fake_der(7);
        trailing.push(0);
        assert!(!is_der_certificate(&trailing));
        let mut short = fake_der(7);
        short.pop();
        assert!(!is_der_certificate(&short));
        assert!(!is_der_certificate(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]));
        assert!(!is_der_certificate(&[]));
    }
}
