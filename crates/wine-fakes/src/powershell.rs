//! The recording stand-in for `powershell.exe`. It stands in for PowerShell; it does not parse it: it runs no
//! script and evaluates no command. It finds which script it was asked to run (`-File <path>`, or `-Command` for
//! an inline command), records the whole invocation, and answers with the stdout, stderr and exit code the test
//! wrote for that script's file name. Consecutive calls of one script walk through a sequence of answers (the
//! last repeats), so a test can make a step fail on the first run and succeed on the second.
//!
//! The table, `<control dir>\powershell-responses.json`:
//! `{"network-conf.ps1": [{"stdout": "{\"pending\":\"…\",\"ok\":false}", "exit": 0}, {"stdout": "{\"ok\":true}"}]}`;
//! the key `*` answers any script without an entry of its own. A script with no answer at all gets exit code 1
//! and a message on stderr, so a test notices a call it did not expect (Wine's own stub would report success).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const LOG: &str = "powershell.jsonl";
pub const RESPONSES: &str = "powershell-responses.json";
/// Exit code when the table has no answer for a script.
pub const NO_ANSWER: i32 = 1;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub exit: i32,
}

/// One recorded call, as a line of `powershell.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub t: u128,
    /// Every argument after the program name, as received.
    pub argv: Vec<String>,
    /// The path after `-File`, if any.
    pub script: Option<String>,
    /// What the table is keyed by: the script's file name in lower case, or `-command`.
    pub key: String,
    /// The arguments after the script path (or after `-Command`).
    pub args: Vec<String>,
    /// 0 for the first call of this key since the log was cleared.
    pub call: usize,
    pub exit: i32,
}

/// Which script an argument list names, and the arguments it passes to it. PowerShell's own parameters are
/// matched without case and by their documented names and prefixes (`-File`, `-f`; `-Command`, `-c`).
pub fn parse_args(argv: &[String]) -> (Option<String>, String, Vec<String>) {
    let mut i = 0;
    while i < argv.len() {
        let a = argv[i].to_ascii_lowercase();
        if a == "-file" || a == "-f" {
            let script = argv.get(i + 1).cloned().unwrap_or_default();
            let name = script.rsplit(['\\', '/']).next().unwrap_or(&script).to_ascii_lowercase();
            return (Some(script), name, argv.get(i + 2..).unwrap_or_default().to_vec());
        }
        if a == "-command" || a == "-c" {
            return (None, "-command".into(), argv[i + 1..].to_vec());
        }
        i += 1;
    }
    (None, "-command".into(), vec![])
}

/// Answers one call: reads the table and the log in `dir`, appends the call to the log, returns the answer.
pub fn answer(dir: &Path, argv: &[String]) -> Response {
    let (script, key, args) = parse_args(argv);
    let log = dir.join(LOG);
    let call = previous_calls(&log, &key);
    let response = match table(dir) {
        Err(e) => Response { stderr: format!("fake-powershell: {e}\n"), exit: NO_ANSWER, ..Response::default() },
        Ok(table) => match table.get(&key).or_else(|| table.get("*")).filter(|seq| !seq.is_empty()) {
            Some(seq) => seq[call.min(seq.len() - 1)].clone(),
            None => Response {
                stderr: format!(
                    "fake-powershell: no answer for `{key}` in {}; this stand-in runs nothing\n",
                    dir.join(RESPONSES).display()
                ),
                exit: NO_ANSWER,
                ..Response::default()
            },
        },
    };
    let record = Call { t: crate::now_ms(), argv: argv.to_vec(), script, key, args, call, exit: response.exit };
    if let Err(e) = crate::append_json_line(&log, &record) {
        // A call that cannot be recorded must not pass unnoticed.
        return Response {
            stderr: format!("fake-powershell: cannot write {}: {e}\n", log.display()),
            exit: 2,
            ..response
        };
    }
    response
}

fn table(dir: &Path) -> Result<BTreeMap<String, Vec<Response>>, String> {
    let path: PathBuf = dir.join(RESPONSES);
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{} does not parse: {e}", path.display())),
    }
}

/// How many calls of `key` the log holds.
fn previous_calls(log: &Path, key: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str::<Call>(l).ok()).filter(|c| c.key == key).count()
}

/// Every call recorded in `dir`, in order.
pub fn calls(dir: &Path) -> Vec<Call> {
    let text = std::fs::read_to_string(dir.join(LOG)).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_script_and_its_arguments_are_found() {
        let (script, key, args) = parse_args(&s(&[
            "-NoProfile",
            "-ExecutionPolicy",
            "Bypass",
            "-file",
            r"C:\k\wmrender\Network-Conf.ps1",
            "-Name",
            "a b",
        ]));
        assert_eq!(script.as_deref(), Some(r"C:\k\wmrender\Network-Conf.ps1"));
        assert_eq!((key.as_str(), args), ("network-conf.ps1", s(&["-Name", "a b"])));
        let (script, key, args) = parse_args(&s(&["-NoProfile", "-Command", "Get-Item x"]));
        assert_eq!((script, key.as_str(), args), (None, "-command", s(&["Get-Item x"])));
    }

    #[test]
    fn answers_walk_a_sequence_and_every_call_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let table = r#"{"step.ps1": [{"stdout": "first\n", "exit": 1}, {"stdout": "{\"ok\":true}\n"}],
                        "*": [{"stdout": "any"}]}"#;
        std::fs::write(dir.path().join(RESPONSES), table).unwrap();
        let argv = s(&["-File", r"C:\k\step.ps1", "x"]);
        assert_eq!(answer(dir.path(), &argv), Response { stdout: "first\n".into(), exit: 1, ..Default::default() });
        assert_eq!(answer(dir.path(), &argv).stdout, "{\"ok\":true}\n");
        assert_eq!(answer(dir.path(), &argv).stdout, "{\"ok\":true}\n", "the last answer repeats");
        assert_eq!(answer(dir.path(), &s(&["-File", r"C:\k\other.ps1"])).stdout, "any");
        let calls = calls(dir.path());
        assert_eq!(
            calls.iter().map(|c| (c.key.as_str(), c.call, c.exit)).collect::<Vec<_>>(),
            [("step.ps1", 0, 1), ("step.ps1", 1, 0), ("step.ps1", 2, 0), ("other.ps1", 0, 0)]
        );
        assert_eq!(calls[0].args, s(&["x"]));
    }

    #[test]
    fn a_script_without_an_answer_fails_loudly() {
        let dir = tempfile::tempdir().unwrap();
        let r = answer(dir.path(), &s(&["-File", r"C:\k\unknown.ps1"]));
        assert_eq!(r.exit, NO_ANSWER);
        assert!(r.stderr.contains("no answer for `unknown.ps1`"), "{}", r.stderr);
        std::fs::write(dir.path().join(RESPONSES), "{not json").unwrap();
        let r = answer(dir.path(), &s(&["-File", r"C:\k\unknown.ps1"]));
        assert!(r.exit == NO_ANSWER && r.stderr.contains("does not parse"), "{}", r.stderr);
        assert_eq!(calls(dir.path()).len(), 2);
    }
}
