//! fake-powershell.exe: the rig's stand-in for `powershell.exe` (see `wine_fakes::powershell`). It stands in for
//! PowerShell; it does not parse it and runs nothing: it records its arguments and prints what the test's table
//! says for the script it was given.

use std::io::Write;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let exe = std::env::current_exe().unwrap_or_default();
    let r = wine_fakes::powershell::answer(&wine_fakes::control_dir(&exe), &argv);
    let _ = std::io::stdout().write_all(r.stdout.as_bytes());
    let _ = std::io::stderr().write_all(r.stderr.as_bytes());
    std::process::exit(r.exit);
}
