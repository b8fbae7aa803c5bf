//! Issue 14: the shaper's own check that a call names a tool the request declared, apart
//! from the parser's. The parser here is given a tool the request did not declare, as a bug
//! in building its tool set could; a call to that tool must not reach the client. (A file of
//! its own, so that changes to the shaper and to this check do not meet.)

use super::*;
use crate::chat::types::{Message, RetryReason};

fn spec(name: &str) -> ToolSpec {
    ToolSpec { name: name.into(), description: None, parameters: None, strict: false }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: vec![Message::User("Clean up.".into())],
        tools: vec![spec("get_weather")],
        ..ChatRequest::default()
    }
}

/// The declared tools of `request()`, with a parser that also accepts `delete_all`.
fn parser_wider_than_the_request() -> DeclaredTools {
    let declared = DeclaredTools::new(&[spec("get_weather")]).unwrap();
    let wider = DeclaredTools::new(&[spec("get_weather"), spec("delete_all")]).unwrap();
    DeclaredTools { set: wider.set, specs: declared.specs }
}

fn call(name: &str) -> String {
    format!(
        "<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {{\"path\": \"/\"}}}}\n</tool_call>\n"
    )
}

/// What the client would get from `reply`, fed in small pieces as a stream arrives.
fn shape(reply: &str) -> (Vec<ChatEvent>, Shaper) {
    let tools = parser_wider_than_the_request();
    let mut shaper = Shaper::new(&request(), &tools, true, ReasoningCalls::Ignore, None);
    let mut out = Vec::new();
    let chars: Vec<char> = reply.chars().collect();
    for piece in chars.chunks(3) {
        shaper.feed(&piece.iter().collect::<String>(), &mut out);
    }
    shaper.finish(&mut out);
    (out, shaper)
}

#[test]
fn issue_14_a_call_the_parser_accepts_but_the_request_did_not_declare_never_reaches_the_client() {
    let (out, shaper) = shape(&call("delete_all"));
    assert!(
        out.iter()
            .all(|event| matches!(event, ChatEvent::Text(text) if !text.contains("delete_all"))),
        "neither a call nor its text goes out: {out:?}"
    );
    assert_eq!(shaper.n_calls(), 0);
    // It counts as a call to an unknown tool: the pipeline asks again, as it does when the
    // parser itself rejects a name.
    assert_eq!(shaper.problem(), Some(RetryReason::UnknownTool));

    // Next to a declared call, only the declared one goes out, as call 0.
    let (out, shaper) = shape(&format!("{}{}", call("delete_all"), call("get_weather")));
    let starts: Vec<(usize, &str)> = out
        .iter()
        .filter_map(|event| match event {
            ChatEvent::CallStart { index, name, .. } => Some((*index, name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(0, "get_weather")], "{out:?}");
    assert!(out.iter().all(|event| match event {
        ChatEvent::CallArgs { index, .. } | ChatEvent::CallEnd { index, .. } => *index == 0,
        ChatEvent::Text(text) => !text.contains("delete_all"),
        _ => true,
    }));
    assert_eq!((shaper.n_calls(), shaper.problem()), (1, None));
}
