//! The request inspector (issue 27; docs/operations.md): when `[inspect] enabled`, the last
//! requests are kept in memory, each with every attempt the gateway made for it (the prompt
//! the upstream got, the raw text it wrote, what the parser found, the verdict and the
//! correction) and what the client received; `api::inspect` serves them to an admin key.
//!
//! Memory is bounded: every byte of text a record keeps is reserved against `max_bytes`
//! first, evicting the oldest finished records; what does not fit is cut, saying how much
//! was left out. Keys and configured secrets are replaced before anything is kept.

pub(crate) mod page;
mod record;
mod tee;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub(crate) use record::{Attempt, Finding, PLAIN_ANSWER, RETRY, Record, Summary};
pub(crate) use tee::Tee;

use crate::chat::Usage;
use crate::config::Config;
use crate::neutral::{FinishReason, Role, UpstreamRequest};

/// What a record costs besides its text (its fields and bookkeeping), counted against the
/// bound.
const RECORD_OVERHEAD: usize = 512;
/// What an attempt costs besides its text.
const ATTEMPT_OVERHEAD: usize = 256;
/// The most attempts one record keeps (a request makes at most `max_retries + 2`).
const MAX_ATTEMPTS: usize = 16;
/// What replaces a secret in kept text.
const REDACTED: &str = "[redacted]";

/// The kept requests.
pub(crate) struct Inspector {
    max_requests: usize,
    max_bytes: usize,
    /// One request may take at most this much, so one huge request leaves room for others.
    max_record: usize,
    secrets: Vec<String>,
    ring: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    entries: VecDeque<Arc<Entry>>,
    /// Bytes reserved by every entry kept.
    bytes: usize,
    next_id: u64,
}

/// One kept request.
pub(crate) struct Entry {
    pub(crate) id: u64,
    started: Instant,
    record: Mutex<Record>,
    bytes: AtomicUsize,
    done: AtomicBool,
}

impl Entry {
    /// The record as it is now.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Record) -> T) -> T {
        f(&self.record.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What the list shows of the inspector itself.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Totals {
    pub(crate) kept: usize,
    pub(crate) bytes: usize,
    pub(crate) max_requests: usize,
    pub(crate) max_bytes: usize,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector")
            .field("max_requests", &self.max_requests)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Inspector {
    /// The inspector `config` asks for, if any.
    pub(crate) fn new(config: &Config) -> Option<Arc<Inspector>> {
        let inspect = &config.inspect;
        if !inspect.enabled {
            return None;
        }
        let max_bytes = usize::try_from(inspect.max_bytes).unwrap_or(usize::MAX);
        Some(Arc::new(Inspector {
            max_requests: inspect.requests.max(1),
            max_bytes,
            max_record: (max_bytes / 4).max(RECORD_OVERHEAD * 2),
            secrets: secrets(config),
            ring: Mutex::new(Ring::default()),
        }))
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a record for a request of `family` under `key`; `None` when not even its
    /// bookkeeping fits (every kept request is still running).
    pub(crate) fn begin(
        self: &Arc<Self>,
        family: &'static str,
        key: Option<&str>,
    ) -> Option<Capture> {
        let mut ring = self.ring();
        if !ring.make_room(RECORD_OVERHEAD, self.max_bytes, None) {
            return None;
        }
        while ring.entries.len() >= self.max_requests && ring.evict_oldest(None) {}
        ring.next_id += 1;
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let record = Record::new(ring.next_id, started_ms, family, key);
        let entry = Arc::new(Entry {
            id: ring.next_id,
            started: Instant::now(),
            record: Mutex::new(record),
            bytes: AtomicUsize::new(RECORD_OVERHEAD),
            done: AtomicBool::new(false),
        });
        ring.bytes += RECORD_OVERHEAD;
        ring.entries.push_back(Arc::clone(&entry));
        Some(Capture { inspector: Arc::clone(self), entry })
    }

    /// The kept requests, newest first.
    pub(crate) fn list(&self) -> (Vec<Summary>, Totals) {
        let ring = self.ring();
        let entries: Vec<Arc<Entry>> = ring.entries.iter().rev().cloned().collect();
        let totals = Totals {
            kept: ring.entries.len(),
            bytes: ring.bytes,
            max_requests: self.max_requests,
            max_bytes: self.max_bytes,
        };
        drop(ring);
        (entries.iter().map(|entry| entry.read(Record::summary)).collect(), totals)
    }

    /// One kept request.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<Entry>> {
        self.ring().entries.iter().find(|entry| entry.id == id).cloned()
    }

    /// `text` with every secret replaced.
    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// Reserves up to `want` bytes for `entry`, making room by evicting the oldest finished
    /// records (never `entry`); what was granted.
    fn reserve(&self, entry: &Arc<Entry>, want: usize) -> usize {
        // A finished record takes nothing more (it may be gone from the ring already).
        if entry.done.load(Ordering::Acquire) {
            return 0;
        }
        let used = entry.bytes.load(Ordering::Relaxed);
        let want = want.min(self.max_record.saturating_sub(used));
        let mut ring = self.ring();
        ring.make_room(want, self.max_bytes, Some(entry));
        let granted = want.min(self.max_bytes.saturating_sub(ring.bytes));
        ring.bytes += granted;
        entry.bytes.fetch_add(granted, Ordering::Relaxed);
        granted
    }
}

impl Ring {
    /// Evicts the oldest finished records (not `keep`) until `want` more bytes fit; whether
    /// they do.
    fn make_room(&mut self, want: usize, max: usize, keep: Option<&Arc<Entry>>) -> bool {
        while self.bytes + want > max {
            if !self.evict_oldest(keep) {
                return false;
            }
        }
        true
    }

    /// Drops the oldest finished record that is not `keep`; whether there was one.
    fn evict_oldest(&mut self, keep: Option<&Arc<Entry>>) -> bool {
        let found = self.entries.iter().position(|entry| {
            entry.done.load(Ordering::Acquire) && keep.is_none_or(|keep| !Arc::ptr_eq(keep, entry))
        });
        let Some(at) = found else { return false };
        if let Some(entry) = self.entries.remove(at) {
            self.bytes = self.bytes.saturating_sub(entry.bytes.load(Ordering::Relaxed));
        }
        true
    }
}

/// The keys and upstream credentials the configuration names: never kept.
fn secrets(config: &Config) -> Vec<String> {
    let mut secrets: Vec<String> = config.api_keys.clone();
    for key in config.keys.values() {
        if let Ok(secret) = key.secret(|var| std::env::var(var).ok()) {
            secrets.push(secret);
        }
    }
    for (_, upstream) in config.upstream_configs() {
        if let Ok(secret) = std::env::var(&upstream.api_key_env) {
            secrets.push(secret);
        }
    }
    // Longest first, so a secret that holds another is replaced whole.
    secrets.retain(|secret| secret.len() >= 4);
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    secrets.dedup();
    secrets
}

/// What is said where text was cut.
pub(crate) fn left_out_note(bytes: usize) -> String {
    format!("…[{bytes} more bytes not kept]")
}

tokio::task_local! {
    /// The record of the request being served, while its handler runs.
    static CURRENT: Capture;
}

/// The record of the request being served, if it is kept.
pub(crate) fn current() -> Option<Capture> {
    CURRENT.try_with(Capture::clone).ok()
}

/// Runs `future` with `capture` as the request's record.
pub(crate) async fn scope<F: Future>(capture: Option<Capture>, future: F) -> F::Output {
    match capture {
        Some(capture) => CURRENT.scope(capture, future).await,
        None => future.await,
    }
}

/// A handle on one request's record, for the code that serves it.
#[derive(Clone)]
pub(crate) struct Capture {
    inspector: Arc<Inspector>,
    entry: Arc<Entry>,
}

impl Capture {
    /// `text`, redacted and cut to what the bound allows (saying so).
    pub(crate) fn keep(&self, text: &str) -> String {
        let (mut kept, left_out) = self.keep_part(text);
        if left_out > 0 {
            kept.push_str(&left_out_note(left_out));
        }
        kept
    }

    /// `text`, redacted, as much of it as the bound allows; and how many bytes were left out.
    pub(crate) fn keep_part(&self, text: &str) -> (String, usize) {
        let mut text = self.inspector.redact(text);
        let granted = self.inspector.reserve(&self.entry, text.len());
        if granted >= text.len() {
            return (text, 0);
        }
        // Room for the note that says what was left out.
        let mut end = granted.saturating_sub(48);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let left_out = text.len() - end;
        text.truncate(end);
        (text, left_out)
    }

    /// Changes the record.
    pub(crate) fn note(&self, f: impl FnOnce(&mut Record)) {
        f(&mut self.entry.record.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Starts an attempt (bounded: past `MAX_ATTEMPTS` nothing more is kept of them).
    pub(crate) fn attempt(&self, attempt: Attempt) {
        if self.inspector.reserve(&self.entry, ATTEMPT_OVERHEAD) < ATTEMPT_OVERHEAD {
            return;
        }
        self.note(|record| {
            if record.attempts.len() < MAX_ATTEMPTS {
                record.attempts.push(attempt);
            }
        });
    }

    /// Changes the last attempt, if there is one.
    pub(crate) fn last_attempt(&self, f: impl FnOnce(&mut Attempt)) {
        self.note(|record| {
            if let Some(attempt) = record.attempts.last_mut() {
                f(attempt);
            }
        });
    }

    /// The request ended (its response was read, or the client went away).
    pub(crate) fn end(&self, status: u16) {
        let latency = self.entry.started.elapsed();
        self.note(|record| {
            record.status = Some(status);
            record.latency_ms = Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
            record.in_flight = false;
        });
        self.entry.done.store(true, Ordering::Release);
    }
}

/// The request is served on `chain` as `mode` says (`emulate`, `native`, `plain`,
/// `passthrough`).
pub(crate) fn served(chain: &crate::state::Chain, mode: &str) {
    if let Some(capture) = current() {
        let route = chain.describe();
        capture.note(|record| (record.route, record.mode) = (Some(route), Some(mode.to_owned())));
    }
}

/// A body relayed to the upstream as it is (`native` or `passthrough`).
pub(crate) fn relayed(kind: &'static str, body: &serde_json::Value) {
    if let Some(capture) = current() {
        let model = body.get("model").and_then(serde_json::Value::as_str).unwrap_or_default();
        let body = capture.keep(&serde_json::to_string_pretty(body).unwrap_or_default());
        let number = capture.entry.read(|record| record.attempts.len()) + 1;
        capture.attempt(Attempt {
            number,
            kind,
            model: model.to_owned(),
            body,
            ..Attempt::default()
        });
    }
}

/// The upstream failed the last attempt with `err`; `then` says what the gateway did next
/// (`emulate`), if anything.
pub(crate) fn failed(err: &crate::error::ApiError, then: Option<&str>) {
    if let Some(capture) = current() {
        capture.failed(err, then);
    }
}

impl Capture {
    /// The upstream failed the last attempt with `err`; `then` says what the gateway did
    /// next, if anything.
    pub(crate) fn failed(&self, err: &crate::error::ApiError, then: Option<&str>) {
        let error = self.keep(&format!("{}: {}", err.kind(), err.message()));
        self.last_attempt(|attempt| attempt.error = Some(error));
        if let Some(then) = then {
            self.note(|record| {
                let before = record.mode.take().unwrap_or_default();
                record.mode = Some(format!("{before}, then {then}"));
            });
        }
    }

    /// An attempt of `kind` (`emulated`, `plain`) about to be sent as `request`; `corrected`:
    /// its last turn is the correction of the attempt before.
    pub(crate) fn prompt(&self, kind: &'static str, request: &UpstreamRequest, corrected: bool) {
        let turns: Vec<record::Turn> = request
            .turns
            .iter()
            .map(|turn| record::Turn {
                role: match turn.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                },
                text: self.keep(&turn.text),
                images: turn.images.len(),
            })
            .collect();
        let correction = turns.last().filter(|_| corrected).map(|turn| turn.text.clone());
        let number = self.entry.read(|record| record.attempts.len()) + 1;
        self.attempt(Attempt {
            number,
            kind,
            model: request.model.clone(),
            system: self.keep(&request.system),
            turns,
            correction,
            grammar: request.grammar.is_some(),
            ..Attempt::default()
        });
    }

    /// What the last attempt's reply was: its text, how it ended, what the parser found in
    /// it and what it cost.
    pub(crate) fn read(
        &self,
        raw: &str,
        finish: Option<FinishReason>,
        findings: Vec<Finding>,
        usage: Usage,
    ) {
        let raw = self.keep(raw);
        let words: usize = findings.iter().map(|f| f.name.len() + f.detail.len() + 32).sum();
        let findings =
            if self.inspector.reserve(&self.entry, words) >= words { findings } else { Vec::new() };
        self.last_attempt(|attempt| {
            attempt.raw = raw;
            attempt.finish_reason = finish.map(|reason| format!("{reason:?}").to_lowercase());
            attempt.findings = findings;
            let reported = usage != Usage::default();
            attempt.usage = reported.then_some([usage.prompt_tokens, usage.completion_tokens]);
        });
    }

    /// What was done with the last attempt's reply (`answer`, `retry`, …), and why.
    pub(crate) fn verdict(&self, verdict: &str, problem: Option<&str>) {
        let problem = problem.map(|problem| self.keep(problem));
        self.last_attempt(|attempt| {
            attempt.verdict = Some(verdict.to_owned());
            attempt.problem = problem;
        });
    }
}

#[cfg(test)]
mod tests;
