//! `wmrender payload`: the Windows programs a node runs (kubelet, kube-proxy, containerd, the CNI plugins, …), as
//! the directory `sync --payload` delivers. `pull` takes them out of the WMCO operator image of the cluster's
//! release; `list` writes the digest list (`payload.json`) of a directory assembled by hand; and every payload is
//! checked against the contract's compatibility table before a node gets it.

pub mod buildinfo;
pub mod error;
pub mod extract;
pub mod list;
#[cfg(feature = "registry")]
pub mod pull;
pub mod wmco;
pub mod write;

pub use error::PayloadError;
