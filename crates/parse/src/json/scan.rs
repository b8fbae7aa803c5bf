//! The fast scan of a string body: how far plain text runs before a byte that needs a
//! look (a quote, a backslash, a control character).

use crate::json::reader::Quote;

/// Bytes that end a run of plain string text: the closing quote, `\`, control
/// characters, and for smart quotes the lead byte of U+201D / U+2019.
#[expect(clippy::indexing_slicing, reason = "const evaluation; every index is below 256")]
const fn stop_table(quote: Quote) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'\\' as usize] = true;
    table[b'"' as usize] = true;
    match quote {
        Quote::Double => {}
        Quote::Single => table[b'\'' as usize] = true,
        Quote::SmartDouble | Quote::SmartSingle => table[0xE2] = true,
        Quote::Token => {}
    }
    table
}

static STOP_DOUBLE: [bool; 256] = stop_table(Quote::Double);
static STOP_SINGLE: [bool; 256] = stop_table(Quote::Single);
static STOP_SMART: [bool; 256] = stop_table(Quote::SmartDouble);

pub(crate) fn stop_table_for(quote: Quote) -> &'static [bool; 256] {
    match quote {
        Quote::Double => &STOP_DOUBLE,
        Quote::Single => &STOP_SINGLE,
        Quote::SmartDouble | Quote::SmartSingle => &STOP_SMART,
        Quote::Token => &STOP_DOUBLE,
    }
}

/// How many bytes at the start of `rest` are plain string text (none of them a stop byte
/// of `table`). With `words` (the table is the double-quote table: control characters, `"` and
/// `\\`), eight bytes are checked at a time first, the long runs of a file's content.
pub(crate) fn plain_run(rest: &[u8], table: &[bool; 256], words: bool) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Whether any byte of `x` is zero (exact for "any": no false negatives).
    const fn zero_byte(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGH
    }
    let mut i = 0;
    if words {
        for chunk in rest.chunks_exact(8) {
            let Ok(bytes) = <[u8; 8]>::try_from(chunk) else { break };
            let x = u64::from_le_bytes(bytes);
            // A byte below 0x20, a `"` or a `\`: the byte scan below finds which.
            let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
            let quote = zero_byte(x ^ (ONES * u64::from(b'"')));
            let backslash = zero_byte(x ^ (ONES * u64::from(b'\\')));
            if control | quote | backslash != 0 {
                break;
            }
            i += 8;
        }
    }
    let tail = rest.get(i..).unwrap_or_default();
    i + tail
        .iter()
        .position(|&b| table.get(usize::from(b)).copied().unwrap_or(true))
        .unwrap_or(tail.len())
}

#[cfg(test)]
mod tests {
    use super::plain_run;

    /// The word scan finds the same stop as the byte scan, wherever it is and whatever the
    /// bytes around it (every byte value, at every offset of an 8-byte word).
    #[test]
    fn words_stop_where_bytes_stop() {
        let mut table = [false; 256];
        for (b, stop) in table.iter_mut().enumerate() {
            *stop = b < 0x20 || b == usize::from(b'"') || b == usize::from(b'\\');
        }
        let fillers: [&[u8]; 3] =
            [b"plain text ", "\u{e9}t\u{e9} \u{6771}\u{4eac} \u{1f600}".as_bytes(), b"~}{|"];
        for stop in 0..=255u8 {
            for filler in fillers {
                for at in 0..20 {
                    let mut bytes: Vec<u8> = filler.iter().copied().cycle().take(at).collect();
                    bytes.push(stop);
                    bytes.extend_from_slice(b"more text after it");
                    let slow =
                        bytes.iter().position(|&b| table[usize::from(b)]).unwrap_or(bytes.len());
                    assert_eq!(plain_run(&bytes, &table, true), slow, "stop {stop:#x} at {at}");
                    assert_eq!(plain_run(&bytes, &table, false), slow);
                }
            }
        }
    }
}
