//! `wmrender controller`: the cluster side of `sync --kubeconfig`, run as a reconciler, so that a Windows instance
//! is configured when it appears (a MachineSet scaled, a Machine replaced, a BYOH host added in Git), tainted when
//! its agent fails, and pruned when it leaves — without anyone running `sync`. It applies the same bundle, rendered
//! from Git, through the same per-node step as `sync`.
//!
//! [`decide`] is its judgement for one instance, from the cluster's state alone.

pub mod decide;
pub mod metrics;
pub mod view;
