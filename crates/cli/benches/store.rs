//! The cost of stored responses (issue 26): Responses requests, not streamed, with
//! `store: false` and `store: true`, through gateways whose store is off, in memory, an SQLite
//! file, and Redis (a `redis-server` of its own on loopback, when it is installed), side by
//! side in one run.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::loadgen::{self, Gateway, Script, Target, Upstream, percentile};
use crate::{Args, Error, fail_on_errors, ms};

/// A `redis-server` of its own, on a free port; stopped when dropped.
pub(crate) struct Redis(std::process::Child, pub(crate) String);

impl Redis {
    pub(crate) fn start() -> Option<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .ok()?;
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Redis(child, format!("redis://127.0.0.1:{port}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn store(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    let upstream = Upstream::start(&Script::call(args.deltas, Duration::ZERO), 2)?;
    let dir = std::env::temp_dir().join(format!("toolshim-store-bench-{}", std::process::id()));
    let file = format!("sqlite:{}", dir.join("responses.db").display());
    let redis = Redis::start();
    let mut stores =
        vec![("off", "off".to_owned()), ("memory", "memory".to_owned()), ("SQLite file", file)];
    if let Some(redis) = &redis {
        stores.push(("Redis", redis.1.clone()));
    }
    let duration = Duration::from_secs(args.duration);
    writeln!(
        out,
        "\n## Stored responses ({} s per run; Responses requests with a call, not streamed{})\n",
        args.duration,
        if redis.is_none() { "; redis-server is not installed, so no Redis row" } else { "" }
    )?;
    writeln!(
        out,
        "| store | concurrency | store: false req/s | p50 ms | store: true req/s | p50 ms | added p50 ms per stored response |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|")?;
    for (n, (name, url)) in stores.iter().enumerate() {
        let gateway = Gateway::start_with(bin, &upstream.url(), &["--store", url], None)?;
        if n == 0 {
            // A warm-up, so that the first row is not the machine settling.
            let target = Arc::new(Target::responses(&gateway.url(), false));
            let client = loadgen::client(1)?;
            runtime.block_on(loadgen::drive(&client, &target, 1, Duration::from_secs(1)));
        }
        for concurrency in [1, 16] {
            let client = loadgen::client(concurrency)?;
            let mut row = Vec::new();
            for keep in [false, true] {
                let target = Arc::new(Target::responses(&gateway.url(), keep));
                let outcome =
                    runtime.block_on(loadgen::drive(&client, &target, concurrency, duration));
                fail_on_errors(&format!("{name}, store: {keep}"), &outcome)?;
                row.push((outcome.per_second(), percentile(&outcome.total, 50.0)));
            }
            let added = row[1].1.as_secs_f64() - row[0].1.as_secs_f64();
            writeln!(
                out,
                "| {name} | {concurrency} | {:.0} | {} | {:.0} | {} | {:+.3} |",
                row[0].0,
                ms(row[0].1),
                row[1].0,
                ms(row[1].1),
                added * 1000.0
            )?;
            out.flush()?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
