//! wmrender-node: the agent that does on a Windows node what WMCO's WICD does, from the bundle `wmrender sync`
//! staged. `apply` is one idempotent convergence pass; `run` is the same as a Windows service, retried with back-off
//! and repeated, so a node finishes after reboots and stays converged.

pub mod agent_service;
pub mod apply;
pub mod deconfigure;
pub mod desired;
pub mod digest;
pub mod env;
pub mod last_pass;
pub mod lock;
pub mod log;
pub mod node_status;
pub mod node_vars;
pub mod node_watch;
pub mod pull;
pub mod result;
pub mod run;
pub mod scm;
pub mod services;
pub mod state;
pub mod steps;
pub mod swap;
pub mod system;
pub mod tidy;
pub mod timing;
pub mod trusted_cas;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

#[cfg(windows)]
pub mod windows;
