//! Incremental, repairing JSON.
