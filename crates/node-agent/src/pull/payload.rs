//! The payload pulled: the programs a node runs (kubelet, containerd, …), published with `wmrender publish
//! --payload` and named on the Node by `wmrender.dev/desired-payload`. The same rules as the bundle's pull
//! ([`super`]): the manifest by its digest through the registry's mirrors, a trusted key's signature with a version
//! not older than the payload last pulled (a sequence of its own, apart from the bundle's) unless signed as a
//! downgrade; then
//!
//! 1. the payload's `payload.json`, which must list exactly its programs, each with the digest and size of its
//!    layer;
//! 2. each program the node does not hold at its path with that content, streamed to
//!    `<path>.wmrender-pulling.wmrender-tmp` and checked against its digest (a program of 120 MB is never held in
//!    memory; one staged whole by a pull that was cut off is not fetched again, and one cut off while it was
//!    fetched is taken up where it ends); all of them before any is put in place, and what was fetched removed
//!    when one is refused (kept for the next pull when one cannot be fetched now, for as long as the Node names a
//!    payload that stages that program: [`super::parts`]); a program the registry served wrong is not asked for
//!    again for a while ([`super::held_back`]);
//! 3. the commit ([`stage::commit_payload`]): each moved to `<path>.wmrender-staged` and the node manifest listing
//!    them staged; the pass that follows stops the services that run each, swaps it in and starts them again, as for
//!    a binary sync staged. A pull cut off is settled by the next ([`settle`]).
//!
//! The agent's own executable is not pulled (it comes with sync, at first contact); the node's other payload files
//! stay, as a sync without `--prune-payload` leaves them. A payload that names what a pulled payload may not hold
//! ([`wmrender_contract::payload::pulled_program_refusal`]) or a file of the bundle is refused before anything is
//! fetched.

use super::registry::FetchError;
use super::stage::{self, StageError};
use super::{Failure, PulledPayload, PulledState, Puller, Source, fetch_failure, parts, refused, retrying};
use crate::digest::sha256_file;
use crate::system::Files;
use std::collections::BTreeSet;
use std::time::Instant;
use wmrender_contract::bundle_artifact::{self, PAYLOAD_LIST_MAX, Reference};
use wmrender_contract::node_status::DESIRED_PAYLOAD_ANNOTATION;
use wmrender_contract::payload::{PAYLOAD_LIST, PayloadList};
use wmrender_contract::{
    FileKind, NodeFile, NodeManifest, NodePath, PULLING_SUFFIX, PullOutcome, PullReport, STAGED_SUFFIX, paths,
};

/// The payload pull before a pass; `None` when there is nothing to pull (the node has not joined, or its Node names
/// no desired payload).
pub fn pull(sys: &dyn Files, cached: Option<&serde_json::Value>, puller: &Puller) -> Option<PullReport> {
    let read = super::node(sys, cached)?;
    let pulled = match settle(sys) {
        Ok(pulled) => pulled,
        Err(why) => {
            return Some(PullReport {
                desired: String::new(),
                outcome: PullOutcome::Retrying,
                message: format!("the last payload pull cannot be finished: {why}"),
                on_node: None,
            });
        }
    };
    // A Node that names no payload wants no part of one.
    if let Ok(node) = &read
        && node["metadata"]["annotations"][DESIRED_PAYLOAD_ANNOTATION].as_str().is_none()
    {
        let _ = parts::forget_all(sys);
    }
    let on_node = |p: &PulledPayload| {
        let manifest = stage::node_manifest(sys).unwrap_or_default();
        (!p.reference.is_empty() && held_by(p, &manifest)).then(|| p.reference.clone())
    };
    super::report(
        read,
        DESIRED_PAYLOAD_ANNOTATION,
        "payload",
        &pulled,
        &pulled.reference,
        &on_node,
        "a sync has delivered other programs since",
        |desired| pull_desired(sys, desired, &pulled, puller),
    )
}

fn pull_desired(
    sys: &dyn Files,
    desired: &str,
    pulled: &PulledPayload,
    puller: &Puller,
) -> Result<(PullOutcome, String, PulledPayload), Failure> {
    // A payload refused as a whole (its reference, signature, version, list or programs) stages nothing: the parts
    // of another are not wanted.
    let forget_parts = |failure: &Failure| {
        if failure.0 == PullOutcome::Refused {
            let _ = parts::forget_all(sys);
        }
    };
    let reference = Reference::parse(desired)
        .map_err(|e| refused(format!("the annotation {DESIRED_PAYLOAD_ANNOTATION} does not name a payload: {e}")))
        .inspect_err(forget_parts)?;
    if pulled.reference == desired {
        // Parts of another payload are not wanted (a failure to remove them is the next pull's to try again).
        let _ = parts::forget_all(sys);
        return Ok((PullOutcome::Current, format!("the payload {desired} is on the node"), pulled.clone()));
    }
    let prepared = (|| -> Result<_, Failure> {
        let source = Source::new(sys, &reference.registry, puller)?;
        let applied = (!pulled.reference.is_empty()).then_some(pulled.version);
        let (layers, accepted) = source
            .verified(&reference, applied, bundle_artifact::read_payload_manifest)
            .map_err(|(outcome, why)| (outcome, format!("the payload {desired}: {why}")))?;
        let list = source
            .registry
            .by_digest(
                &source.endpoints,
                &reference.repository,
                "blobs",
                &layers.list.digest,
                layers.list.size.min(PAYLOAD_LIST_MAX),
            )
            .map_err(|e| fetch_failure(PAYLOAD_LIST, e))?;
        let list = PayloadList::parse(&list).map_err(|e| refused(format!("the payload's {PAYLOAD_LIST}: {e}")))?;
        let programs = listed_programs(&list, &layers.files).map_err(refused)?;
        // The agent's own executable comes with sync (first contact), never from a pull.
        let agent = NodePath::known(paths::AGENT_EXE);
        let (skipped, programs): (Vec<NodeFile>, Vec<NodeFile>) =
            programs.into_iter().partition(|f| f.path.as_str().eq_ignore_ascii_case(agent.as_str()));
        let plan = stage::plan_payload(sys, programs).map_err(stage_failure)?;
        Ok((source, layers, accepted, skipped, plan))
    })();
    let (source, layers, accepted, skipped, plan) = prepared.inspect_err(forget_parts)?;
    let (registry, endpoints, repo) = (&source.registry, &source.endpoints, &reference.repository);
    // Parts of programs this payload does not stage are not wanted.
    let wanted: BTreeSet<String> = plan.stage.iter().map(|f| f.path.as_str().to_string()).collect();
    parts::forget_except(sys, &wanted).map_err(retrying)?;

    // A program the registry served wrong lately: refused as it was then, before any other is fetched again. Held
    // back from the same repository and hosts only: a hosts.toml or a reference that names others asks them.
    let hosts: Vec<&str> = endpoints.iter().filter(|e| e.pull).map(|e| e.url.as_str()).collect();
    let held_key = |sha256: &str| format!("sha256:{sha256} in {repo} at {}", hosts.join(" "));
    let now = Instant::now();
    if let Some(message) =
        plan.stage.iter().find_map(|f| puller.held_back.borrow().refusal(&held_key(&f.sha256), now).map(str::to_string))
    {
        return Err(refused(message));
    }
    // Every program fetched and checked before anything is put in place: a refused or unreachable one leaves the
    // node as it was.
    let mut fetched: Vec<(NodePath, NodePath)> = Vec::new();
    let fetch_all = |fetched: &mut Vec<(NodePath, NodePath)>| -> Result<(), Failure> {
        for file in &plan.stage {
            let staged = file.path.with_suffix(STAGED_SUFFIX).map_err(|e| refused(e.to_string()))?;
            // Staged whole by a pull that was cut off before its manifest: not fetched again.
            if sha256_file(&sys.local(&staged)).is_ok_and(|sha| sha == file.sha256) {
                continue;
            }
            // A name of the pull's own: a sync staging the same program writes `….wmrender-staged.wmrender-tmp`.
            let tmp = file.path.with_suffix(PULLING_SUFFIX).map_err(|e| refused(e.to_string()))?;
            if let Some(dir) = sys.local(&tmp).parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| retrying(format!("cannot create the folder of {}: {e}", file.path)))?;
            }
            // Recorded before it is fetched: a part cut off, even by a crash, is the record's to remove.
            parts::record(sys, file.path.as_str()).map_err(retrying)?;
            let digest = format!("sha256:{}", file.sha256);
            fetched.push((tmp.clone(), staged));
            match registry.blob_to_file(endpoints, repo, &digest, file.size, &sys.local(&tmp)) {
                Ok(()) => puller.held_back.borrow_mut().served_right(&held_key(&file.sha256)),
                Err(e) => {
                    let tampered = matches!(e, FetchError::Tampered(_));
                    let failure = fetch_failure(&file.path.to_string(), e);
                    if tampered {
                        puller.held_back.borrow_mut().served_wrong(&held_key(&file.sha256), &failure.1, Instant::now());
                    }
                    return Err(failure);
                }
            }
        }
        Ok(())
    };
    // What was fetched, removed and no longer recorded as a part: the record is as it was before this pull when
    // nothing of it stays.
    let remove_fetched = |fetched: &[(NodePath, NodePath)]| {
        let programs: Vec<&str> =
            fetched.iter().filter_map(|(tmp, _)| tmp.as_str().strip_suffix(PULLING_SUFFIX)).collect();
        let _ = parts::forget(sys, &programs);
    };
    if let Err(failure) = fetch_all(&mut fetched) {
        // A program cut off (or fetched whole, before another was) is kept for the next pull to take up; what was
        // refused is not.
        if failure.0 == PullOutcome::Refused {
            remove_fetched(&fetched);
        }
        return Err(failure);
    }
    let state = PulledPayload {
        reference: desired.to_string(),
        version: accepted.version,
        programs: plan.programs.clone(),
        staging: None,
    };
    // The record first: a pull cut off from here on is settled by the next ([`settle`]).
    let mut record = PulledState::load(sys);
    record.payload.staging = Some(Box::new(state.clone()));
    // Not put in place now (a sync changed the manifest meanwhile, the record cannot be written): what was fetched
    // stays, recorded, for the next pull; only a refusal removes it.
    record.save(sys).map_err(retrying)?;
    if let Err(e) = stage::commit_payload(sys, &plan, &fetched) {
        let failure = settle(sys).err().map(retrying).unwrap_or_else(|| stage_failure(e));
        if failure.0 == PullOutcome::Refused {
            remove_fetched(&fetched);
        }
        return Err(failure);
    }
    record.payload = state.clone();
    // Each part became its staged program.
    record.payload_parts.retain(|p| !wanted.iter().any(|w| w.eq_ignore_ascii_case(p)));
    record.save(sys).map_err(retrying)?;
    let message = format!(
        "the payload {desired} (version {}{}, signed by {}) is staged: {} of {} programs fetched ({} bytes read), {} to \
         swap in{}",
        accepted.version,
        if accepted.downgrade { ", a signed downgrade" } else { "" },
        accepted.key,
        fetched.len(),
        layers.files.len(),
        *registry.bytes_read.borrow(),
        plan.stage.len(),
        if skipped.is_empty() { "" } else { "; the agent's own executable in it is not pulled (sync delivers it)" },
    );
    Ok((PullOutcome::Staged, message, state))
}

/// The pulled payload as the node has it, after settling a pull that was cut off (or failed) after it recorded
/// what it was putting on the node: its manifest's own journal finished, and that payload taken as pulled when the
/// manifest lists each of its programs with its content, else dropped (the manifest was not written).
fn settle(sys: &dyn Files) -> Result<PulledPayload, String> {
    let mut record = PulledState::load(sys);
    let Some(staging) = record.payload.staging.take() else { return Ok(record.payload) };
    stage::finish_payload_journal(sys).map_err(|e| match e {
        StageError::Refused(why) | StageError::NotNow(why) => why,
    })?;
    if held_by(&staging, &stage::node_manifest(sys)?) {
        record.payload = *staging;
    }
    record.save(sys)?;
    Ok(record.payload)
}

/// Whether the node manifest lists each program of a pulled payload with its content.
fn held_by(pulled: &PulledPayload, manifest: &NodeManifest) -> bool {
    pulled.programs.iter().all(|(path, sha)| {
        manifest.files.iter().any(|f| f.kind == FileKind::Payload && f.path.as_str() == path && &f.sha256 == sha)
    })
}

fn stage_failure(e: StageError) -> Failure {
    match e {
        StageError::Refused(why) => refused(why),
        StageError::NotNow(why) => retrying(why),
    }
}

/// The payload's programs as its `payload.json` lists them, which must be exactly its layers: the same paths, each
/// with its layer's digest and size. The list is what a review of an upgrade reads; a payload whose layers say
/// otherwise is not the one reviewed.
fn listed_programs(list: &PayloadList, layers: &[bundle_artifact::Layer]) -> Result<Vec<NodeFile>, String> {
    let mut out = Vec::new();
    for f in &list.files {
        let path = f.node_path().map_err(|e| format!("the payload's {PAYLOAD_LIST}: {e}"))?;
        let layer = layers.iter().find(|l| l.path == path).ok_or_else(|| {
            format!("the payload's {PAYLOAD_LIST} lists {} and the payload has no layer for it", f.path)
        })?;
        if layer.digest != format!("sha256:{}", f.sha256) || layer.size != f.size {
            return Err(format!(
                "the payload's {PAYLOAD_LIST} lists {} as sha256:{} ({} bytes) and its layer is {} ({} bytes)",
                f.path, f.sha256, f.size, layer.digest, layer.size
            ));
        }
        out.push(NodeFile { path, sha256: f.sha256.clone(), size: f.size, kind: FileKind::Payload, staged: true });
    }
    if let Some(extra) = layers.iter().find(|l| !out.iter().any(|f| f.path == l.path)) {
        return Err(format!("the payload has a layer for {} that its {PAYLOAD_LIST} does not list", extra.path));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wmrender_contract::payload::PayloadFile;

    fn layer(path: &str, sha: char, size: u64) -> bundle_artifact::Layer {
        bundle_artifact::Layer {
            path: NodePath::known(path),
            digest: format!("sha256:{}", sha.to_string().repeat(64)),
            size,
        }
    }

    fn listed(path: &str, sha: char, size: u64) -> PayloadFile {
        PayloadFile { path: path.into(), sha256: sha.to_string().repeat(64), size, version: None }
    }

    #[test]
    fn the_list_must_say_exactly_what_the_layers_are() {
        let layers = [layer(r"C:\k\kubelet.exe", 'a', 10), layer(r"C:\k\hns.psm1", 'b', 5)];
        let list = |files: Vec<PayloadFile>| PayloadList { source: None, files };
        let ok =
            listed_programs(&list(vec![listed("C/k/hns.psm1", 'b', 5), listed("C/k/kubelet.exe", 'a', 10)]), &layers);
        let ok = ok.unwrap();
        assert!(ok.iter().all(|f| f.kind == FileKind::Payload && f.staged));
        assert_eq!(ok[1].path.as_str(), r"C:\k\kubelet.exe");
        for (files, why) in [
            (vec![listed("C/k/kubelet.exe", 'a', 10)], "does not list"),
            (vec![listed("C/k/kubelet.exe", 'a', 10), listed("C/k/hns.psm1", 'c', 5)], "its layer is"),
            (vec![listed("C/k/kubelet.exe", 'a', 11), listed("C/k/hns.psm1", 'b', 5)], "its layer is"),
            (
                vec![listed("C/k/kubelet.exe", 'a', 10), listed("C/k/hns.psm1", 'b', 5), listed("C/k/x.exe", 'a', 10)],
                "has no layer",
            ),
        ] {
            let e = listed_programs(&list(files), &layers).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
