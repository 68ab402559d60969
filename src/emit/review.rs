//! `wmrender diff --against DIR`: a config review of what a render would change in a rendered directory,
//! written to read well pasted into a pull-request comment: a summary, cluster objects by kind and name, node
//! files by node path, then the unified diffs.

use super::check::Staleness;
use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    pub objects: Vec<ObjectChange>,
    pub node_files: Vec<FileChange>,
    /// Other files (manifest.json, kustomization.yaml).
    pub other_files: Vec<FileChange>,
    pub diff: String,
}

#[derive(Debug, Serialize)]
pub struct ObjectChange {
    pub change: &'static str,
    pub kind: String,
    pub name: String,
    pub file: String,
}

#[derive(Debug, Serialize)]
pub struct FileChange {
    pub change: &'static str,
    pub path: String,
}

/// `kind` and `metadata.name` from whichever side has the object.
fn identify(bytes: Option<&[u8]>) -> Option<(String, String)> {
    let v: serde_json::Value = serde_saphyr::from_slice(bytes?).ok()?;
    Some((v["kind"].as_str()?.to_string(), v["metadata"]["name"].as_str()?.to_string()))
}

/// Builds the review from a comparison. `old` and `new` give a file's bytes on disk and in the fresh render.
pub fn review(s: &Staleness, old: &dyn Fn(&str) -> Option<Vec<u8>>, new: &dyn Fn(&str) -> Option<Vec<u8>>) -> Review {
    // manifest.json only lists hashes: counted, but its diff would drown the review.
    let diff = s.diffs.iter().filter(|(p, _)| p != "manifest.json").map(|(_, d)| d.as_str()).collect();
    let mut r = Review { objects: vec![], node_files: vec![], other_files: vec![], diff };
    let all = [("added", &s.added), ("changed", &s.changed), ("removed", &s.removed)];
    for (change, paths) in all {
        for path in paths {
            if let Some(rest) = path.strip_prefix("node/C/") {
                r.node_files.push(FileChange { change, path: format!("C:\\{}", rest.replace('/', "\\")) });
            } else if path.starts_with("cluster/") && !path.ends_with("/kustomization.yaml") {
                let (kind, name) = identify(new(path).as_deref())
                    .or_else(|| identify(old(path).as_deref()))
                    .unwrap_or_else(|| ("?".into(), path.clone()));
                r.objects.push(ObjectChange { change, kind, name, file: path.clone() });
            } else {
                r.other_files.push(FileChange { change, path: path.clone() });
            }
        }
    }
    r.objects.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    r.node_files.sort_by(|a, b| a.path.cmp(&b.path));
    r
}

impl Review {
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.node_files.is_empty() && self.other_files.is_empty()
    }

    fn count(&self, change: &str) -> (usize, usize) {
        (
            self.objects.iter().filter(|o| o.change == change).count(),
            self.node_files.iter().filter(|f| f.change == change).count(),
        )
    }

    pub fn summary(&self) -> String {
        let (oa, na) = self.count("added");
        let (oc, nc) = self.count("changed");
        let (or, nr) = self.count("removed");
        format!(
            "cluster objects: {oa} added, {oc} changed, {or} removed; node files: {na} added, {nc} changed, {nr} removed"
        )
    }

    /// Markdown-friendly text: headings, one line per change, the diffs in a fenced block.
    pub fn render_text(&self) -> String {
        if self.is_empty() {
            return "wmrender diff: no changes\n".into();
        }
        let sign = |c: &str| match c {
            "added" => "+",
            "removed" => "-",
            _ => "~",
        };
        let mut out = format!("wmrender diff: {}\n", self.summary());
        if !self.objects.is_empty() {
            out.push_str("\nCluster objects:\n");
            for o in &self.objects {
                out.push_str(&format!("  {} {} {}\n", sign(o.change), o.kind, o.name));
            }
        }
        if !self.node_files.is_empty() {
            out.push_str("\nNode files (the same on every node):\n");
            for f in &self.node_files {
                out.push_str(&format!("  {} {}\n", sign(f.change), f.path));
            }
        }
        out.push_str("\n```diff\n");
        out.push_str(&self.diff);
        if !self.diff.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("```\n");
        out
    }
}
