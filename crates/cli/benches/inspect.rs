//! The cost of the request inspector (issue 27): chat requests with a call, streamed and not,
//! through a gateway without it and one keeping every request (`[inspect] enabled`, a bound
//! of `max_bytes` and no cap on the count), side by side in one run; then the bytes it kept
//! and each gateway's memory.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::loadgen::{self, Check, Gateway, Script, Target, Upstream, percentile, rss_kib};
use crate::{Args, Error, fail_on_errors, ms};

const KEY: &str = "sk-bench-inspect";
/// The inspector's bound in this run: small, so that it fills and evicts.
const MAX_BYTES: u64 = 4 << 20;

/// A client for `concurrency` connections that sends the admin key.
fn client(concurrency: usize) -> reqwest::Result<reqwest::Client> {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&format!("Bearer {KEY}")) {
        headers.insert(AUTHORIZATION, value);
    }
    #[expect(clippy::disallowed_methods, reason = "the load driver's own client")]
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .default_headers(headers)
        .build()
}

pub(crate) fn inspect(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    let upstream = Upstream::start(&Script::call(args.deltas, Duration::ZERO), 2)?;
    let config =
        std::env::temp_dir().join(format!("toolshim-inspect-bench-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        format!(
            "[keys.bench]\nkey = \"{KEY}\"\nadmin = true\n\n[inspect]\nenabled = true\nrequests = 100000\nmax_bytes = {MAX_BYTES}\n"
        ),
    )?;
    let config_arg = config.display().to_string();
    let off = Gateway::start_with(bin, &upstream.url(), &["--api-key", KEY], None)?;
    let on = Gateway::start_with(bin, &upstream.url(), &["--config", &config_arg], None)?;
    let duration = Duration::from_secs(args.duration);
    writeln!(
        out,
        "\n## The request inspector ({} s per run; chat requests with a call; bound {} MiB)\n",
        args.duration,
        MAX_BYTES >> 20
    )?;
    writeln!(out, "| requests | concurrency | inspector off req/s | p50 ms | on req/s | p50 ms |")?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for stream in [false, true] {
        for concurrency in [1, 16] {
            let client = client(concurrency)?;
            let mut row = Vec::new();
            for gateway in [&off, &on] {
                let check = Check::Call;
                let target = Arc::new(Target::chat(&gateway.url(), stream, check));
                let outcome =
                    runtime.block_on(loadgen::drive(&client, &target, concurrency, duration));
                fail_on_errors("inspector", &outcome)?;
                row.push((outcome.per_second(), percentile(&outcome.total, 50.0)));
            }
            writeln!(
                out,
                "| {} | {concurrency} | {:.0} | {} | {:.0} | {} |",
                if stream { "streamed" } else { "whole" },
                row[0].0,
                ms(row[0].1),
                row[1].0,
                ms(row[1].1),
            )?;
            out.flush()?;
        }
    }
    let client = client(1)?;
    let totals = runtime.block_on(async {
        let response = client.get(format!("{}/inspect", on.url())).send().await?;
        response.json::<serde_json::Value>().await
    })?;
    let totals = &totals["inspector"];
    writeln!(
        out,
        "\nKept {} requests in {} bytes (bound {}); memory (RSS): {} KiB without the inspector, {} KiB with it.",
        totals["kept"],
        totals["bytes"],
        totals["max_bytes"],
        rss_kib(off.pid()).unwrap_or(0),
        rss_kib(on.pid()).unwrap_or(0),
    )?;
    let _ = std::fs::remove_file(&config);
    Ok(())
}
