//! The reader's side of [`crate::json::expr`]: a number in an object or array followed by an
//! operator is an expression, collected byte by byte (in any chunking) and worked out where
//! the value ends.

use super::{Expect, Frame, Lex, Reader, Sink, is_ws};
use crate::json::expr;

impl Reader {
    /// One byte in [`Lex::AfterNumber`] or [`Lex::Expr`]: how many bytes it took (0: the
    /// number or expression ended before it, to be read again as structure), or `None`
    /// where the value breaks off (an expression that is no sum read here).
    pub(super) fn arithmetic(&mut self, b: u8, sink: &mut impl Sink) -> Option<usize> {
        match self.lex {
            Lex::AfterNumber => {
                if is_ws(b) {
                    return Some(1);
                }
                if expr::is_operator(b, self.stack.last() == Some(&Frame::Object)) {
                    self.scalar.push(' ');
                    self.scalar.push(char::from(b));
                    self.lex = Lex::Expr { depth: 0 };
                    return Some(1);
                }
                self.lex = Lex::Structural;
                self.end_scalar(sink);
                Some(0)
            }
            // `2 /* today */`, `30 // seconds`: a comment after a number.
            Lex::Expr { .. } if matches!(b, b'/' | b'*') && self.scalar.ends_with('/') => {
                self.scalar.pop();
                if !self.end_expr(sink) {
                    return None;
                }
                self.lex =
                    if b == b'/' { Lex::LineComment } else { Lex::BlockComment { star: false } };
                Some(1)
            }
            Lex::Expr { depth } => match expr::continues(b, depth) {
                Some(depth) if self.scalar.len() < expr::MAX_LEN => {
                    self.scalar.push(char::from(b));
                    self.lex = Lex::Expr { depth };
                    Some(1)
                }
                _ => {
                    let ends = depth == 0 && matches!(b, b',' | b'}' | b']');
                    if !(ends && self.end_expr(sink)) {
                        return None;
                    }
                    self.lex = Lex::Structural;
                    Some(0)
                }
            },
            // Called in those two states only; any other would consume nothing and stay as it
            // is, so it ends the value rather than loop.
            _ => None,
        }
    }

    /// Ends the expression in `scalar`: a lone number as it was written, a sum worked out
    /// (a repair). False, with nothing reported, when it is neither.
    pub(super) fn end_expr(&mut self, sink: &mut impl Sink) -> bool {
        self.scalar.truncate(self.scalar.trim_end().len());
        if expr::is_number(&self.scalar) {
            self.end_scalar(sink);
            return true;
        }
        let Some(value) = expr::evaluate(&self.scalar) else { return false };
        sink.repaired("an arithmetic expression was worked out");
        sink.scalar(&value);
        self.scalar.clear();
        self.expect = Expect::CommaOrEnd;
        true
    }
}
