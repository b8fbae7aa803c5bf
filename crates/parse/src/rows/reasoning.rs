//! Reasoning and channel markers, and the preambles that may start an output.

use std::sync::LazyLock;

/// One family's reasoning block: what opens it and what closes it.
#[derive(Debug)]
pub(crate) struct Reasoning {
    pub(crate) open: &'static str,
    pub(crate) close: &'static str,
}

const fn block(open: &'static str, close: &'static str) -> Reasoning {
    Reasoning { open, close }
}

/// `<think>`: DeepSeek R1, Qwen3 and most open models. A `</think>` with no block open
/// is removed with a warning.
pub(crate) static THINK: Reasoning = block("<think>", "</think>");
/// Muse's reasoning: the message to itself.
pub(crate) static MUSE_SELF: Reasoning = block("<|start|>assistant to=self<|message|>", "<|eom|>");

/// Reasoning markers of each model family, in the order they are tried: `<think>`,
/// `[THINK]` (Magistral), `<|START_THINKING|>` (Cohere), `<seed:think>` (Seed-OSS),
/// `<mm:think>` (MiniMax-M3), `<|inner_prefix|>` (Apertus), the analysis channel
/// (gpt-oss, and LLM-jp-4.1's with a space after each token), Gemma 4's thought channel,
/// Kimi K3's think channel, K2 Horizon's three think tags, Muse's `to=self`.
pub(crate) static REASONING: [&Reasoning; 14] = [
    &THINK,
    &block("[THINK]", "[/THINK]"),
    &block("<|START_THINKING|>", "<|END_THINKING|>"),
    &block("<seed:think>", "</seed:think>"),
    &block("<mm:think>", "</mm:think>"),
    &block("<|inner_prefix|>", "<|inner_suffix|>"),
    &block("<|channel|>analysis<|message|>", "<|end|>"),
    &block("<|channel|> analysis<|message|>", "<|end|>"),
    &block("<|channel>thought", "<channel|>"),
    &block("<|open|>think<|sep|>", "<|close|>think<|sep|>"),
    &block("<ifm|think>", "</ifm|think>"),
    &block("<ifm|think_fast>", "</ifm|think_fast>"),
    &block("<ifm|think_faster>", "</ifm|think_faster>"),
    &MUSE_SELF,
];

/// Channel markers around visible text: like reasoning markers, they are removed from
/// it. Kimi K3's response channel, Harmony's final channel and its commentary channel
/// without a recipient (a preamble the user sees), Muse's message headers, Functionary
/// v3.2's `all` recipient, Cohere's response and text markers, Ling's end of turn. LLM-jp-4.1
/// writes Harmony's with a space after each token.
pub(crate) static CHANNELS: [Channel; 24] = [
    Channel::opens("<|open|>response<|sep|>"),
    Channel::plain("<|close|>response<|sep|>"),
    Channel::plain("<|close|>message<|sep|>"),
    Channel::final_answer("<|start|>assistant<|channel|>final<|message|>"),
    Channel::final_answer("<|channel|>final<|message|>"),
    Channel::plain("<|start|>assistant<|channel|>commentary<|message|>"),
    Channel::plain("<|channel|>commentary<|message|>"),
    Channel::plain("<|return|>"),
    Channel::plain("<|end|>"),
    Channel::plain("<|start|>assistant to=user<|message|>"),
    Channel::plain("<|start|>assistant<|message|>"),
    Channel::final_answer("<|start|> assistant<|channel|> final<|message|>"),
    Channel::final_answer("<|channel|> final<|message|>"),
    Channel::plain("<|start|> assistant<|channel|> commentary<|message|>"),
    Channel::plain("<|channel|> commentary<|message|>"),
    Channel::plain("<|start|> assistant<|message|>"),
    Channel::plain("<|eot|>"),
    Channel::plain("<|eom|>"),
    Channel::plain(">>>all\n"),
    Channel::opens("<|START_RESPONSE|>"),
    Channel::plain("<|END_RESPONSE|>"),
    Channel::opens("<|START_TEXT|>"),
    Channel::plain("<|END_TEXT|>"),
    Channel::plain("<|role_end|>"),
];

/// A channel marker and what it does besides being removed.
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) marker: &'static str,
    /// It opens the visible answer: inside reasoning it ends the reasoning too (a model
    /// whose prompt opened the think channel may go straight to its answer: Kimi K3's
    /// `<|open|>response<|sep|>`, Harmony's final channel without `<|end|>`).
    pub(crate) opens_answer: bool,
    /// Harmony's final channel: the answer itself. Call syntax other than Harmony's own
    /// messages is text there (bare JSON in a final answer is what the user asked for).
    pub(crate) is_final: bool,
}

impl Channel {
    const fn plain(marker: &'static str) -> Channel {
        Channel { marker, opens_answer: false, is_final: false }
    }

    const fn opens(marker: &'static str) -> Channel {
        Channel { marker, opens_answer: true, is_final: false }
    }

    const fn final_answer(marker: &'static str) -> Channel {
        Channel { marker, opens_answer: true, is_final: true }
    }
}

/// Every channel marker.
pub(crate) fn channel_markers() -> impl Iterator<Item = &'static str> {
    CHANNELS.iter().map(|channel| channel.marker)
}

/// The channel markers that open the visible answer.
pub(crate) fn answer_openers() -> impl Iterator<Item = &'static str> {
    CHANNELS.iter().filter(|channel| channel.opens_answer).map(|channel| channel.marker)
}

/// What a preamble at the very start of the output opens.
#[derive(Debug)]
pub(crate) enum Preamble {
    /// This reasoning block.
    Reasoning(&'static Reasoning),
    /// Visible text: the preamble is removed like a channel marker.
    Channel,
}

/// Headers that may start the output when the prompt ended in the role header
/// (`<|start|>assistant`): Muse's recipients.
pub(crate) static PREAMBLES: [(&str, Preamble); 4] = [
    (" to=self<|message|>", Preamble::Reasoning(&MUSE_SELF)),
    ("to=self<|message|>", Preamble::Reasoning(&MUSE_SELF)),
    (" to=user<|message|>", Preamble::Channel),
    ("to=user<|message|>", Preamble::Channel),
];

/// For each of `<`, `[` and `>`, the bytes that may follow it in a reasoning, channel or
/// preamble marker: text at any other pair of bytes is none of them.
pub(crate) static MARKER_PAIRS: LazyLock<[[bool; 256]; 3]> = LazyLock::new(|| {
    let mut table = [[false; 256]; 3];
    let markers = REASONING
        .iter()
        .flat_map(|reasoning| [reasoning.open, reasoning.close])
        .chain(channel_markers());
    for marker in markers {
        let bytes = marker.as_bytes();
        let (Some(&first), Some(&second)) = (bytes.first(), bytes.get(1)) else { continue };
        if let Some(row) = marker_row(first).and_then(|row| table.get_mut(row)) {
            if let Some(slot) = row.get_mut(usize::from(second)) {
                *slot = true;
            }
        }
    }
    table
});

/// The first three bytes of every reasoning and channel marker ([`head3`]), sorted, for
/// the pairs that [`MARKER_PAIRS`] lets through.
pub(crate) static MARKER_HEADS: LazyLock<Vec<u32>> = LazyLock::new(|| {
    let mut heads: Vec<u32> = REASONING
        .iter()
        .flat_map(|reasoning| [reasoning.open, reasoning.close])
        .chain(channel_markers())
        .filter_map(|marker| head3(marker.as_bytes()))
        .collect();
    heads.sort_unstable();
    heads.dedup();
    heads
});

/// The first three bytes of `bytes` as one number, if it has three.
pub(crate) fn head3(bytes: &[u8]) -> Option<u32> {
    match bytes {
        [a, b, c, ..] => Some(u32::from_be_bytes([0, *a, *b, *c])),
        _ => None,
    }
}

/// The row of [`MARKER_PAIRS`] for a first byte.
pub(crate) fn marker_row(first: u8) -> Option<usize> {
    match first {
        b'<' => Some(0),
        b'[' => Some(1),
        b'>' => Some(2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{REASONING, channel_markers, marker_row};

    /// The text scan looks for reasoning and channel markers only at the bytes
    /// `marker_row` knows: a row that starts with any other byte would never match.
    #[test]
    fn every_marker_starts_with_a_byte_the_scan_looks_at() {
        let markers = REASONING
            .iter()
            .flat_map(|reasoning| [reasoning.open, reasoning.close])
            .chain(channel_markers());
        for marker in markers {
            let first = marker.as_bytes().first().copied().unwrap_or_default();
            assert!(
                marker_row(first).is_some(),
                "{marker:?} starts with {:?}, which the text scan does not look at; \
                 add it to `marker_row` and the engine's trigger bytes",
                char::from(first)
            );
        }
    }
}
