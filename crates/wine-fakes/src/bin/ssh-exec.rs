//! ssh-exec.exe: runs `SSH_ORIGINAL_COMMAND` as `cmd.exe /c <command>`, verbatim, and exits with its exit code: what
//! Win32-OpenSSH does with a client's command when cmd.exe is the default shell. The rig's sshd runs it under Wine
//! from its ForceCommand wrapper (Wine passes the Unix environment through).

#[cfg(windows)]
fn main() {
    use std::os::windows::process::CommandExt;
    let command = std::env::var("SSH_ORIGINAL_COMMAND").unwrap_or_default();
    let status = std::process::Command::new(r"C:\windows\system32\cmd.exe").raw_arg("/c").raw_arg(&command).status();
    match status {
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("ssh-exec: cannot start cmd.exe: {e}");
            std::process::exit(1)
        }
    }
}

#[cfg(not(windows))]
fn main() {
    eprintln!("ssh-exec is a Windows program (build with --target x86_64-pc-windows-gnu)");
    std::process::exit(2)
}
