//! `wmrender krm CONFIG`: kustomize's legacy exec generator plugin protocol, the one wiring kubectl's embedded
//! kustomize (v5.5 in kubectl 1.32) runs: `kubectl kustomize --enable-alpha-plugins` finds an executable at
//! `$KUSTOMIZE_PLUGIN_HOME/wmrender.dev/v1alpha1/clusterinputs/ClusterInputs`, runs it in the kustomization's
//! directory with the path of a temporary copy of the generator's config as its only argument, and reads the
//! generated objects from stdout. On failure kustomize shows the plugin's stderr.
//!
//! kustomize's copy is re-serialised (comments dropped, keys re-ordered), so diagnostics are moved to the same field
//! of the user's generator file, found through the `generators:` list of the kustomization in the working directory.

use super::field_location;
use super::krm::{compile, field_str};
use crate::diagnostics::{Diagnostic, Diagnostics, Loc};
use crate::inputs::yaml::{self, Node};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Renders the generator config at `config` (kustomize's temporary copy). `Ok`: the object stream and warnings.
pub fn run(config: &Path, cwd: &Path) -> Result<(String, Diagnostics), Diagnostics> {
    let shown: Arc<str> = Arc::from(format!("{} (kustomize's copy of the generator config)", config.display()));
    let mut diags = Diagnostics::default();
    let text = match yaml::read_source(config, &shown, &mut diags) {
        Ok(t) => t,
        Err(e) => {
            diags.push(e.diagnostic("the generator config", &Loc::file_only(&shown), ""));
            return Err(diags);
        }
    };
    let node = yaml::parse(&shown, &text).map_err(|e| {
        let mut d = Diagnostics::default();
        d.push(e);
        d
    })?;
    // kustomize runs the plugin in the kustomization's directory; the repository it is in bounds what the config
    // and the kustomization may make wmrender read.
    let root = crate::inputs::repository_root(cwd);
    let user = user_file(&node, cwd, &root);
    let base =
        user.as_ref().and_then(|(path, _, _)| cwd.join(path).parent().map(Path::to_path_buf)).unwrap_or(cwd.into());
    let to_user = |d: Diagnostics| match &user {
        Some((path, text, doc)) => {
            let placer = field_location::Placer::new(&node, doc);
            let mut d = d.map(|d| match placer.map(&d.field, &d.loc) {
                Some(loc) if *d.loc.file == *shown => Diagnostic { loc, ..d },
                _ => d,
            });
            d.add_source(&Arc::from(path.display().to_string()), text);
            d
        }
        None => d,
    };
    match compile(&node, &base, &root, diags) {
        Ok((objects, warnings)) => Ok((crate::render::stream(&objects), to_user(warnings))),
        Err(d) => Err(to_user(d)),
    }
}

/// The user's generator file: the entry of the kustomization's `generators:` holding a ClusterInputs of the same
/// name, inside the repository `root`. Its path (as listed, under `cwd`), its text and that document.
fn user_file(config: &Node, cwd: &Path, root: &Path) -> Option<(PathBuf, Arc<str>, Node)> {
    let name = field_str(config, &["metadata", "name"]);
    let kustomization = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .map(|n| cwd.join(n))
        .find(|p| p.is_file())?;
    let k_text: Arc<str> = Arc::from(std::fs::read_to_string(&kustomization).ok()?);
    let k = yaml::parse(&Arc::from("kustomization"), &k_text).ok()?;
    let generators = match &k.child("generators")?.value {
        yaml::Value::Seq(g) => g.clone(),
        _ => return None,
    };
    generators.iter().find_map(|g| {
        let yaml::Value::Str(rel) = &g.value else { return None };
        let path = crate::inputs::inside_root(root, &cwd.join(rel))?;
        let shown: Arc<str> = Arc::from(rel.as_str());
        let text: Arc<str> = Arc::from(std::fs::read_to_string(&path).ok()?);
        let doc = yaml::parse_all(&shown, &text).ok()?.into_iter().find(|d| {
            field_str(d, &["kind"]).as_deref() == Some(crate::inputs::schema::KIND)
                && field_str(d, &["metadata", "name"]) == name
        })?;
        Some((PathBuf::from(rel), text, doc))
    })
}
