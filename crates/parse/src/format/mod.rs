//! Tool-call dialects.
