//! The inspector's pages: plain HTML written here, with a little inline CSS; nothing is
//! fetched from elsewhere. Everything a record holds is untrusted text (a model wrote it, or
//! a client sent it) and goes through `esc` on its way in.

use std::fmt::Write;

use super::Totals;
use super::record::{Attempt, Finding, Record, Summary};

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:baseline}
header a{color:#9cc4ff;text-decoration:none}header h1{font-size:17px;margin:0}
main{padding:16px 20px}h2{font-size:15px;margin:20px 0 8px}h3{font-size:14px;margin:0 0 6px}
table{border-collapse:collapse;background:#fff;width:100%}
td,th{border-bottom:1px solid #e3e6ea;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}tr:hover td{background:#f2f7ff}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #dde1e6;padding:8px;margin:4px 0;font:12.5px/1.4 ui-monospace,'SFMono-Regular',Menlo,Consolas,monospace;max-height:420px;overflow:auto}
.attempts{display:grid;grid-auto-flow:column;grid-auto-columns:minmax(420px,1fr);gap:14px;overflow-x:auto;align-items:start}
.card{background:#fff;border:1px solid #d5dae0;border-top:4px solid #8a94a3;padding:10px 12px;border-radius:4px}
.v-answer{border-top-color:#2f9e44}.v-retry,.v-plain{border-top-color:#e8a317}.v-failed,.v-error{border-top-color:#d9480f}
.tag{display:inline-block;padding:0 6px;border-radius:3px;background:#eef1f4;font-size:12px;margin-right:4px}
.ok{color:#2f9e44}.bad{color:#d9480f}.warn{color:#b07800}
mark{border-radius:2px;padding:0 1px}mark.call{background:#c9f2d0}mark.incomplete_call{background:#ffe8a8}
mark.rejected{background:#ffd0c2}mark.warning{background:#fff3bf}mark.warned{text-decoration:underline wavy #d9480f}
.correction{border-left:4px solid #e8a317;background:#fff8e6}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0;background:#fff;padding:10px;border:1px solid #dde1e6}
dt{color:#5c6675}dd{margin:0}details{margin:6px 0}summary{cursor:pointer;color:#34495e}
.muted{color:#6b7684}
";

/// HTML-escapes `text` (element content and quoted attribute values alike).
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body><header><h1><a href=\"/inspect\">toolshim inspector</a></h1><span>{}</span></header><main>{body}</main></body></html>",
        esc(title),
        esc(title)
    )
}

/// A time in milliseconds since the Unix epoch, as `YYYY-MM-DD HH:MM:SS.mmm` (UTC).
pub(crate) fn time(ms: u64) -> String {
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    // Days to a civil date (the proleptic Gregorian calendar).
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{milli:03}")
}

fn opt<T: ToString>(value: &Option<T>) -> String {
    value.as_ref().map_or_else(|| "—".to_owned(), |v| esc(&v.to_string()))
}

fn status(status: Option<u16>, in_flight: bool) -> String {
    match status {
        _ if in_flight => "<span class=\"muted\">in flight</span>".into(),
        Some(code @ 200..=299) => format!("<span class=\"ok\">{code}</span>"),
        Some(code) => format!("<span class=\"bad\">{code}</span>"),
        None => "—".into(),
    }
}

/// The labels of a request's facts, in the order of `facts`: the list's columns, and the
/// detail page's first lines.
const FACTS: [&str; 10] = [
    "time (UTC)",
    "key",
    "API",
    "model",
    "route",
    "mode",
    "status",
    "outcome",
    "latency",
    "retries",
];

/// A request's facts as HTML, in the order of `FACTS`.
fn facts(s: &Summary) -> [String; 10] {
    let retries = if s.retries > 0 {
        format!("<span class=\"warn\">{}</span>", s.retries)
    } else {
        "0".into()
    };
    [
        time(s.started_ms),
        opt(&s.key),
        esc(s.family),
        esc(&s.model),
        opt(&s.route),
        opt(&s.mode),
        status(s.status, s.in_flight),
        opt(&s.outcome),
        s.latency_ms.map_or_else(|| "—".into(), |ms| format!("{ms} ms")),
        retries,
    ]
}

/// The list of kept requests, newest first.
pub(crate) fn list(summaries: &[Summary], totals: &Totals) -> String {
    let mut body = format!(
        "<p class=\"muted\">{} requests kept (at most {}), {} of {} bytes. Newest first. The same list as JSON: <code>Accept: application/json</code>.</p>",
        totals.kept, totals.max_requests, totals.bytes, totals.max_bytes
    );
    body.push_str("<table><tr><th>#</th>");
    for label in FACTS.iter().chain(&["attempts"]) {
        let _ = write!(body, "<th>{label}</th>");
    }
    body.push_str("</tr>");
    for s in summaries {
        let _ = write!(body, "<tr><td><a href=\"/inspect/{id}\">{id}</a></td>", id = s.id);
        for value in facts(s) {
            let _ = write!(body, "<td>{value}</td>");
        }
        let _ = write!(body, "<td>{}</td></tr>", s.attempts);
    }
    if summaries.is_empty() {
        let _ = write!(
            body,
            "<tr><td colspan=\"{}\" class=\"muted\">No request yet.</td></tr>",
            FACTS.len() + 2
        );
    }
    body.push_str("</table>");
    page("requests", &body)
}

/// One request: its facts, its attempts side by side, what the client sent and received.
pub(crate) fn detail(record: &Record) -> String {
    let mut body = String::from("<dl>");
    for (label, value) in FACTS.iter().zip(facts(&record.summary())) {
        let _ = write!(body, "<dt>{label}</dt><dd>{value}</dd>");
    }
    let _ = write!(body, "<dt>stream</dt><dd>{}</dd></dl>", record.stream);
    let _ = write!(body, "<h2>Attempts ({})</h2>", record.attempts.len());
    if record.attempts.is_empty() {
        body.push_str("<p class=\"muted\">No request reached an upstream.</p>");
    }
    body.push_str("<div class=\"attempts\">");
    for attempt in &record.attempts {
        body.push_str(&card(attempt));
    }
    body.push_str("</div>");
    let _ = write!(
        body,
        "<h2>What the client sent</h2><details><summary>request body ({} bytes)</summary><pre>{}</pre></details><h2>What the client received</h2><pre id=\"response\">{}</pre>",
        record.request.len(),
        esc(&record.request),
        esc(&record.response)
    );
    page(&format!("request {}", record.id), &body)
}

fn card(a: &Attempt) -> String {
    let verdict = a.verdict.as_deref().unwrap_or(if a.error.is_some() { "error" } else { "—" });
    let class = match verdict.split_whitespace().next().unwrap_or_default() {
        "answer" => "answer",
        "retry" => "retry",
        "plain" => "plain",
        "failed" => "failed",
        _ if a.error.is_some() => "error",
        _ => "",
    };
    let mut out = format!(
        "<section class=\"card v-{class}\" id=\"attempt-{}\"><h3>Attempt {} <span class=\"tag\">{}</span><span class=\"tag\">{}</span></h3><div>verdict: <b>{}</b></div>",
        a.number,
        a.number,
        esc(a.kind),
        esc(&a.model),
        esc(verdict)
    );
    if let Some(problem) = &a.problem {
        let _ = write!(out, "<div class=\"warn\">problem: {}</div>", esc(problem));
    }
    if let Some(error) = &a.error {
        let _ = write!(out, "<div class=\"bad\">upstream error: {}</div>", esc(error));
    }
    if let Some(correction) = &a.correction {
        let _ = write!(
            out,
            "<div>correction sent with this attempt:</div><pre class=\"correction\">{}</pre>",
            esc(correction)
        );
    }
    if a.kind != "native" && a.kind != "passthrough" {
        let _ = write!(
            out,
            "<div>raw text{}{}:</div><pre class=\"raw\">{}</pre>",
            a.finish_reason.as_ref().map_or_else(String::new, |f| format!(" (finish: {})", esc(f))),
            a.usage.map_or_else(String::new, |[p, c]| format!(", {p} + {c} tokens")),
            highlight(&a.raw, &a.findings)
        );
        out.push_str(&findings(&a.findings));
    }
    if !a.system.is_empty() {
        let _ = write!(
            out,
            "<details><summary>system prompt ({} bytes{})</summary><pre>{}</pre></details>",
            a.system.len(),
            if a.grammar { ", under the contract's grammar" } else { "" },
            esc(&a.system)
        );
    }
    if !a.turns.is_empty() {
        let _ = write!(
            out,
            "<details><summary>conversation as sent ({} turns)</summary>",
            a.turns.len()
        );
        for turn in &a.turns {
            let images =
                if turn.images > 0 { format!(" + {} images", turn.images) } else { String::new() };
            let _ = write!(
                out,
                "<div class=\"muted\">{}{images}</div><pre>{}</pre>",
                turn.role,
                esc(&turn.text)
            );
        }
        out.push_str("</details>");
    }
    if !a.body.is_empty() {
        let _ = write!(
            out,
            "<details><summary>body sent ({} bytes)</summary><pre>{}</pre></details>",
            a.body.len(),
            esc(&a.body)
        );
    }
    out.push_str("</section>");
    out
}

fn findings(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "<div class=\"muted\">The parser found no call and had no warning.</div>".into();
    }
    let mut out = String::from(
        "<table><tr><th>found</th><th>name</th><th>arguments, reason or message</th><th>bytes</th></tr>",
    );
    for f in findings {
        let _ = write!(
            out,
            "<tr><td><mark class=\"{}\">{}</mark></td><td>{}</td><td><code>{}</code></td><td>{}–{}</td></tr>",
            f.kind,
            f.kind.replace('_', " "),
            esc(&f.name),
            esc(&f.detail),
            f.span[0],
            f.span[1]
        );
    }
    out.push_str("</table>");
    out
}

/// `raw`, escaped, with the bytes each finding came from marked.
fn highlight(raw: &str, findings: &[Finding]) -> String {
    let fit = |at: usize| {
        let mut at = at.min(raw.len());
        while !raw.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let spans: Vec<(usize, usize, &Finding)> = findings
        .iter()
        .map(|f| (fit(f.span[0]), fit(f.span[1]), f))
        .filter(|(start, end, _)| start < end)
        .collect();
    let mut cuts: Vec<usize> = spans.iter().flat_map(|(s, e, _)| [*s, *e]).collect();
    cuts.extend([0, raw.len()]);
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = String::with_capacity(raw.len() + 64);
    for pair in cuts.windows(2) {
        let (start, end) = (pair[0], pair[1]);
        let text = esc(&raw[start..end]);
        let over: Vec<&Finding> =
            spans.iter().filter(|(s, e, _)| *s <= start && end <= *e).map(|(_, _, f)| *f).collect();
        let Some(main) = over.iter().find(|f| f.kind != "warning").or(over.first()) else {
            out.push_str(&text);
            continue;
        };
        let warned = over.iter().any(|f| f.kind == "warning") && main.kind != "warning";
        let title: Vec<String> = over.iter().map(|f| format!("{}: {}", f.kind, f.name)).collect();
        let _ = write!(
            out,
            "<mark class=\"{}{}\" title=\"{}\">{text}</mark>",
            main.kind,
            if warned { " warned" } else { "" },
            esc(&title.join("; "))
        );
    }
    out
}
