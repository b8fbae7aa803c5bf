//! The `serde` feature: the results as JSON, in the shapes `toolshim parse` prints.
//!
//! Keys come in a fixed order, call arguments are embedded verbatim (big numbers, key
//! order and escapes as the parser wrote them; with `serde_json` they are raw JSON, with
//! other serializers the raw value's own form), and byte spans are left out:
//!
//! - [`Parsed`] as `{"calls":[…],"incomplete":[…],"content":…,"reasoning":…,"rejected":[…],
//!   "warnings":[…],"saw_tool_syntax":…}`.
//! - [`ToolCall`] as `{"id":…,"name":…,"arguments":{…}}`, [`Rejected`] as
//!   `{"name":…,"reason":…}`, [`Warning`] as `{"code":…,"message":…}`, a [`WarningCode`]
//!   as its [`WarningCode::as_str`].
//! - [`Event`] as an object whose first key is `"type"` (`text`, `reasoning`, `call_start`,
//!   `args_delta`, `call_end`, `rejected`, `warning`; a warning event adds `call_idx`, a
//!   `call_end` event says whether the call is `complete`).
//! - [`Outcome`] as `{"kind":"calls","calls":[…],"exits":[…]}`, `{"kind":"text"}`, or
//!   `{"kind":"failed","reason":…,"message":…,"unknown_tools":[…],"raw":…}`.

use serde::Serialize;
use serde::ser::{Error as _, SerializeMap, SerializeStruct, Serializer};
use serde_json::value::RawValue;

use crate::{
    Event, Fragment, Outcome, Parsed, Rejected, ToolCall, ToolParseError, Warning, WarningCode,
};

impl Serialize for Fragment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl Serialize for WarningCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A call's arguments, embedded as the JSON they are.
struct Arguments<'a>(&'a ToolCall);

impl Serialize for Arguments<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let call = self.0;
        let raw: &RawValue = serde_json::from_str(&call.arguments).map_err(|err| {
            S::Error::custom(format!(
                "internal error: the arguments of call `{}` are not valid JSON ({err}): {}; \
                 please report this bug with the input",
                call.name, call.arguments
            ))
        })?;
        raw.serialize(serializer)
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("ToolCall", 3)?;
        object.serialize_field("id", &self.id)?;
        object.serialize_field("name", &self.name)?;
        object.serialize_field("arguments", &Arguments(self))?;
        object.end()
    }
}

impl Serialize for Rejected {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("Rejected", 2)?;
        object.serialize_field("name", &self.name)?;
        object.serialize_field("reason", &self.reason)?;
        object.end()
    }
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("Warning", 2)?;
        object.serialize_field("code", &self.code)?;
        object.serialize_field("message", &self.message)?;
        object.end()
    }
}

impl Serialize for Parsed {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("Parsed", 7)?;
        object.serialize_field("calls", &self.calls)?;
        object.serialize_field("incomplete", &self.incomplete)?;
        object.serialize_field("content", &self.content)?;
        object.serialize_field("reasoning", &self.reasoning)?;
        object.serialize_field("rejected", &self.rejected)?;
        object.serialize_field("warnings", &self.warnings)?;
        object.serialize_field("saw_tool_syntax", &self.saw_tool_syntax)?;
        object.end()
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_map(None)?;
        match self {
            Event::Text(text) => {
                object.serialize_entry("type", "text")?;
                object.serialize_entry("text", text)?;
            }
            Event::Reasoning(text) => {
                object.serialize_entry("type", "reasoning")?;
                object.serialize_entry("text", text)?;
            }
            Event::CallStart { call_idx, id, name } => {
                object.serialize_entry("type", "call_start")?;
                object.serialize_entry("call_idx", call_idx)?;
                object.serialize_entry("id", id)?;
                object.serialize_entry("name", name)?;
            }
            Event::ArgsDelta { call_idx, json } => {
                object.serialize_entry("type", "args_delta")?;
                object.serialize_entry("call_idx", call_idx)?;
                object.serialize_entry("json", json)?;
            }
            Event::CallEnd { call_idx, call } => {
                object.serialize_entry("type", "call_end")?;
                object.serialize_entry("call_idx", call_idx)?;
                object.serialize_entry("call", &**call)?;
                object.serialize_entry("complete", &call.complete)?;
            }
            Event::Rejected(rejected) => {
                object.serialize_entry("type", "rejected")?;
                object.serialize_entry("name", &rejected.name)?;
                object.serialize_entry("reason", &rejected.reason)?;
            }
            Event::Warning(warning) => {
                object.serialize_entry("type", "warning")?;
                object.serialize_entry("code", &warning.code)?;
                object.serialize_entry("message", &warning.message)?;
                object.serialize_entry("call_idx", &warning.call_idx)?;
            }
        }
        object.end()
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_map(None)?;
        match self {
            Outcome::Calls { calls, exits } => {
                object.serialize_entry("kind", "calls")?;
                object.serialize_entry("calls", calls)?;
                object.serialize_entry("exits", exits)?;
            }
            Outcome::Text => object.serialize_entry("kind", "text")?,
            Outcome::Failed { reason, raw } => {
                let unknown: &[String] = match reason {
                    ToolParseError::UnknownTools { names } => names,
                    _ => &[],
                };
                object.serialize_entry("kind", "failed")?;
                object.serialize_entry("reason", reason.code())?;
                object.serialize_entry("message", &reason.to_string())?;
                object.serialize_entry("unknown_tools", unknown)?;
                object.serialize_entry("raw", raw)?;
            }
        }
        object.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: Option<&str>, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.map(str::to_owned),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            span: 0..0,
            complete: true,
        }
    }

    fn warning(code: WarningCode, message: &str, call_idx: Option<usize>) -> Warning {
        Warning { code, message: message.to_owned(), call_idx, span: 0..0 }
    }

    fn sample() -> Parsed {
        Parsed {
            calls: vec![
                call(
                    Some("call_1"),
                    "get_weather",
                    r#"{"city":"Paris","n":123456789012345678901234567890}"#,
                ),
                call(None, "get_time", "{}"),
            ],
            incomplete: vec![ToolCall {
                complete: false,
                ..call(None, "get_time", r#"{"tz":"Eu"}"#)
            }],
            content: "Let me \"check\".\n\u{1}🦀".to_owned(),
            reasoning: "think".to_owned(),
            rejected: vec![Rejected {
                name: "rm".to_owned(),
                reason: "not a tool".to_owned(),
                span: 0..0,
            }],
            warnings: vec![warning(WarningCode::RepairedJson, "added `}`", Some(0))],
            saw_tool_syntax: true,
        }
    }

    #[test]
    fn parsed_keeps_its_key_order_and_arguments_verbatim() {
        let expected = concat!(
            r#"{"calls":[{"id":"call_1","name":"get_weather","arguments":{"city":"Paris","n":123456789012345678901234567890}},"#,
            r#"{"id":null,"name":"get_time","arguments":{}}],"#,
            r#""incomplete":[{"id":null,"name":"get_time","arguments":{"tz":"Eu"}}],"#,
            r#""content":"Let me \"check\".\n\u0001🦀","reasoning":"think","#,
            r#""rejected":[{"name":"rm","reason":"not a tool"}],"#,
            r#""warnings":[{"code":"repaired_json","message":"added `}`"}],"saw_tool_syntax":true}"#,
        );
        assert_eq!(serde_json::to_string(&sample()).unwrap(), expected);
        let empty = r#"{"calls":[],"incomplete":[],"content":"","reasoning":"","rejected":[],"warnings":[],"saw_tool_syntax":false}"#;
        assert_eq!(serde_json::to_string(&Parsed::default()).unwrap(), empty);
    }

    #[test]
    fn events_are_typed_objects() {
        let cases = [
            (Event::Text("a\"b".into()), r#"{"type":"text","text":"a\"b"}"#),
            (Event::Reasoning("hm".into()), r#"{"type":"reasoning","text":"hm"}"#),
            (
                Event::CallStart { call_idx: 0, id: None, name: "get_time".to_owned() },
                r#"{"type":"call_start","call_idx":0,"id":null,"name":"get_time"}"#,
            ),
            (
                Event::CallStart { call_idx: 2, id: Some("c".to_owned()), name: "f".to_owned() },
                r#"{"type":"call_start","call_idx":2,"id":"c","name":"f"}"#,
            ),
            (
                Event::ArgsDelta { call_idx: 0, json: r#"{"city":"Pa"#.into() },
                r#"{"type":"args_delta","call_idx":0,"json":"{\"city\":\"Pa"}"#,
            ),
            (
                Event::CallEnd { call_idx: 0, call: Box::new(call(None, "f", r#"{"big":1e400}"#)) },
                r#"{"type":"call_end","call_idx":0,"call":{"id":null,"name":"f","arguments":{"big":1e400}},"complete":true}"#,
            ),
            (
                Event::Rejected(Box::new(Rejected {
                    name: "x".to_owned(),
                    reason: "unknown".to_owned(),
                    span: 0..1,
                })),
                r#"{"type":"rejected","name":"x","reason":"unknown"}"#,
            ),
            (
                Event::Warning(Box::new(warning(WarningCode::Truncated, "cut", Some(1)))),
                r#"{"type":"warning","code":"truncated","message":"cut","call_idx":1}"#,
            ),
            (
                Event::Warning(Box::new(warning(WarningCode::MalformedCall, "bad", None))),
                r#"{"type":"warning","code":"malformed_call","message":"bad","call_idx":null}"#,
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(serde_json::to_string(&event).unwrap(), expected);
        }
    }

    #[test]
    fn invalid_arguments_are_an_error_not_bad_json() {
        let parsed = Parsed { calls: vec![call(None, "f", r#"{"a":"#)], ..Parsed::default() };
        let err = serde_json::to_string(&parsed).unwrap_err();
        assert!(err.to_string().contains("internal error"), "{err}");
        let event = Event::CallEnd { call_idx: 0, call: Box::new(call(None, "f", "")) };
        assert!(serde_json::to_string(&event).is_err());
    }

    #[test]
    fn outcomes_render_each_kind_in_contract_order() {
        let calls = Outcome::Calls {
            calls: vec![call(None, "get_time", "{}")],
            exits: vec![call(Some("c2"), "finish", r#"{"answer":1e400}"#)],
        };
        assert_eq!(
            serde_json::to_string(&calls).unwrap(),
            concat!(
                r#"{"kind":"calls","calls":[{"id":null,"name":"get_time","arguments":{}}],"#,
                r#""exits":[{"id":"c2","name":"finish","arguments":{"answer":1e400}}]}"#,
            )
        );
        assert_eq!(serde_json::to_string(&Outcome::Text).unwrap(), r#"{"kind":"text"}"#);
        let raw = "<tool_call>{\"name\":\"rm\"}</tool_call>\r\n\u{1}";
        let reason = ToolParseError::UnknownTools { names: vec!["rm".to_owned()] };
        let failed = Outcome::Failed { reason: reason.clone(), raw: raw.to_owned() };
        let rendered = serde_json::to_string(&failed).unwrap();
        let expected = serde_json::json!({
            "kind": "failed",
            "reason": "unknown_tools",
            "message": reason.to_string(),
            "unknown_tools": ["rm"],
            "raw": raw,
        });
        assert_eq!(serde_json::from_str::<serde_json::Value>(&rendered).unwrap(), expected);
        assert!(rendered.starts_with(r#"{"kind":"failed","reason":"unknown_tools","message":"#));
        assert!(rendered.contains(r#","unknown_tools":["rm"],"raw":"#), "{rendered}");
        let no_call = Outcome::Failed { reason: ToolParseError::NoCallParsed, raw: String::new() };
        let rendered = serde_json::to_string(&no_call).unwrap();
        assert!(rendered.starts_with(r#"{"kind":"failed","reason":"no_call_parsed","#));
        assert!(rendered.ends_with(r#","unknown_tools":[],"raw":""}"#), "{rendered}");
    }
}
