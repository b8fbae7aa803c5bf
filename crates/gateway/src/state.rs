//! What every handler shares.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::upstream::client::UpstreamClient;

/// Shared state: configuration, the upstream client, metrics.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) config: Arc<Config>,
    pub(crate) upstream: UpstreamClient,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled when the drain timeout of a shutdown has passed: requests still running
    /// end at once (streams with an in-band error, others with a 503).
    pub(crate) cut: CancellationToken,
}

impl AppState {
    /// Builds the state for a validated config.
    pub fn new(config: Config) -> Result<AppState, String> {
        let metrics = Arc::new(Metrics::new());
        let upstream = UpstreamClient::new(&config.upstream, Arc::clone(&metrics))?;
        Ok(AppState { config: Arc::new(config), upstream, metrics, cut: CancellationToken::new() })
    }
}
