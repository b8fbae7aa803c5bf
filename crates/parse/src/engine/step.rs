//! What a reader's step returns: the one "need more input" type every reader shares.

/// Not enough input to decide yet: hold what is there and wait for more, or for the end
/// of the input, when the same step decides with what it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need;

/// How far a reader got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Took {
    /// Consumed this many bytes (0: it changed its state); it goes on.
    Go(usize),
    /// It ends after consuming this many bytes.
    End(usize),
}

/// One step of a reader.
pub(crate) type Step = Result<Took, Need>;

/// What a recognizer found at the start of its input: `Ok(Some(_))` a match, `Ok(None)`
/// none, `Err(Need)` not known before more input arrives.
pub(crate) type Look<T> = Result<Option<T>, Need>;
