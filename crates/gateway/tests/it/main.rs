//! The gateway's integration tests: one binary (HOUSE-STYLE 2.6), everything in-process on
//! `127.0.0.1:0` against a scripted mock upstream.
//!
//! - `common`: `MockUpstream` (a small axum app that streams scripted replies as OpenAI SSE,
//!   or errors, stalls and disconnects, and records every request), `spawn_gateway`,
//!   the test HTTP client, request builders, and `check_stream`, the Chat Completions
//!   SSE grammar checker.
//! - `openai`: non-streaming completions: calls parsed from each dialect, `tool_choice`
//!   and `parallel_tool_calls` policy, retries (missing call, unknown tool, refusal,
//!   truncation), repair and coercion, history rendered as text, `/v1/models`, `/healthz`,
//!   `/metrics`.
//! - `stored` (issue 26): stored responses: `previous_response_id`, `item_reference`, read
//!   back, deleted, per key.
//! - `streaming`: the same through `stream: true`, every stream grammar-checked; markers
//!   split across 1..=7-character chunks never leak; one byte-level golden.
//! - `errors`: OpenAI error shapes for 400/401/404/413, upstream 429/500/unreachable/stall
//!   before the first byte, in-band errors after it, client disconnect cancelling upstream.
//! - `anthropic`: Anthropic Messages on the same pipeline: blocks, the stream event grammar,
//!   `tool_choice`, tool results with `is_error`, auth and error shapes, `count_tokens`, models.
//! - `call_format`: `call_format = "auto"`: the contract in the syntax of the model's family,
//!   from its name or the chat template at `GET /props`; history in the same syntax.
//! - `constrain`: constrained decoding: a forced choice carries the grammar of its calls in
//!   the upstream's field; a refused grammar is dropped and remembered.
//! - `modes`: `native` passes requests through; `auto` falls back to emulation when the
//!   upstream rejects tools.
//! - `faults`: upstream faults (refused, 429/5xx with and without `retry-after`, timeouts,
//!   stalls, breaks mid-text and mid-call, malformed SSE, invalid or empty bodies, replies that
//!   never end) and client faults (disconnects, slow readers, oversize or malformed bodies,
//!   wrong types, unknown tool names, stray tool results) on both API surfaces.
//! - `exposure` (issue 14): raw-socket checks of what an exposed gateway withstands without a
//!   key: half-sent heads, idle and slow connections, the connection cap, unauthenticated
//!   bodies, request ids, a shutdown past its drain timeout, errors counted after streaming.
//! - `fail_closed` (issue 14): tool lists the parser cannot hold are refused; call syntax in
//!   tool results (every corpus dialect and format), quoted back by the model, is no call.
//! - `integrity` (issue 14): nothing the upstream sent is skipped or faked: unreadable
//!   events and output in shapes that cannot be read (OpenAI and Anthropic upstreams), lone
//!   surrogates and bytes that are not UTF-8, error objects, unfinished replies, caps and
//!   timeouts (passthrough too), error bodies and model lists that never end, upstream 4xx
//!   kept, redirects not followed, `/readyz` and its shared probe, keep-alives while a stream
//!   is held.
//! - `reasoning` (issue 18): reasoning for the clients that ask (`reasoning_content`,
//!   thinking blocks), upstream reasoning passed on, `reasoning_calls` per model.
//! - `requests` (issue 18): `allowed_tools`, Anthropic threads, split assistant turns, and
//!   out-of-range values.
//! - `responses` (issue 16): the Responses API: event grammar, function, custom and namespaced
//!   calls, reasoning items, hosted tools left out, stateless answers, errors.
//! - `routing` (issue 18): several upstreams by model name: aliases, patterns, the default
//!   route, fallbacks, a remembered refusal of native tools, the model list, `/readyz`.
//! - `structured` (issue 18): structured outputs on the three APIs: native `response_format`
//!   or the prompt, the schema check, retries with the error, tools alongside.
//! - `retry_hints`: `x-should-retry: false` on failures a client retry will not fix (the
//!   emulation's retries ran out, a bad request), `true` on transient ones.
//! - `finish`: `length` only when the token limit cut the reply; an incomplete call otherwise
//!   fails the reply.
//! - `usage`: the usage of every attempt, on the three APIs, streamed and not.
//! - `stale` (issue 24): a kept-alive connection the upstream closed is sent on again.
//! - `followups` (issue 24): continuations add the parallel calls a small model left out;
//!   calls whose required numbers appear nowhere give way to a plain answer.
//! - `layout` (issue 25): ARCHITECTURE.md's layout invariants over the sources: the neutral
//!   core, emulation and the upstream wires import no client family and not each other, no
//!   task is spawned, no file is over 900 lines.
//! - `shutdown`: cancelling the token refuses new connections and lets in-flight streams
//!   finish.

// Helpers outside `#[test]` functions fail the test the same way the tests do.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers report failures by panicking"
)]

mod anthropic;
mod anthropic_native;
mod caching;
mod call_format;
mod common;
mod constrain;
mod errors;
mod exposure;
mod fail_closed;
mod faults;
mod finish;
mod followups;
mod gemini;
mod images;
mod inspect;
mod integrity;
mod keys;
mod layout;
mod modes;
mod native_families;
mod odds;
mod ollama;
mod openai;
mod reasoning;
mod requests;
mod responses;
mod retry_hints;
mod routing;
mod shutdown;
mod stale;
mod stored;
mod streaming;
mod structured;
mod usage;
