//! What every handler shares.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::chat::{self, ChatEvent, ChatRequest, Settings};
use crate::error::ApiError;

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
    /// Runs the emulation pipeline for `req` against this gateway's upstream.
    pub(crate) fn emulate(
        &self,
        req: ChatRequest,
        stream: bool,
    ) -> impl Stream<Item = Result<ChatEvent, ApiError>> + Send + use<> {
        let settings = Settings::for_model(&self.config, &req.model);
        let show_reasoning = req.show_reasoning;
        // Reasoning reaches only the clients that asked for it.
        chat::run(self.upstream.clone(), settings, Arc::clone(&self.metrics), req, stream).filter(
            move |event| {
                std::future::ready(show_reasoning || !matches!(event, Ok(ChatEvent::Reasoning(_))))
            },
        )
    }

    /// An estimate of the prompt's tokens as the upstream will see it.
    pub(crate) fn estimate_input_tokens(&self, req: &ChatRequest) -> u64 {
        chat::prompt::estimate_input_tokens(req, self.config.call_format(&req.model))
    }

    /// Builds the state for a validated config.
    pub fn new(config: Config) -> Result<AppState, String> {
        let metrics = Arc::new(Metrics::new());
        let upstream = UpstreamClient::new(&config.upstream, Arc::clone(&metrics))?;
        Ok(AppState { config: Arc::new(config), upstream, metrics, cut: CancellationToken::new() })
    }
}
