//! Arithmetic where a number goes. A model that has not worked a value out writes the sum
//! instead (`"rate": 8 / 100`, `"seconds": 3 * 60`, `"angle": 2 * Math.PI`); the reader
//! collects such an expression after a number in an object or array and puts its value in
//! its place, as a repair. Only `+`, `-`, `*`, `/`, `**`, parentheses, numbers and π and e
//! (`Math.PI`, `math.pi`, `pi`, `Math.E`, `math.e`) are read; anything else (a variable, a
//! call) leaves the expression unread, and the value breaks off there as before.

/// The longest expression read, in bytes.
pub(crate) const MAX_LEN: usize = 256;

/// The deepest nesting of parentheses (and unary signs) read.
const MAX_DEPTH: u32 = 32;

/// Whether `text` (a scalar just read) is a finite number an expression may start with.
pub(crate) fn is_number(text: &str) -> bool {
    text.bytes().next().is_some_and(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+'))
        && text.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Whether `b`, after a number and white space, begins an operator. In an array only `*`
/// and `/` do: `[1 -2]` is two numbers with a comma missing, as it was read before.
pub(crate) fn is_operator(b: u8, in_object: bool) -> bool {
    matches!(b, b'*' | b'/') || (in_object && matches!(b, b'+' | b'-'))
}

/// Whether `b` continues an expression with `depth` parentheses open, and the depth after
/// it. A `)` with none open, and anything outside the expression's alphabet, ends it.
pub(crate) fn continues(b: u8, depth: u8) -> Option<u8> {
    match b {
        b'(' => depth.checked_add(1),
        b')' => depth.checked_sub(1),
        b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'.' | b'_' | b'+' | b'-' | b'*' | b'/' => {
            Some(depth)
        }
        b' ' | b'\t' | b'\n' | b'\r' => Some(depth),
        _ => None,
    }
}

/// The value of `text` in canonical JSON (an integer when it is a whole number below
/// 2^53), or `None` when it is no expression read here or its value is not finite.
pub(crate) fn evaluate(text: &str) -> Option<String> {
    let tokens = tokens(text)?;
    let mut parser = Parser { tokens: &tokens, at: 0 };
    let value = parser.sum(0)?;
    if parser.at != tokens.len() || !value.is_finite() {
        return None;
    }
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        // A whole number below 2^53 converts exactly.
        #[expect(clippy::cast_possible_truncation, reason = "whole and below 2^53")]
        return Some((value as i64).to_string());
    }
    // 15 significant digits: `1e-9 * 3` is 0.000000003, not 0.0000000030000000000000004.
    let rounded = format!("{value:.14e}").parse::<f64>().unwrap_or(value);
    Some(format!("{rounded}"))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Number(f64),
    Op(u8),
    /// `**`.
    Power,
    Open,
    Close,
}

fn tokens(text: &str) -> Option<Vec<Token>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' | b')' => {
                out.push(if b == b'(' { Token::Open } else { Token::Close });
                i += 1;
            }
            b'*' if bytes.get(i + 1) == Some(&b'*') => {
                out.push(Token::Power);
                i += 2;
            }
            b'+' | b'-' | b'*' | b'/' => {
                out.push(Token::Op(b));
                i += 1;
            }
            _ => {
                let word = |from: usize| {
                    bytes
                        .get(from..)
                        .unwrap_or_default()
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_'))
                        .count()
                };
                let mut len = word(i);
                // An exponent's sign: `1e-9` is one number.
                let exponent = len > 0
                    && matches!(bytes.get(i + len - 1), Some(b'e' | b'E'))
                    && bytes.get(i).is_some_and(u8::is_ascii_digit)
                    && matches!(bytes.get(i + len), Some(b'+' | b'-'))
                    && bytes.get(i + len + 1).is_some_and(u8::is_ascii_digit);
                if exponent {
                    len += 1 + word(i + len + 1);
                }
                let word = text.get(i..i + len)?;
                out.push(Token::Number(number(word)?));
                i += len.max(1);
            }
        }
    }
    Some(out)
}

/// A number (`1.5e3`) or a constant.
fn number(word: &str) -> Option<f64> {
    match word {
        "Math.PI" | "math.pi" | "pi" | "PI" => Some(std::f64::consts::PI),
        "Math.E" | "math.e" => Some(std::f64::consts::E),
        _ if word.bytes().next().is_some_and(|b| b.is_ascii_digit() || b == b'.') => {
            word.parse::<f64>().ok()
        }
        _ => None,
    }
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<Token> {
        self.tokens.get(self.at).copied()
    }

    fn sum(&mut self, depth: u32) -> Option<f64> {
        let mut value = self.product(depth)?;
        while let Some(Token::Op(op @ (b'+' | b'-'))) = self.peek() {
            self.at += 1;
            let right = self.product(depth)?;
            value = if op == b'+' { value + right } else { value - right };
        }
        Some(value)
    }

    fn product(&mut self, depth: u32) -> Option<f64> {
        let mut value = self.power(depth)?;
        while let Some(Token::Op(op @ (b'*' | b'/'))) = self.peek() {
            self.at += 1;
            let right = self.power(depth)?;
            if op == b'/' && right == 0.0 {
                return None;
            }
            value = if op == b'*' { value * right } else { value / right };
        }
        Some(value)
    }

    fn power(&mut self, depth: u32) -> Option<f64> {
        let base = self.unary(depth)?;
        if self.peek() == Some(Token::Power) {
            self.at += 1;
            let exponent = self.power(depth + 1)?;
            return Some(base.powf(exponent));
        }
        Some(base)
    }

    fn unary(&mut self, depth: u32) -> Option<f64> {
        if depth > MAX_DEPTH {
            return None;
        }
        let token = self.peek()?;
        self.at += 1;
        match token {
            Token::Number(n) => Some(n),
            Token::Op(b'-') => self.unary(depth + 1).map(|n| -n),
            Token::Op(b'+') => self.unary(depth + 1),
            Token::Open => {
                let value = self.sum(depth + 1)?;
                (self.peek() == Some(Token::Close)).then_some(())?;
                self.at += 1;
                Some(value)
            }
            Token::Op(_) | Token::Power | Token::Close => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_models_write_are_worked_out() {
        for (text, value) in [
            ("8 / 100", "0.08"),
            ("3 * 60", "180"),
            ("20 * 60 + 15 * 60", "2100"),
            ("10 + 15", "25"),
            ("2 * Math.PI", "6.28318530717959"),
            ("(1 + 2) * -3", "-9"),
            ("2 ** 10", "1024"),
            ("1.5e3 / 3", "500"),
            ("-4.5 - 0.5", "-5"),
            ("10 / 4", "2.5"),
            ("6.674e-11 * 2", "0.00000000013348"),
            ("0.1 * 3", "0.3"),
        ] {
            assert_eq!(evaluate(text).as_deref(), Some(value), "{text}");
        }
    }

    #[test]
    fn what_is_no_sum_is_not_read() {
        for text in ["1 + x", "8 /", "1 / 0", "(1 + 2", "1 + 2)", "3 * 10^8", "2 ** 10000", "f(2)"]
        {
            assert_eq!(evaluate(text), None, "{text}");
        }
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert_eq!(evaluate(&deep), None, "nested deeper than it reads");
        assert!(is_number("8") && is_number("-0.5") && !is_number("inf") && !is_number("x1"));
    }
}
