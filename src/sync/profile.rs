//! A target profile: where node paths live over SFTP and how the apply step runs. Everything else in the sync
//! engine is shared between the two.

use crate::render::node::paths;
use crate::render::node::powershell;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// A Windows node: `C:\k\x` is `/C:/k/x` over SFTP, and install.ps1 runs through powershell.exe.
    Windows,
    /// A Unix host standing in for a node (tests, Linux staging): `C:\k\x` is `<root>/C/k/x`, applied through sh.
    Posix { root: String },
}

/// The built-in apply step of the posix profile: checks every file of the node manifest against its sha256 and
/// prints the same JSON result line install.ps1 prints, so the whole protocol runs end to end.
const POSIX_APPLY: &str = include_str!("apply-posix.sh");

impl Profile {
    /// The SFTP path of a node path (`C:\k\kubelet.conf`).
    pub fn sftp_path(&self, node_path: &str) -> String {
        let rest = node_path.strip_prefix("C:\\").unwrap_or(node_path).replace('\\', "/");
        match self {
            Profile::Windows => format!("/C:/{rest}"),
            Profile::Posix { root } => format!("{}/C/{rest}", root.trim_end_matches('/')),
        }
    }

    /// The command that applies the pushed bundle, given the node paths that changed.
    pub fn apply_command(&self, changed: &[String]) -> String {
        // `|` cannot occur in a Windows path, so it separates the list safely.
        let joined = changed.join("|");
        match self {
            Profile::Windows => format!(
                "powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -File {} -ChangedFiles {}",
                paths::INSTALL_PS1,
                // cmd.exe (the default shell of Windows OpenSSH) passes the double-quoted argument through whole.
                format_args!("\"{joined}\"")
            ),
            Profile::Posix { root } => format!(
                "sh -c {} wmrender-apply {} {}",
                sh_quote(POSIX_APPLY),
                sh_quote(root.trim_end_matches('/')),
                sh_quote(&joined)
            ),
        }
    }

    /// A command that replaces `target` by `temp` atomically, for SFTP servers without posix-rename.
    pub fn replace_command(&self, temp: &str, target: &str) -> String {
        match self {
            Profile::Windows => {
                let (t, n) = (powershell::quote(&windows_path(temp)), powershell::quote(&windows_path(target)));
                format!(
                    "powershell.exe -NoProfile -NonInteractive -Command \"if (Test-Path -LiteralPath {n}) {{ [IO.File]::Replace({t}, {n}, $null) }} else {{ [IO.File]::Move({t}, {n}) }}\""
                )
            }
            Profile::Posix { .. } => format!("mv -f {} {}", sh_quote(temp), sh_quote(target)),
        }
    }
}

/// `/C:/k/x` back to `C:\k\x`.
fn windows_path(sftp: &str) -> String {
    sftp.trim_start_matches('/').replace('/', "\\")
}

/// A POSIX shell single-quoted word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Windows PowerShell over SSH wraps progress records as CLIXML on stderr; keep only what a human should see.
pub fn strip_clixml(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("#< CLIXML") || t.starts_with("<Objs ") || t.starts_with("</Objs>") {
            // A record line may carry an error message: keep the text of <S S="Error"> elements.
            for part in t.split("<S S=\"Error\">").skip(1) {
                if let Some(msg) = part.split("</S>").next() {
                    out.push_str(&msg.replace("_x000D__x000A_", "\n"));
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_mapping() {
        assert_eq!(Profile::Windows.sftp_path(r"C:\k\kubelet.conf"), "/C:/k/kubelet.conf");
        let p = Profile::Posix { root: "/srv/n1/".into() };
        assert_eq!(
            p.sftp_path(r"C:\k\containerd\registries\quay.io\hosts.toml"),
            "/srv/n1/C/k/containerd/registries/quay.io/hosts.toml"
        );
    }

    #[test]
    fn windows_apply_passes_the_changed_files_as_one_argument() {
        let cmd = Profile::Windows.apply_command(&[r"C:\k\kubelet.conf".into(), r"C:\k\a b.toml".into()]);
        assert!(cmd.ends_with(r#"-ChangedFiles "C:\k\kubelet.conf|C:\k\a b.toml""#), "{cmd}");
    }

    #[test]
    fn clixml_noise_is_removed() {
        let noisy = "#< CLIXML\n<Objs Version=\"1.1.0.1\"><Obj S=\"progress\"></Obj><S S=\"Error\">boom_x000D__x000A_</S></Objs>\nreal line\n";
        assert_eq!(strip_clixml(noisy), "boom\nreal line\n");
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }
}
