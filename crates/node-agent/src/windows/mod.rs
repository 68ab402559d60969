//! The real Windows system (placeholder while the engine lands).
