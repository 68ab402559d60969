//! `wmrender publish`: the rendered node bundle (never a secret: those enter only at `sync` time) pushed to an
//! OCI registry as one artifact addressed by digest, and signed there in the form the real `cosign` verifies, so
//! that nodes can pull what was reviewed and check that it is (docs/pull.md).
//!
//! Read (the rendered directory, checked against its manifest.json) → [`artifact`] (pure: the layout) →
//! [`push`] (the registry) and [`signature`] (cosign's simple signing).

pub mod artifact;
pub mod error;
pub mod push;
pub mod signature;

pub use error::PublishError;
