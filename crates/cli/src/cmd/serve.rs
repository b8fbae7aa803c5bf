//! `toolshim serve`: configuration from file, environment and flags, then the gateway.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use toolshim_gateway::{Config, Layer, Origins, Overrides};

use crate::args::ServeArgs;
use crate::cmd::{UsageError, WorkCut};

pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let config = load(args)?;
    // Traces (OTLP/HTTP) when an endpoint is configured; no layer otherwise.
    let export = toolshim_gateway::traces::Export::from_config(&config.traces, |name| {
        std::env::var(name).ok()
    })
    .map_err(UsageError::new)?;
    let (traces, exporter) = match export {
        Some(export) => {
            let (layer, exporter) = export.start();
            let filter = tracing_subscriber::filter::filter_fn(toolshim_gateway::traces::traced);
            (Some(layer.with_filter(filter)), Some(exporter))
        }
        None => (None, None),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter);
    tracing_subscriber::registry().with(logs).with(traces).init();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = workers(args)? {
        runtime.worker_threads(workers.get());
    }
    let runtime = runtime.enable_all().build().context("cannot start the async runtime")?;
    let report = runtime
        .block_on(async {
            let token = CancellationToken::new();
            let exported = CancellationToken::new();
            let server = toolshim_gateway::serve(config, token.clone(), |addr| {
                let _ = writeln!(std::io::stderr().lock(), "toolshim: listening on http://{addr}");
            });
            let served = async {
                tokio::pin!(server);
                let report = tokio::select! {
                    result = &mut server => result,
                    () = shutdown_signal() => {
                        tracing::info!("shutting down; letting in-flight requests finish");
                        token.cancel();
                        server.await
                    }
                };
                // The spans still queued go out before the process ends.
                exported.cancel();
                report
            };
            let export = async {
                if let Some(exporter) = exporter {
                    exporter.run(exported.clone()).await;
                }
            };
            tokio::join!(served, export).0
        })
        .map_err(|message| anyhow::anyhow!(message))?;
    if report.cut_requests > 0 {
        return Err(WorkCut(report.cut_requests).into());
    }
    Ok(())
}

/// Defaults, then the file, then the environment, then flags. Every problem is reported at
/// once, each with where its value came from.
fn load(args: &ServeArgs) -> anyhow::Result<Config> {
    // A file's values that could be read are checked like any others, so that every
    // problem in it is reported at once (those it could not read are reported by line).
    // `TOOLSHIM_CONFIG` names the file when `--config` does not (a mounted file in a
    // container).
    let (path, named_by) = match &args.config {
        Some(path) => (Some(path.clone()), "--config"),
        None => {
            (std::env::var_os("TOOLSHIM_CONFIG").map(std::path::PathBuf::from), "TOOLSHIM_CONFIG")
        }
    };
    let (mut config, mut origins, mut problems) = match &path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|err| UsageError::new(format!("{named_by} {}: {err}", path.display())))?;
            Config::read_toml(&text, &path.display().to_string())
        }
        None => (Config::default(), Origins::default(), Vec::new()),
    };
    let env = Overrides::from_env(|name| std::env::var(name).ok());
    let flags = Overrides {
        layer: Layer::Flags,
        listen: args.listen.clone(),
        upstream_url: args.upstream.clone(),
        upstream_api: args.upstream_api.clone(),
        mode: args.mode.clone(),
        api_keys: (!args.api_keys.is_empty()).then(|| args.api_keys.clone()),
        max_retries: args.max_retries.map(|n| n.to_string()),
        store: args.store.clone(),
    };
    for overrides in [&env, &flags] {
        if let Err(more) = config.apply(overrides, &mut origins) {
            problems.extend(more);
        }
    }
    if let Err(more) = config.validate_from(&origins) {
        problems.extend(more);
    }
    if !problems.is_empty() {
        return Err(UsageError::new(format!(
            "invalid configuration:\n  {}",
            problems.join("\n  ")
        ))
        .into());
    }
    Ok(config)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// The runtime's worker threads: `--workers`, else `TOOLSHIM_WORKERS`, else tokio's default
/// (one per CPU the process may use).
fn workers(args: &ServeArgs) -> Result<Option<std::num::NonZeroUsize>, UsageError> {
    if args.workers.is_some() {
        return Ok(args.workers);
    }
    match std::env::var("TOOLSHIM_WORKERS") {
        Ok(text) => crate::args::workers(&text)
            .map(Some)
            .map_err(|err| UsageError::new(format!("TOOLSHIM_WORKERS: {err}"))),
        Err(_) => Ok(None),
    }
}
