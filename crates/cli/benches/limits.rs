//! A key's `rpm` limit across replicas (issue 27): two gateways sharing one Redis (a
//! `redis-server` of its own on loopback), driven at once well past the limit for the run's
//! duration. Reports the requests admitted, those refused (429), and the most admitted in any
//! rolling 60 seconds (by the time each was sent), against the limit.

use std::io::Write;
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::loadgen::{self, Gateway, Script, Upstream};
use crate::store::Redis;
use crate::{Args, Error};

/// The limit measured; the offered load is many times more.
const RPM: u64 = 600;

pub(crate) fn limits(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    let Some(redis) = Redis::start() else {
        writeln!(out, "\n## Key limits\n\nredis-server is not installed: no figure.")?;
        return Ok(());
    };
    let upstream = Upstream::start(&Script::call(args.deltas, Duration::ZERO), 2)?;
    let dir = std::env::temp_dir().join(format!("toolshim-limits-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("keys.toml");
    std::fs::write(&config, format!("[keys.load]\nkey = \"sk-load\"\nrpm = {RPM}\n"))?;
    let config = config.display().to_string();
    let extra = ["--config", config.as_str(), "--store", redis.1.as_str()];
    let replicas = [
        Gateway::start_with(bin, &upstream.url(), &extra, None)?,
        Gateway::start_with(bin, &upstream.url(), &extra, None)?,
    ];
    let urls: Vec<String> =
        replicas.iter().map(|r| format!("{}/v1/chat/completions", r.url())).collect();
    let concurrency = 16;
    let client = loadgen::client(concurrency)?;
    let duration = Duration::from_secs(args.duration);
    let body = loadgen::Target::chat("", false, loadgen::Check::Call).body;
    let start = Instant::now();
    let sent = runtime.block_on(async {
        let mut workers = Vec::new();
        for worker in 0..concurrency {
            let (client, url, body) = (client.clone(), urls[worker % 2].clone(), body.clone());
            #[expect(clippy::disallowed_methods, reason = "workers are joined below")]
            workers.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while start.elapsed() < duration {
                    let at = start.elapsed();
                    let request = client.post(&url).bearer_auth("sk-load").body(body.clone());
                    let request = request.header("content-type", "application/json");
                    let status = match request.send().await {
                        Ok(response) => {
                            let status = response.status();
                            let _ = response.bytes().await;
                            Some(status)
                        }
                        Err(_) => None,
                    };
                    seen.push((at, status));
                }
                seen
            }));
        }
        let mut all = Vec::new();
        for worker in workers {
            all.extend(worker.await.unwrap_or_default());
        }
        all
    });
    let mut admitted: Vec<Duration> =
        sent.iter().filter(|(_, s)| *s == Some(StatusCode::OK)).map(|(at, _)| *at).collect();
    admitted.sort_unstable();
    let refused = sent.iter().filter(|(_, s)| *s == Some(StatusCode::TOO_MANY_REQUESTS)).count();
    let failed = sent.len() - admitted.len() - refused;
    // The most admitted in any 60 s: a window starting at each admission.
    let mut most = 0;
    let mut end = 0;
    for (i, at) in admitted.iter().enumerate() {
        while end < admitted.len() && admitted[end] < *at + Duration::from_secs(60) {
            end += 1;
        }
        most = most.max(end - i);
    }
    let windows = args.duration.div_ceil(60).max(1);
    writeln!(
        out,
        "\n## Key limits ({} s; one key with rpm = {RPM}; two gateways sharing one Redis; {concurrency} clients over both)\n",
        args.duration
    )?;
    writeln!(
        out,
        "| requests sent | admitted | refused (429) | failed | most admitted in any 60 s | over the limit | admitted per started minute |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|")?;
    writeln!(
        out,
        "| {} | {} | {refused} | {failed} | {most} | {:+.2} % | {:.1} |",
        sent.len(),
        admitted.len(),
        (most as f64 - RPM as f64) / RPM as f64 * 100.0,
        admitted.len() as f64 / windows as f64
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    if failed > 0 {
        return Err(format!("limits: {failed} requests failed (neither 200 nor 429)").into());
    }
    Ok(())
}
