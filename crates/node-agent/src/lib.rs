//! wmrender-node: the agent that does on a Windows node what WMCO's WICD does, from the bundle `wmrender sync`
//! staged. `apply` is one idempotent convergence pass; `run` is the same as a Windows service, retried with back-off
//! and repeated, so a node finishes after reboots and stays converged.

pub mod system;
