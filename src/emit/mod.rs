//! Stage 5a: the only place rendering output touches the disk or stdout.

pub mod check;
pub mod directory;
pub mod krm;
pub mod manifest;
pub mod ownership;
pub mod review;
