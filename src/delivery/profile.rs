//! A target profile: where node paths live over SFTP and how the apply step runs. Everything else in the sync
//! engine is shared between the two.

use crate::render::node::powershell;
use std::time::Duration;
use wmrender_contract::NodePath;
use wmrender_contract::paths::AGENT_EXE;

/// How long a Windows node waits between the reboot command and going down: the command returns, and its SSH
/// session ends cleanly, well before.
pub const REBOOT_DELAY: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// A Windows node: `C:\k\x` is `/C:/k/x` over SFTP, and the agent (`wmrender-node.exe apply`) applies.
    Windows,
    /// A Unix host standing in for a node (tests, Linux staging): `C:\k\x` is `<root>/C/k/x`; the apply step
    /// checks every file against the manifest through sh.
    Posix { root: String },
}

/// The built-in apply step of the posix profile: checks every file of the node manifest against its sha256 and
/// prints the agent's result line, so the whole protocol runs end to end.
const POSIX_APPLY: &str = concat!(include_str!("update-posix.sh"), include_str!("apply-posix.sh"));

/// The posix profile's stand-in for `wmrender-node deconfigure`: removes the files the node manifest lists.
const POSIX_DECONFIGURE: &str = concat!(include_str!("update-posix.sh"), include_str!("deconfigure-posix.sh"));

impl Profile {
    /// The SFTP path of a node path (`C:\k\kubelet.conf`).
    pub fn sftp_path(&self, path: &NodePath) -> String {
        let rest = path.relative_slash();
        match self {
            Profile::Windows => format!("/C:/{rest}"),
            Profile::Posix { root } => format!("{}/C/{rest}", root.trim_end_matches('/')),
        }
    }

    /// The command that applies what sync delivered. On Windows the SSH server's default shell is cmd.exe: one
    /// program invocation, no `&&` (and no path with a space to quote).
    pub fn apply_command(&self) -> String {
        match self {
            Profile::Windows => format!("{AGENT_EXE} apply"),
            Profile::Posix { root } => {
                format!("sh -c {} wmrender-apply {}", sh_quote(POSIX_APPLY), sh_quote(root.trim_end_matches('/')))
            }
        }
    }

    /// The command that undoes what sync and apply set up (`--prune-nodes`): the agent's `deconfigure` on Windows;
    /// on posix hosts, the removal of every file the node manifest lists. Either prints one result line.
    pub fn deconfigure_command(&self) -> String {
        match self {
            Profile::Windows => format!("{AGENT_EXE} deconfigure"),
            Profile::Posix { root } => {
                format!(
                    "sh -c {} wmrender-deconfigure {}",
                    sh_quote(POSIX_DECONFIGURE),
                    sh_quote(root.trim_end_matches('/'))
                )
            }
        }
    }

    /// The command that restarts the node and returns before it goes down (so the SSH session ends cleanly): on
    /// Windows `shutdown.exe` with `REBOOT_DELAY` (planned, maintenance: what `Restart-Computer -Force` does, run
    /// by cmd.exe, the SSH server's default shell). A posix host is never restarted: it stands in for a node, so it
    /// only records the request in `<root>/reboot-requested` for whatever plays the node (a test) to act on, no
    /// sooner than `REBOOT_DELAY` after.
    pub fn reboot_command(&self) -> String {
        match self {
            Profile::Windows => {
                format!(r#"shutdown.exe /r /t {} /d p:4:1 /c "wmrender: graceful reboot""#, REBOOT_DELAY.as_secs())
            }
            Profile::Posix { root } => format!(
                "sh -c 'date +%s > \"$1/reboot-requested\"' wmrender-reboot {}",
                sh_quote(root.trim_end_matches('/'))
            ),
        }
    }

    /// A command that replaces `target` by `temp` atomically, for SFTP servers without posix-rename.
    pub fn replace_command(&self, temp: &NodePath, target: &NodePath) -> String {
        match self {
            Profile::Windows => {
                let (t, n) = (powershell::quote(temp.as_str()), powershell::quote(target.as_str()));
                format!(
                    "powershell.exe -NoProfile -NonInteractive -Command \"if (Test-Path -LiteralPath {n}) {{ [IO.File]::Replace({t}, {n}, $null) }} else {{ [IO.File]::Move({t}, {n}) }}\""
                )
            }
            Profile::Posix { .. } => {
                format!("mv -f {} {}", sh_quote(&self.sftp_path(temp)), sh_quote(&self.sftp_path(target)))
            }
        }
    }
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
        let p = |s: &str| NodePath::known(s);
        assert_eq!(Profile::Windows.sftp_path(&p(r"C:\k\kubelet.conf")), "/C:/k/kubelet.conf");
        let posix = Profile::Posix { root: "/srv/n1/".into() };
        assert_eq!(
            posix.sftp_path(&p(r"C:\k\containerd\registries\quay.io\hosts.toml")),
            "/srv/n1/C/k/containerd/registries/quay.io/hosts.toml"
        );
    }

    #[test]
    fn windows_apply_is_one_program_invocation() {
        assert_eq!(Profile::Windows.apply_command(), r"C:\k\wmrender\wmrender-node.exe apply");
        assert_eq!(Profile::Windows.deconfigure_command(), r"C:\k\wmrender\wmrender-node.exe deconfigure");
    }

    #[test]
    fn reboot_commands() {
        // cmd.exe runs it: one program, and a delay so the SSH session ends before the node goes down.
        assert_eq!(
            Profile::Windows.reboot_command(),
            r#"shutdown.exe /r /t 5 /d p:4:1 /c "wmrender: graceful reboot""#
        );
        // A posix host is never restarted: it only records the request.
        let posix = Profile::Posix { root: "/srv/n 1/".into() };
        assert_eq!(posix.reboot_command(), r#"sh -c 'date +%s > "$1/reboot-requested"' wmrender-reboot '/srv/n 1'"#);
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
