//! A Windows node's life without the operator, in the steps that need both the cluster ([`crate::cluster`]) and the
//! node over SSH ([`crate::sync::ssh`]): which Machines are targets, the graceful and the first-boot reboot, and
//! pruning the nodes that left. `sync` runs them once; `src/cluster/` below them knows no SSH.

pub mod machines;
pub mod prune;
pub mod reboot;
