//! Incremental, repairing JSON: the reader and the canonical writer.

pub(crate) mod args;
pub(crate) mod canon;
pub(crate) mod expr;
pub(crate) mod reader;
pub(crate) mod scalar;
pub(crate) mod scan;
pub(crate) mod sink;
