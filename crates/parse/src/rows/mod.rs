//! The tables formats are made of: reasoning and channel markers, start-of-output
//! preambles, model-native marker pairs, and the markup vocabulary. The engine and
//! the readers branch on the typed columns of these rows, never on a format's name.

pub(crate) mod envelope;
pub(crate) mod file;
pub(crate) mod label;
pub(crate) mod markup;
pub(crate) mod native;
pub(crate) mod reasoning;
pub(crate) mod template;
