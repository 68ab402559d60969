//! A loopback sshd in front of the Wine machine, arranged as a Windows node's Win32-OpenSSH is (recipe:
//! ../shared/reference/wine-rig): every command runs through Wine's `cmd.exe` (ForceCommand
//! tests/wine/ssh-wrapper.sh → `ssh-exec.exe`), and SFTP serves the prefix's drive C: as `/C:/…`
//! (tests/wine/sftp-wrapper.sh). Listens on 127.0.0.1 only; needs root (sshd, mount namespaces).

use super::sshd::Sshd;
use super::wine::Wine;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Starts the sshd for `wine`'s prefix.
pub fn start(wine: &Wine) -> Sshd {
    let prefix = wine.prefix.display().to_string();
    Sshd::start_with_tail(|dir: &Path| {
        let rig = dir.display().to_string();
        for (name, template) in [("ssh-wrapper", "ssh-wrapper.sh"), ("sftp-wrapper", "sftp-wrapper.sh")] {
            let text = std::fs::read_to_string(super::root().join("tests/wine").join(template)).expect("wrapper");
            let path = dir.join(name);
            std::fs::write(&path, text.replace("@RIG@", &rig).replace("@PREFIX@", &prefix)).expect("wrapper");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        std::fs::create_dir_all(dir.join("sftproot")).expect("sftp root");
        format!("Subsystem sftp {rig}/sftp-wrapper\nForceCommand {rig}/ssh-wrapper\n")
    })
}

/// Makes the next command that runs wmrender-node cut the connection instead (a sync cut off between its push
/// and the apply).
pub fn cut_before_agent(sshd: &Sshd) {
    std::fs::write(sshd.path("cut-before-agent"), "").expect("marker");
}
