//! The desired state sync staged: the node manifest, services.json and node.json, read and checked as untrusted
//! input (a node's files can be edited by anyone with an administrator's session).

use crate::system::Files;
use wmrender_contract::{NodeManifest, NodePath, NodeSettings, ServicesFile, paths};

pub struct Desired {
    pub manifest: NodeManifest,
    pub services: ServicesFile,
    pub settings: NodeSettings,
}

/// A desired-state file that is missing or does not check; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct InputError {
    pub file: &'static str,
    pub message: String,
}

fn read(sys: &dyn Files, file: &'static str) -> Result<Vec<u8>, InputError> {
    let local = sys.local(&NodePath::known(file));
    std::fs::read(&local).map_err(|e| InputError {
        file,
        message: match e.kind() {
            std::io::ErrorKind::NotFound => "is not on the node: run `wmrender sync` to deliver the bundle".into(),
            _ => format!("cannot be read: {e}"),
        },
    })
}

impl Desired {
    pub fn read(sys: &dyn Files) -> Result<Desired, InputError> {
        let manifest = NodeManifest::parse(&read(sys, paths::NODE_MANIFEST)?)
            .map_err(|e| InputError { file: paths::NODE_MANIFEST, message: e.to_string() })?;
        let services = ServicesFile::parse(&read(sys, paths::SERVICES_JSON)?)
            .map_err(|e| InputError { file: paths::SERVICES_JSON, message: e.to_string() })?;
        let settings = NodeSettings::parse(&read(sys, paths::SETTINGS_JSON)?)
            .map_err(|message| InputError { file: paths::SETTINGS_JSON, message })?;
        for s in &services.services {
            if let Some(step) = &s.pre_start
                && settings.step(step).is_none()
            {
                return Err(InputError {
                    file: paths::SERVICES_JSON,
                    message: format!(
                        "service `{}` runs step `{step}` before it starts, which node.json does not list",
                        s.name
                    ),
                });
            }
            if s.name == paths::AGENT_SERVICE {
                return Err(InputError {
                    file: paths::SERVICES_JSON,
                    message: format!("`{}` is the agent's own service and cannot be listed", s.name),
                });
            }
        }
        Ok(Desired { manifest, services, settings })
    }
}
