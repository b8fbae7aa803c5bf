//! Refusals and hedges in the opening of a reply: when held text may go out, and when a
//! reply that claims it has no tools is asked for again.

/// A sentence that ends at or after this many bytes, and is no refusal, releases the text
/// before the window fills: refusals say so in their opening sentences, and a small local
/// model takes seconds to write 200 characters.
const FIRST_SENTENCE: usize = 24;

/// Whether `text` has begun its answer: a sentence that is no hedge (see `is_hedge`) ended at
/// or after `FIRST_SENTENCE` bytes. A sentence ends with a `.`, `!` or `?` followed by white
/// space, a CJK full stop, or a line break.
pub(super) fn answer_begun(text: &str) -> bool {
    let mut start = 0;
    sentence_ends(text).any(|end| {
        let sentence = text.get(start..end).unwrap_or_default();
        start = end;
        end >= FIRST_SENTENCE && !is_hedge(sentence)
    })
}

/// Where the sentences of `text` end (after their last character): at a `.`, `!` or `?`
/// followed by white space, a CJK full stop, or a line break. The end of the text is no
/// sentence end: more may follow.
fn sentence_ends(text: &str) -> impl Iterator<Item = usize> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        while let Some((at, c)) = chars.next() {
            let ends = match c {
                '。' | '！' | '？' | '\n' => true,
                '.' | '!' | '?' => chars.peek().is_some_and(|(_, next)| next.is_whitespace()),
                _ => false,
            };
            if ends {
                return Some(at + c.len_utf8());
            }
        }
        None
    })
}

/// Whether a sentence is a pleasantry or an apology, after which a refusal often comes ("I'd
/// be happy to help with that. Unfortunately, I can't …"): it does not release the text.
fn is_hedge(sentence: &str) -> bool {
    const OPENERS: &[&str] = &[
        "sure",
        "certainly",
        "of course",
        "absolutely",
        "okay",
        "ok",
        "alright",
        "great question",
        "good question",
        "thanks",
        "thank you",
        "i'd be happy",
        "i would be happy",
        "i'd be glad",
        "i would be glad",
        "i'm happy",
        "i am happy",
        "i'm glad",
        "happy to help",
        "glad to help",
        "i'd love to",
        "i can help",
        "i understand",
        "i see",
        "sorry",
        "i'm sorry",
        "i am sorry",
        "i apologize",
        "apologies",
        "unfortunately",
        "however",
        "but",
        "let me",
        "i'll",
        "i will",
        "hello",
        "hi",
        "hey",
        "好的",
        "当然",
        "抱歉",
        "很抱歉",
        "对不起",
        "很高兴",
        "不过",
        "但是",
    ];
    let sentence = sentence.trim_start().to_lowercase().replace('’', "'");
    OPENERS.iter().any(|opener| {
        sentence.strip_prefix(opener).is_some_and(|rest| {
            // A whole word: "hi" is no opener of "history" (CJK openers have no spaces).
            !opener.is_ascii() || !rest.starts_with(|c: char| c.is_alphanumeric())
        })
    })
}

/// Phrases of a refusal that gives no reason ("I'm sorry, but I can't assist with that.").
const BARE_PHRASES: &[&str] = &[
    "can't assist",
    "cannot assist",
    "unable to assist",
    "can't help with",
    "cannot help with",
    "unable to help with",
];

/// Whether `text` refuses: it claims the model has no tools (`looks_like_refusal`), or
/// says it cannot assist.
pub(crate) fn refuses(text: &str) -> bool {
    let opening: String =
        text.chars().take(400).collect::<String>().to_lowercase().replace('’', "'");
    looks_like_refusal(text) || BARE_PHRASES.iter().any(|phrase| opening.contains(phrase))
}

/// Sentences that only offer more help, after a refusal.
const COURTESIES: &[&str] = &["anything else", "let me know", "feel free", "help you with"];

/// Whether a whole reply is a refusal and nothing else: short (under the refusal window),
/// and each of its sentences refuses or only offers more help. A plain answer that is only
/// this answered nothing.
pub(crate) fn bare_refusal(text: &str) -> bool {
    let text = text.trim();
    if text.is_empty() || text.len() >= super::REFUSAL_WINDOW || !refuses(text) {
        return false;
    }
    let mut starts = std::iter::once(0).chain(sentence_ends(text));
    let ends = sentence_ends(text).chain(std::iter::once(text.len()));
    let sentences = ends.filter_map(|end| text.get(starts.next()?..end));
    sentences.filter(|s| !s.trim().is_empty()).all(|sentence| {
        let lower = sentence.to_lowercase();
        refuses(sentence) || COURTESIES.iter().any(|phrase| lower.contains(phrase))
    })
}

/// Whether held text that may still be a bare refusal can go out: it is past the refusal
/// window, or its first sentence ended and refuses nothing.
pub(crate) fn past_refusal(text: &str) -> bool {
    text.len() >= super::REFUSAL_WINDOW || (answer_begun(text) && !refuses(text))
}

/// Phrases with which models claim they have no tools, in the opening of a reply.
pub(super) fn looks_like_refusal(text: &str) -> bool {
    const PHRASES: &[&str] = &[
        "don't have access to",
        "do not have access to",
        "don't have the ability",
        "do not have the ability",
        "don't have any tools",
        "do not have any tools",
        "don't have tools",
        "no tools available",
        "no access to tools",
        "cannot call",
        "can't call",
        "unable to call",
        "cannot access real-time",
        "can't access real-time",
        "don't have real-time",
        "do not have real-time",
        "unable to access",
        "as an ai language model",
        "i'm not able to browse",
        "没有可用的工具",
        "无法调用",
        "无法访问",
        "没有工具",
    ];
    let opening: String =
        text.chars().take(400).collect::<String>().to_lowercase().replace('’', "'");
    PHRASES.iter().any(|phrase| opening.contains(phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_24_a_bare_refusal_is_told_from_an_answer() {
        assert!(bare_refusal("I'm sorry, but I can't assist with that."));
        assert!(bare_refusal(
            "I’m sorry, but I don't have any tools available to assist with this request.\n"
        ));
        assert!(!bare_refusal("The neutron was discovered by James Chadwick in 1932."));
        let long = format!("I can't assist with that. {}", "But here is what I know. ".repeat(9));
        assert!(!bare_refusal(&long));
        assert!(bare_refusal(
            "I'm sorry, but I can't assist with that. Is there anything else I can help you with?"
        ));
        assert!(!bare_refusal("I can't assist with live data. The roots are x = 1 and x = 2."));
        assert!(!past_refusal("I'm sorry, but I can't assist with that."));
        assert!(past_refusal("The neutron was discovered by James Chadwick in 1932. "));
        assert!(past_refusal(&long));
        assert!(!past_refusal("The neutron was"));
    }

    #[test]
    fn refusals_are_recognized() {
        assert!(looks_like_refusal(
            "I’m sorry, but I don't have access to real-time weather data."
        ));
        assert!(looks_like_refusal("抱歉，我没有可用的工具。"));
        assert!(!looks_like_refusal("Paris is sunny today."));
    }

    #[test]
    fn issue_18_a_first_sentence_releases_text() {
        assert!(answer_begun("Paris is mild in spring. The"));
        assert!(answer_begun("巴黎的春天温和宜人，阳光充足。"));
        assert!(!answer_begun("Sure. I can"), "too short a sentence to tell");
        assert!(!answer_begun("The price is 3.5 dollars per"), "a decimal point");
        assert!(!answer_begun("Paris is mild in spring."), "the next character is not known yet");
    }

    /// A pleasantry or an apology opens many refusals: the sentence after it decides.
    #[test]
    fn issue_18_a_hedge_does_not_release_text() {
        let hedged =
            "I’d be happy to help with that. Unfortunately, I can't look up the weather. Try";
        assert!(!answer_begun(hedged));
        assert!(!answer_begun("Sure thing, happy to look into it! Let me see what I can do. "));
        assert!(answer_begun("Sure! Paris is mild and often sunny in spring. The"));
        assert!(answer_begun("History shows that Paris was founded early. It"), "a whole word");
        assert!(!answer_begun("当然可以，我很乐意帮您查询天气。"));
    }
}
