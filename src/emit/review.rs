//! `wmrender diff`: a config review of what a render would change, written as GitHub-flavoured Markdown for a
//! pull-request comment. What would destroy something comes first: objects Argo CD or Flux would prune (by kind,
//! with what deleting each does), MachineSets renamed (a rename is a delete and a create), Machines scaled away,
//! BYOH hosts WMCO would deconfigure; then node files, which GitOps does not deliver (`wmrender sync` does); then
//! a table of every change and the unified diffs.

use super::check::Staleness;
use serde::Serialize;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    /// Changes that delete something on the cluster, in the order shown.
    pub destructive: Vec<Destructive>,
    pub objects: Vec<ObjectChange>,
    pub node_files: Vec<FileChange>,
    /// Other files (manifest.json, kustomization.yaml).
    pub other_files: Vec<FileChange>,
    pub diff: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Destructive {
    /// `deleted`, `renamed`, `scaled down` or `hosts removed`.
    pub change: &'static str,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<String>,
    /// What it does to the cluster, in a sentence.
    pub effect: String,
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

fn parse(bytes: Option<&[u8]>) -> Option<serde_json::Value> {
    serde_saphyr::from_slice(bytes?).ok()
}

/// `kind` and `metadata.name`.
fn identify(v: &serde_json::Value) -> Option<(String, String)> {
    Some((v["kind"].as_str()?.to_string(), v["metadata"]["name"].as_str()?.to_string()))
}

/// Builds the review from a comparison. `old` and `new` give a file's bytes in the earlier output and in the fresh
/// render.
pub fn review(s: &Staleness, old: &dyn Fn(&str) -> Option<Vec<u8>>, new: &dyn Fn(&str) -> Option<Vec<u8>>) -> Review {
    // manifest.json only lists hashes: counted, but its diff would drown the review.
    let diff = s.diffs.iter().filter(|(p, _)| p != "manifest.json").map(|(_, d)| d.as_str()).collect();
    let mut r = Review { destructive: vec![], objects: vec![], node_files: vec![], other_files: vec![], diff };
    let all = [("added", &s.added), ("changed", &s.changed), ("removed", &s.removed)];
    for (change, paths) in all {
        for path in paths {
            if let Some(rest) = path.strip_prefix("node/C/") {
                r.node_files.push(FileChange { change, path: format!("C:\\{}", rest.replace('/', "\\")) });
            } else if path.starts_with("cluster/") && !path.ends_with("/kustomization.yaml") {
                let (old_v, new_v) = (parse(old(path).as_deref()), parse(new(path).as_deref()));
                let (kind, name) = new_v
                    .as_ref()
                    .and_then(identify)
                    .or_else(|| old_v.as_ref().and_then(identify))
                    .unwrap_or_else(|| ("?".into(), path.clone()));
                if change == "changed"
                    && let (Some(o), Some(n)) = (&old_v, &new_v)
                {
                    r.destructive.extend(shrinking(&kind, &name, o, n));
                }
                r.objects.push(ObjectChange { change, kind, name, file: path.clone() });
            } else {
                r.other_files.push(FileChange { change, path: path.clone() });
            }
        }
    }
    r.objects.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    r.node_files.sort_by(|a, b| a.path.cmp(&b.path));
    let removed: Vec<(&ObjectChange, Option<serde_json::Value>)> =
        r.objects.iter().filter(|o| o.change == "removed").map(|o| (o, parse(old(&o.file).as_deref()))).collect();
    let added: Vec<&ObjectChange> = r.objects.iter().filter(|o| o.change == "added").collect();
    let mut deletions = Vec::new();
    for (o, old_v) in removed {
        let renamed_to = renamed_to(o, &added);
        deletions.push(Destructive {
            change: if renamed_to.is_some() { "renamed" } else { "deleted" },
            kind: o.kind.clone(),
            name: o.name.clone(),
            effect: deletion_effect(&o.kind, &o.name, old_v.as_ref(), renamed_to.as_deref()),
            renamed_to,
        });
    }
    deletions.append(&mut r.destructive);
    r.destructive = deletions;
    r
}

/// The added object of the same kind a removed one most likely became: MachineSet names are
/// `<infrastructure ID>-<name>-<zone>`, so a new zone or name keeps a long common prefix. At least half of the
/// shorter name must be shared, and the best match wins.
fn renamed_to(removed: &ObjectChange, added: &[&ObjectChange]) -> Option<String> {
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    added
        .iter()
        .filter(|a| a.kind == removed.kind)
        .map(|a| (common(&a.name, &removed.name), a))
        .filter(|(n, a)| *n * 2 >= a.name.len().min(removed.name.len()) && *n > 0)
        .max_by_key(|(n, a)| (*n, std::cmp::Reverse(a.name.clone())))
        .map(|(_, a)| a.name.clone())
}

fn replicas(v: &serde_json::Value) -> Option<u64> {
    v["spec"]["replicas"].as_u64()
}

/// What pruning an object of this kind does.
fn deletion_effect(kind: &str, name: &str, old: Option<&serde_json::Value>, renamed_to: Option<&str>) -> String {
    match kind {
        "MachineSet" => {
            let machines = match old.and_then(replicas) {
                Some(1) => "its 1 Machine".to_string(),
                Some(n) => format!("its {n} Machines"),
                // Left out of the render: an autoscaler owns the count.
                None => "all its Machines".to_string(),
            };
            let then = match renamed_to {
                Some(new) => format!("; `{new}` then creates new ones from scratch"),
                None => String::new(),
            };
            format!(
                "prune deletes the MachineSet and {machines} with it: their Windows nodes are drained and deleted{then}"
            )
        }
        "RuntimeClass" => format!(
            "pods that set `runtimeClassName: {name}` can no longer be created, and a controller re-creating them \
             (a Deployment rolling out) fails; nodes of that Windows version keep running until replaced"
        ),
        "ConfigMap" if name == "windows-instances" => "the BYOH ConfigMap: it carries Argo CD `Prune=false` and \
             Flux `prune: disabled`, so it stays on the cluster until deleted by hand; once deleted, WMCO \
             deconfigures every host it lists"
            .to_string(),
        "Namespace" => format!(
            "deleting namespace `{name}` deletes everything in it: WMCO itself and the BYOH ConfigMap, after which \
             no Windows node is managed"
        ),
        "Subscription" => "WMCO is no longer installed or upgraded by OLM (its CSV and Deployment stay until \
             removed by hand)"
            .to_string(),
        "OperatorGroup" => "without its OperatorGroup, OLM stops reconciling WMCO's install".to_string(),
        _ => "prune deletes it from the cluster".to_string(),
    }
}

/// Changed objects that take something away: a MachineSet scaled down, BYOH hosts dropped from the ConfigMap.
fn shrinking(kind: &str, name: &str, old: &serde_json::Value, new: &serde_json::Value) -> Option<Destructive> {
    match kind {
        "MachineSet" => {
            let (before, after) = (replicas(old)?, replicas(new));
            let effect = match after {
                Some(after) if after < before => {
                    format!(
                        "scaled from {before} to {after}: {} Machine(s) and their nodes are deleted",
                        before - after
                    )
                }
                None => format!(
                    "`spec.replicas` ({before}) is no longer rendered: whatever owns it now (an autoscaler) decides \
                     how many Machines stay"
                ),
                Some(_) => return None,
            };
            Some(Destructive { change: "scaled down", kind: kind.into(), name: name.into(), renamed_to: None, effect })
        }
        "ConfigMap" if name == "windows-instances" => {
            let keys = |v: &serde_json::Value| -> Vec<String> {
                v["data"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
            };
            let now = keys(new);
            let gone: Vec<String> = keys(old).into_iter().filter(|k| !now.contains(k)).collect();
            (!gone.is_empty()).then(|| Destructive {
                change: "hosts removed",
                kind: kind.into(),
                name: name.into(),
                renamed_to: None,
                effect: format!(
                    "WMCO deconfigures {}: the host(s) leave the cluster as Windows nodes",
                    gone.iter().map(|h| format!("`{h}`")).collect::<Vec<_>>().join(", ")
                ),
            })
        }
        _ => None,
    }
}

impl Review {
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.node_files.is_empty() && self.other_files.is_empty()
    }

    /// Whether Argo CD or Flux would delete an object (or Machines, or BYOH hosts): `--fail-on-delete`.
    pub fn deletes_something(&self) -> bool {
        !self.destructive.is_empty()
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

    /// GitHub-flavoured Markdown (also plain enough for a terminal): destructive changes in a warning block first,
    /// then the node-file note, a table per part, and the diffs in a collapsed fenced block.
    pub fn render_text(&self) -> String {
        if self.is_empty() {
            return "wmrender diff: no changes\n".into();
        }
        let mut out = format!("### wmrender diff\n\n{}\n", self.summary());
        if !self.destructive.is_empty() {
            out.push_str("\n> [!CAUTION]\n> **This change deletes things on the cluster** when Argo CD or Flux syncs ");
            out.push_str("with prune:\n>\n");
            for d in &self.destructive {
                let what = match &d.renamed_to {
                    Some(new) => format!("{} `{}` → `{new}` (renamed: deleted and re-created)", d.kind, d.name),
                    None => format!("{} `{}` ({})", d.kind, d.name, d.change),
                };
                out.push_str(&format!("> - **{what}**: {}\n", d.effect));
            }
        }
        if !self.node_files.is_empty() {
            out.push_str(
                "\n> [!IMPORTANT]\n> **Node files change: Argo CD and Flux do not deliver these.** After merging, run \
                 `wmrender sync --rendered <rendered dir> ...` to push them to every Windows node.\n",
            );
        }
        let mark = |c: &str| match c {
            "added" => "added",
            "removed" => "**removed**",
            _ => "changed",
        };
        if !self.objects.is_empty() {
            out.push_str("\n| Change | Kind | Name |\n| --- | --- | --- |\n");
            for o in &self.objects {
                out.push_str(&format!("| {} | {} | `{}` |\n", mark(o.change), o.kind, o.name));
            }
        }
        if !self.node_files.is_empty() {
            out.push_str("\n| Change | Node file (the same on every node) |\n| --- | --- |\n");
            for f in &self.node_files {
                out.push_str(&format!("| {} | `{}` |\n", mark(f.change), f.path));
            }
        }
        out.push_str("\n<details><summary>Unified diff</summary>\n\n```diff\n");
        // A line of three backticks inside the diff would close the fence early.
        out.push_str(&self.diff.replace("```", "`\u{200b}``"));
        if !self.diff.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("```\n\n</details>\n");
        out
    }
}
