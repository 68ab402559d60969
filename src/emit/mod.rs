//! Stage 5a: the only place rendering output touches the disk or stdout.

pub mod check;
pub mod directory;
mod field_location;
pub mod git_base;
pub mod krm;
pub mod kustomize_plugin;
pub mod ownership;
mod resource_list_text;
pub mod review;
pub mod special_files;
