//! The desired state sync staged: the node manifest, services.json and node.json, read and checked as untrusted
//! input (a node's files can be edited by anyone with an administrator's session).

use crate::system::Files;
use wmrender_contract::{NodeManifest, NodePath, NodeSettings, ServicesFile, UpdateError, paths};

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

/// The node manifest with the update a one-file sync left beside it applied ([`NodeManifest::read`]); `None` on a
/// node sync never reached.
pub fn node_manifest(sys: &dyn Files) -> Result<Option<NodeManifest>, InputError> {
    let (Some(manifest), update) =
        (read_if_there(sys, paths::NODE_MANIFEST)?, read_if_there(sys, paths::NODE_MANIFEST_UPDATE)?)
    else {
        return Ok(None);
    };
    match NodeManifest::read(&manifest, update.as_deref()) {
        Ok((m, _)) => Ok(Some(m)),
        Err(UpdateError::Manifest(e)) => Err(InputError { file: paths::NODE_MANIFEST, message: e.to_string() }),
        Err(UpdateError::Update(e)) => Err(InputError { file: paths::NODE_MANIFEST_UPDATE, message: e.to_string() }),
    }
}

fn read_if_there(sys: &dyn Files, file: &'static str) -> Result<Option<Vec<u8>>, InputError> {
    match std::fs::read(sys.local(&NodePath::known(file))) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(InputError { file, message: format!("cannot be read: {e}") }),
    }
}

impl Desired {
    pub fn read(sys: &dyn Files) -> Result<Desired, InputError> {
        let Some(manifest) = node_manifest(sys)? else {
            return Err(InputError {
                file: paths::NODE_MANIFEST,
                message: "is not on the node: run `wmrender sync` to deliver the bundle".into(),
            });
        };
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
