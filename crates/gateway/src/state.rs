//! What every handler shares.

use std::sync::Arc;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::upstream::client::UpstreamClient;

/// Shared state: configuration, the upstream client, metrics.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) config: Arc<Config>,
    pub(crate) upstream: UpstreamClient,
    pub(crate) metrics: Arc<Metrics>,
}

impl AppState {
    /// Builds the state for a validated config.
    pub fn new(config: Config) -> Result<AppState, String> {
        let upstream = UpstreamClient::new(&config.upstream)?;
        Ok(AppState { config: Arc::new(config), upstream, metrics: Arc::new(Metrics::new()) })
    }
}
