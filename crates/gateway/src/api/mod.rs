//! The API families. Only this module knows their JSON.

pub(crate) mod openai;
