//! A path on the Windows node, checked once where it enters (the renderer's constants, a payload directory, a node
//! manifest read over SSH) and trusted after that. `C:\k\kubelet.conf` on the node is `node/C/k/kubelet.conf` in
//! the rendered bundle and `/C:/k/kubelet.conf` (or `<root>/C/k/kubelet.conf`) over SFTP.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Everything wmrender delivers lives below this folder; a node path outside it is refused wherever it is read.
pub const ROOT: &str = r"C:\k";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("`{0}` is not an absolute path on drive C: (expected C:\\k\\…)")]
    NotOnDriveC(String),
    #[error("`{0}` has an empty, `.` or `..` component")]
    NotNormal(String),
    #[error("`{0}` has a character Windows does not allow in a file name ({1:?})")]
    BadCharacter(String, char),
    #[error("`{0}` has a component ending in a space or a dot, which Windows drops")]
    TrailingDotOrSpace(String),
    #[error("`{0}` names a Windows device ({1})")]
    DeviceName(String, String),
    #[error("`{0}` is outside {ROOT}")]
    OutsideRoot(String),
}

/// An absolute, normalised path on drive C: of the node: `C:\` and one or more components, each a valid Windows
/// file name, none of them `.` or `..`. Comparisons and ordering use the text as written (the renderer writes
/// every path in one spelling); [`NodePath::is_within`] compares without case, as Windows does.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodePath(String);

const DEVICES: &[&str] = &["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"];

impl NodePath {
    /// Checks `text` as a node path (`C:\k\x`; a lower-case drive letter is accepted and written upper case).
    pub fn parse(text: &str) -> Result<NodePath, PathError> {
        let rest = text
            .strip_prefix("C:\\")
            .or_else(|| text.strip_prefix("c:\\"))
            .ok_or_else(|| PathError::NotOnDriveC(text.into()))?;
        for part in rest.split('\\') {
            if part.is_empty() || part == "." || part == ".." {
                return Err(PathError::NotNormal(text.into()));
            }
            if let Some(c) = part.chars().find(|c| c.is_control() || r#"<>:"/|?*"#.contains(*c)) {
                return Err(PathError::BadCharacter(text.into(), c));
            }
            if part.ends_with(' ') || part.ends_with('.') {
                return Err(PathError::TrailingDotOrSpace(text.into()));
            }
            let stem = part.split('.').next().unwrap_or(part).trim_end().to_ascii_uppercase();
            let numbered = (stem.starts_with("COM") || stem.starts_with("LPT"))
                && stem.len() == 4
                && stem.as_bytes()[3].is_ascii_digit();
            if DEVICES.contains(&stem.as_str()) || numbered {
                return Err(PathError::DeviceName(text.into(), stem));
            }
        }
        Ok(NodePath(format!("C:\\{rest}")))
    }

    /// A path that wmrender delivers or removes: below [`ROOT`].
    pub fn parse_delivered(text: &str) -> Result<NodePath, PathError> {
        let p = NodePath::parse(text)?;
        if !p.is_within(&NodePath(ROOT.into())) || p.0.eq_ignore_ascii_case(ROOT) {
            return Err(PathError::OutsideRoot(text.into()));
        }
        Ok(p)
    }

    /// The renderer's constants, which are known to be good.
    ///
    /// # Panics
    /// When `text` is not a node path: a programming error in a constant, caught by the contract's tests.
    pub fn known(text: &str) -> NodePath {
        match NodePath::parse(text) {
            Ok(p) => p,
            Err(e) => panic!("bad node path constant: {e}"),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The components below `C:\`.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0[3..].split('\\')
    }

    /// `true` when this path is `dir` or below it, compared without case.
    pub fn is_within(&self, dir: &NodePath) -> bool {
        let (a, b) = (self.0.to_ascii_lowercase(), dir.0.to_ascii_lowercase());
        a == b || a.strip_prefix(&b).is_some_and(|rest| rest.starts_with('\\'))
    }

    /// The folder holding this path (`None` for a path directly below `C:\`).
    pub fn parent(&self) -> Option<NodePath> {
        let cut = self.0.rfind('\\')?;
        (cut > 2).then(|| NodePath(self.0[..cut].into()))
    }

    pub fn file_name(&self) -> &str {
        self.0.rsplit('\\').next().unwrap_or(&self.0)
    }

    /// This path with `suffix` added to its file name (`x.exe` → `x.exe.wmrender-tmp`).
    pub fn with_suffix(&self, suffix: &str) -> Result<NodePath, PathError> {
        NodePath::parse(&format!("{}{suffix}", self.0))
    }

    /// `node/C/k/x` in the rendered output directory.
    pub fn bundle_path(&self) -> String {
        format!("node/C/{}", self.components().collect::<Vec<_>>().join("/"))
    }

    /// The node path of an output-directory path `node/C/k/x`; `None` for anything else.
    pub fn from_bundle_path(bundle: &str) -> Option<NodePath> {
        let rest = bundle.strip_prefix("node/C/")?;
        NodePath::parse(&format!("C:\\{}", rest.replace('/', "\\"))).ok()
    }

    /// The path relative to `C:\`, with `/` separators (`k/kubelet.conf`), for SFTP and local mirrors of a node.
    pub fn relative_slash(&self) -> String {
        self.components().collect::<Vec<_>>().join("/")
    }
}

impl fmt::Display for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for NodePath {
    type Error = PathError;
    fn try_from(s: String) -> Result<NodePath, PathError> {
        NodePath::parse(&s)
    }
}

impl From<NodePath> for String {
    fn from(p: NodePath) -> String {
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_paths_round_trip() {
        let p = NodePath::parse(r"C:\k\containerd\registries\quay.io\hosts.toml").unwrap();
        assert_eq!(p.bundle_path(), "node/C/k/containerd/registries/quay.io/hosts.toml");
        assert_eq!(NodePath::from_bundle_path(&p.bundle_path()), Some(p.clone()));
        assert_eq!(p.relative_slash(), "k/containerd/registries/quay.io/hosts.toml");
        assert_eq!(p.parent().unwrap().as_str(), r"C:\k\containerd\registries\quay.io");
        assert_eq!(p.file_name(), "hosts.toml");
        assert_eq!(NodePath::parse(r"c:\k\x").unwrap().as_str(), r"C:\k\x");
        assert_eq!(NodePath::parse(r"C:\k").unwrap().parent(), None);
    }

    #[test]
    fn traversal_and_strange_names_are_refused() {
        for bad in [
            r"C:\k\..\..\victim",
            r"C:\k\.\x",
            r"C:\k\\x",
            r"C:\k\x\",
            "C:/k/x",
            r"D:\k\x",
            r"\\server\share\x",
            r"k\x",
            r"C:\k\a:b",
            r"C:\k\a|b",
            "C:\\k\\a\nb",
            r"C:\k\x.",
            r"C:\k\x ",
            r"C:\k\CON",
            r"C:\k\nul.txt",
            r"C:\k\COM1",
            "",
        ] {
            assert!(NodePath::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn delivered_paths_stay_below_the_root() {
        assert!(NodePath::parse_delivered(r"C:\k\kubelet.exe").is_ok());
        assert!(NodePath::parse_delivered(r"C:\K\kubelet.exe").is_ok());
        for bad in [r"C:\Windows\System32\x", r"C:\k", r"C:\kx\y", r"C:\var\log\x"] {
            assert_eq!(NodePath::parse_delivered(bad), Err(PathError::OutsideRoot(bad.into())), "{bad}");
        }
    }

    #[test]
    fn json_is_checked_on_the_way_in() {
        assert!(serde_json::from_str::<NodePath>(r#""C:\\k\\x""#).is_ok());
        assert!(serde_json::from_str::<NodePath>(r#""C:\\k\\..\\x""#).is_err());
    }
}
