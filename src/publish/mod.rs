//! `wmrender publish`: the rendered node bundle (never a secret: those enter only at `sync` time) pushed to an
//! OCI registry as one artifact addressed by digest, and signed there in the form the real `cosign` verifies, so
//! that nodes can pull what was reviewed and check that it is (docs/pull.md).
//!
//! [`read`] (the rendered directory or the payload, checked against their lists) → [`artifact`] (pure: the layout) →
//! [`push`] (the registry), [`signature`] (cosign's simple signing) and [`referrers`] (where a registry has the
//! OCI 1.1 referrers API, a signature is stored there too).

pub mod artifact;
pub mod error;
pub mod push;
pub mod read;
pub mod referrers;
pub mod signature;

pub use error::PublishError;
