//! Numbers as people write them: digits with separators, signs, currencies and exponents,
//! scaled by the word after them (`5k`, `20%`), number words (`twelve`, `a dozen`), and the
//! same measure in the other units a tool may take (`50mH` is 0.05 H, `3 minutes` 180 s).
//! What [`crate::chat::grounding`] compares a call's values with.

pub(crate) fn sort(numbers: &mut Vec<f64>) {
    numbers.sort_by(f64::total_cmp);
    numbers.dedup();
}

/// Whether sorted `numbers` hold `n` (to a relative 1e-9: `0.1 * 3` is `0.3`, and `1e-9`
/// is not `2e-9`).
pub(crate) fn contains(numbers: &[f64], n: f64) -> bool {
    let tolerance = 1e-9 * n.abs();
    let at = numbers.partition_point(|x| *x < n - tolerance);
    numbers.get(at).is_some_and(|x| (x - n).abs() <= tolerance)
}

/// Number words people write instead of digits.
const NUMBER_WORDS: &[(&str, f64)] = &[
    ("zero", 0.0),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("thirteen", 13.0),
    ("fourteen", 14.0),
    ("fifteen", 15.0),
    ("sixteen", 16.0),
    ("seventeen", 17.0),
    ("eighteen", 18.0),
    ("nineteen", 19.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("forty", 40.0),
    ("fifty", 50.0),
    ("sixty", 60.0),
    ("seventy", 70.0),
    ("eighty", 80.0),
    ("ninety", 90.0),
    ("hundred", 100.0),
    ("thousand", 1e3),
    ("million", 1e6),
    ("billion", 1e9),
    ("trillion", 1e12),
    ("dozen", 12.0),
    ("decade", 10.0),
    ("century", 100.0),
    ("half", 0.5),
    ("quarter", 0.25),
    ("twice", 2.0),
    ("double", 2.0),
    ("triple", 3.0),
    // Months, for dates written as numbers (`2022-07-10` for "July 10, 2022").
    ("january", 1.0),
    ("jan", 1.0),
    ("february", 2.0),
    ("feb", 2.0),
    ("march", 3.0),
    ("mar", 3.0),
    ("april", 4.0),
    ("apr", 4.0),
    ("may", 5.0),
    ("june", 6.0),
    ("jun", 6.0),
    ("july", 7.0),
    ("jul", 7.0),
    ("august", 8.0),
    ("aug", 8.0),
    ("september", 9.0),
    ("sep", 9.0),
    ("sept", 9.0),
    ("october", 10.0),
    ("oct", 10.0),
    ("november", 11.0),
    ("nov", 11.0),
    ("december", 12.0),
    ("dec", 12.0),
];

/// What a word right after a number multiplies it by (`5k`, `$1.2M`, `3 billion`, `20%`).
fn scale(word: &str) -> Option<f64> {
    Some(match word {
        "%" | "percent" => 0.01,
        "k" | "thousand" => 1e3,
        "m" | "mn" | "million" => 1e6,
        "b" | "bn" | "billion" => 1e9,
        "trillion" => 1e12,
        _ => return None,
    })
}

/// Adds every number `text` writes: digits (with thousands separators, a decimal part, a
/// sign, a currency sign), scaled by the word after them (`k`, `million`, `%`, …), and
/// number words. A scaled number adds both its values (`1.75m` is 1.75 and 1,750,000).
pub(crate) fn numbers_in(text: &str, out: &mut Vec<f64>) {
    let bytes = text.as_bytes();
    let mut at = 0;
    // A number of feet just read, and where it ends, for the inches that may follow.
    let mut feet: Option<(f64, usize)> = None;
    while let Some(&b) = bytes.get(at) {
        if b.is_ascii_digit() {
            let start = at;
            let mut digits = String::new();
            // The integer part, with `,` only before a group of exactly three digits.
            while let Some(&c) = bytes.get(at) {
                if c.is_ascii_digit() {
                    digits.push(char::from(c));
                    at += 1;
                } else if c == b','
                    && bytes.get(at + 1..at + 4).is_some_and(|g| g.iter().all(u8::is_ascii_digit))
                    && !bytes.get(at + 4).is_some_and(u8::is_ascii_digit)
                {
                    at += 1;
                } else {
                    break;
                }
            }
            if bytes.get(at) == Some(&b'.') && bytes.get(at + 1).is_some_and(u8::is_ascii_digit) {
                digits.push('.');
                at += 1;
                while let Some(&c) = bytes.get(at).filter(|c| c.is_ascii_digit()) {
                    digits.push(char::from(c));
                    at += 1;
                }
            }
            // An exponent written on the number: `1e-9`, `6.02E23`.
            if let Some((exponent, end)) = exponent(bytes, at) {
                digits.push_str(&format!("e{exponent}"));
                at = end;
            }
            let Ok(value) = digits.parse::<f64>() else { continue };
            let negative = is_negative(bytes, start);
            let signed = if negative { -value } else { value };
            out.push(value);
            if negative {
                out.push(signed);
            }
            if let Some(factor) = scale(&word_after(text, at)) {
                out.push(signed * factor);
            }
            // `3 x 10^8`, `1.6 × 10^-19`.
            if let Some(exponent) = times_ten(text.get(at..).unwrap_or_default()) {
                out.push(signed * 10f64.powi(exponent));
            }
            // The same measure in the units a tool may take: `50mH` is 0.05 H, `3 minutes`
            // 180 seconds, `5ft 10in` 70 inches.
            let unit = unit_after(text, at);
            out.extend(unit_factors(unit).iter().map(|factor| signed * factor));
            match (feet.take(), unit) {
                (Some((feet, end)), "in" | "inch" | "inches" | "\"")
                    if text.get(end..start).is_some_and(|between| between.trim().is_empty()) =>
                {
                    out.push(feet * 12.0 + signed);
                }
                (_, "ft" | "feet" | "foot" | "'") => {
                    feet = Some((
                        signed,
                        at + text.get(at..).map_or(0, |rest| {
                            let spaced = rest.len() - rest.trim_start_matches(' ').len();
                            spaced + unit.len()
                        }),
                    ));
                }
                _ => {}
            }
        } else if b.is_ascii_alphabetic() {
            let start = at;
            while bytes.get(at).is_some_and(u8::is_ascii_alphabetic) {
                at += 1;
            }
            let word = text.get(start..at).unwrap_or_default().to_ascii_lowercase();
            let word = word.strip_suffix('s').filter(|w| w.len() > 2).unwrap_or(&word);
            if let Some((_, n)) = NUMBER_WORDS.iter().find(|(w, _)| *w == word) {
                out.push(*n);
            }
            // "starts from rest", "at rest": a speed of 0.
            let before = text.get(..start).unwrap_or_default().split_whitespace().next_back();
            let before = before.unwrap_or_default().to_ascii_lowercase();
            if word == "rest" && (before == "from" || before == "at") {
                out.push(0.0);
            }
        } else {
            at += 1;
        }
    }
}

/// Whether the number starting at `start` has a minus sign before it (`-5`, `-$100`, `$-3`,
/// `x - 2`), one that is not a hyphen between words or numbers (`2023-10`, `x-1`).
fn is_negative(bytes: &[u8], start: usize) -> bool {
    let mut at = start;
    let mut currency = false;
    let mut spaced = false;
    loop {
        let Some(before) = at.checked_sub(1) else { return false };
        match bytes.get(before) {
            Some(b'$') if !currency => {
                currency = true;
                at = before;
            }
            Some(b' ') if !spaced => {
                spaced = true;
                at = before;
            }
            Some(b'-') => {
                return !before
                    .checked_sub(1)
                    .and_then(|b| bytes.get(b))
                    .is_some_and(u8::is_ascii_alphanumeric);
            }
            _ => return false,
        }
    }
}

/// The exponent of a number written `1e-9` (`e` or `E`, a sign, one to three digits, no
/// letter after them) at `at`, and where it ends.
fn exponent(bytes: &[u8], at: usize) -> Option<(i32, usize)> {
    if !matches!(bytes.get(at), Some(b'e' | b'E')) {
        return None;
    }
    let mut end = at + 1;
    let negative = match bytes.get(end) {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => false,
    };
    if matches!(bytes.get(end), Some(b'-' | b'+')) {
        end += 1;
    }
    let digits = end;
    while bytes.get(end).is_some_and(u8::is_ascii_digit) && end - digits < 3 {
        end += 1;
    }
    if end == digits || bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let exponent: i32 = std::str::from_utf8(bytes.get(digits..end)?).ok()?.parse().ok()?;
    Some((if negative { -exponent } else { exponent }, end))
}

/// The power of ten a number is multiplied by right after it (`x 10^8`, `× 10^-19`,
/// `*10^3`).
fn times_ten(rest: &str) -> Option<i32> {
    let rest = rest.trim_start();
    let rest = ["x", "X", "×", "*"].iter().find_map(|sign| rest.strip_prefix(sign))?;
    let rest = rest.trim_start().strip_prefix("10^")?;
    let (negative, rest) = match rest.strip_prefix(['-', '−']) {
        Some(rest) => (true, rest),
        None => (false, rest.strip_prefix('+').unwrap_or(rest)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).take(3).collect();
    let exponent: i32 = digits.parse().ok()?;
    Some(if negative { -exponent } else { exponent })
}

/// The unit written right after a number (spaces skipped), as written: letters (`µ` among
/// them), or a foot or inch mark (`'`, `"`).
fn unit_after(text: &str, at: usize) -> &str {
    let rest = text.get(at..).unwrap_or_default().trim_start_matches(' ');
    if rest.starts_with(['\'', '"']) {
        return rest.get(..1).unwrap_or_default();
    }
    let end = rest.find(|c: char| !c.is_alphabetic()).unwrap_or(rest.len());
    rest.get(..end).unwrap_or_default()
}

/// What a measure in `unit` is multiplied by in the other units a tool may take: an SI
/// prefix on a unit symbol (`mH`, `µF`, `kg`, `ns`), minutes and hours in seconds, days in
/// hours, weeks in days, years in months, weeks and days, feet in inches.
fn unit_factors(unit: &str) -> &'static [f64] {
    match unit.to_lowercase().as_str() {
        "min" | "mins" | "minute" | "minutes" => return &[60.0],
        "h" | "hr" | "hrs" | "hour" | "hours" => return &[60.0, 3600.0],
        "day" | "days" => return &[24.0],
        "week" | "weeks" => return &[7.0],
        "year" | "years" => return &[12.0, 52.0, 365.0],
        "ft" | "feet" | "foot" | "'" => return &[12.0],
        _ => {}
    }
    let mut chars = unit.chars();
    let Some(prefix) = chars.next() else { return &[] };
    let symbol = chars.as_str().to_lowercase();
    const SYMBOLS: &[&str] =
        &["h", "f", "s", "g", "l", "w", "a", "v", "m", "hz", "j", "n", "pa", "b"];
    if !SYMBOLS.contains(&symbol.as_str()) {
        return &[];
    }
    match prefix {
        'm' => &[1e-3],
        'µ' | 'μ' | 'u' => &[1e-6],
        'n' => &[1e-9],
        'p' => &[1e-12],
        'k' | 'K' => &[1e3],
        'M' => &[1e6],
        'G' => &[1e9],
        _ => &[],
    }
}

/// The word right after a number (spaces skipped): letters, or `%`.
fn word_after(text: &str, at: usize) -> String {
    let rest = text.get(at..).unwrap_or_default();
    let rest = rest.trim_start_matches(' ');
    if rest.starts_with('%') {
        return "%".to_owned();
    }
    let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
    word.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(text: &str) -> Vec<f64> {
        let mut out = Vec::new();
        numbers_in(text, &mut out);
        sort(&mut out);
        out
    }

    #[test]
    fn numbers_are_read_as_people_write_them() {
        assert!(numbers("a loan of $700,000 with income $120,000").contains(&700_000.0));
        assert!(numbers("revenues of $1.2M in 2020").contains(&1_200_000.0));
        assert!(numbers("an interest rate of 5%").contains(&0.05));
        assert!(numbers("cash flows of -$100, $40").contains(&-100.0));
        assert!(numbers("over the past decade, two adults").contains(&10.0));
        assert!(numbers("two adults").contains(&2.0));
        assert!(numbers("weighs 70kg and is 1.75m tall").contains(&70.0));
        assert!(numbers("weighs 70kg and is 1.75m tall").contains(&1.75));
        // A list is not a thousands separator; a date's hyphens are no minus signs.
        assert_eq!(numbers("[5, 3, 4]"), vec![3.0, 4.0, 5.0]);
        assert!(!numbers("2023-10-05").contains(&-10.0));
        assert!(numbers("x = 3.5 or -2").contains(&-2.0));
        assert!(numbers("ones and twos").contains(&2.0));
        assert!(numbers("no numbers here").is_empty());
    }

    #[test]
    fn issue_24_numbers_in_scientific_notation_and_units_are_read() {
        assert_eq!(numbers("charges of 1e-9 and 2E-9"), vec![1e-9, 2e-9]);
        assert!(!contains(&numbers("a charge of 1e-9"), 2e-9));
        assert!(contains(&numbers("the speed of light, 3 x 10^8 m/s"), 3e8));
        assert!(contains(&numbers("a charge of 1.6 × 10^-19 C"), 1.6e-19));
        // An `e` that starts a word is no exponent.
        assert_eq!(numbers("3 eggs, 2e and 5e5x"), vec![2.0, 3.0, 5.0]);
        assert!(contains(&numbers("capacitance of 100µF and inductance of 50mH"), 1e-4));
        assert!(contains(&numbers("capacitance of 100µF and inductance of 50mH"), 0.05));
        assert!(numbers("a 2 km walk").contains(&2000.0));
        assert!(numbers("a duration of 3 minutes").contains(&180.0));
        assert!(numbers("every hour for 6 hours").contains(&21_600.0));
        assert!(numbers("height 5ft 10in").contains(&70.0));
        assert!(numbers("I am 5'11\" tall").contains(&71.0));
        assert!(numbers("6 feet").contains(&72.0));
        assert!(numbers("it started from rest").contains(&0.0));
        assert!(!numbers("the rest of the day").contains(&0.0));
        // Inches far from the feet are not added to them.
        assert!(!numbers("5 ft of rope and later 10 in a box").contains(&70.0));
    }
}
