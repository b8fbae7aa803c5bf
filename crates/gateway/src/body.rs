//! `OnEnd`: a response body that runs a hook once, when it ends or is dropped, and is polled
//! inside a tracing span.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// A response body that calls its hook once: when its last frame was read, or when it is
/// dropped before that (the client went away).
pub(crate) struct OnEnd {
    inner: Body,
    span: tracing::Span,
    hook: Option<Box<dyn FnOnce() + Send>>,
}

impl OnEnd {
    pub(crate) fn new(
        inner: Body,
        span: tracing::Span,
        hook: impl FnOnce() + Send + 'static,
    ) -> OnEnd {
        OnEnd { inner, span, hook: Some(Box::new(hook)) }
    }

    fn end(&mut self) {
        if let Some(hook) = self.hook.take() {
            let _enter = self.span.enter();
            hook();
        }
    }
}

impl Drop for OnEnd {
    fn drop(&mut self) {
        self.end();
    }
}

impl HttpBody for OnEnd {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let polled = {
            let _enter = this.span.enter();
            Pin::new(&mut this.inner).poll_frame(cx)
        };
        if matches!(polled, Poll::Ready(None)) {
            this.end();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
