//! The agent's own service, `wmrender-node`: installed by the first apply so the node finishes by itself (after
//! the Containers-feature reboot, once kubelet's certificate is approved) and stays converged. Apply creates,
//! updates and starts it, and never stops it: the pass may be running inside it.

use crate::apply::Pass;
use crate::scm;
use crate::system::ServiceConfig;
use wmrender_contract::{NodePath, paths};

pub const DESCRIPTION: &str = "wmrender node agent: keeps this node converged to the bundle wmrender sync delivered";

pub fn config() -> ServiceConfig {
    ServiceConfig {
        name: paths::AGENT_SERVICE.into(),
        command: format!("\"{}\" run", paths::AGENT_EXE),
        description: DESCRIPTION.into(),
        dependencies: vec![],
        automatic: true,
    }
}

impl Pass<'_> {
    pub(crate) fn agent_service(&mut self) {
        let want = config();
        let name = want.name.clone();
        match self.sys.service(&name) {
            Ok(None) => match self.sys.create_service(&want) {
                Ok(()) => self.result.created.push(name.clone()),
                Err(e) => return self.result.errors.push(format!("cannot create the agent service: {e}")),
            },
            Ok(Some(s)) if s.config != want => match self.sys.update_service(&want) {
                Ok(()) => self.result.updated.push(name.clone()),
                Err(e) => return self.result.errors.push(format!("cannot update the agent service: {e}")),
            },
            Ok(Some(_)) => {}
            Err(e) => return self.result.errors.push(format!("cannot query the agent service: {e}")),
        }
        if !self.sys.local(&NodePath::known(paths::AGENT_EXE)).is_file() {
            return self.result.errors.push(format!(
                "{} is not there, so the agent service cannot run: sync delivers it with the bundle",
                paths::AGENT_EXE
            ));
        }
        match scm::state(self.sys, &name) {
            Ok(s) if scm::is_running(s) => {}
            Ok(_) => match scm::start_and_wait(self.sys, self.timing, &name) {
                Ok(()) => self.result.started.push(name),
                Err(e) => self.result.errors.push(e),
            },
            Err(e) => self.result.errors.push(e),
        }
    }
}
