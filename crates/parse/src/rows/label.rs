//! Labelled calls: a label names the tool, a second label (on the next line)
//! introduces its arguments.

use crate::Builtin;

/// A pair of labels and the dialect they belong to.
#[derive(Debug)]
pub(crate) struct Labels {
    pub(crate) dialect: Builtin,
    pub(crate) name: &'static str,
    pub(crate) args: &'static [&'static str],
}

/// ReAct's `Action:` + `Action Input:`, and `function.name:` + `function.arguments:`.
pub(crate) static LABELS: [Labels; 2] = [
    Labels { dialect: Builtin::React, name: "Action:", args: &["Action Input:", "Action input:"] },
    Labels {
        dialect: Builtin::KeyValue,
        name: "function.name:",
        args: &["function.arguments:", "function.parameters:"],
    },
];
