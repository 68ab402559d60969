//! `C:\k\wmrender\last-pass.json`: the result line of the agent's last pass, sync's `apply` or the service's. Sync
//! reads it when nothing it delivers changed, so that a pass that failed since (a step after a reboot) shows in
//! sync's report instead of only in the agent's log. Written atomically; a write that fails is not the pass's
//! failure (the log and the Node still say what happened).

use crate::system::System;
use wmrender_contract::{ApplyResult, NodePath, paths};

pub fn write(sys: &dyn System, result: &ApplyResult) {
    let path = sys.local(&NodePath::known(paths::LAST_PASS));
    let tmp = path.with_extension("json.tmp");
    let mut bytes = result.to_line().into_bytes();
    bytes.push(b'\n');
    if std::fs::write(&tmp, &bytes).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}
