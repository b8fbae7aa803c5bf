//! `Watched`: a response body that shows each data frame to a watcher on its way out and tells
//! it once when the body ends or is dropped, polled inside a tracing span. `OnEnd` is the
//! watcher that only runs a hook at the end.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// What a watched body reports to.
pub(crate) trait Watch: Send + Unpin + 'static {
    /// A data frame, as it goes out.
    fn frame(&mut self, _data: &Bytes) {}
    /// Once: when the last frame was read, or when the body is dropped before that (the
    /// client went away).
    fn end(self);
}

/// A response body that reports to its watcher (see `Watch`).
pub(crate) struct Watched<W: Watch> {
    inner: Body,
    span: tracing::Span,
    watch: Option<W>,
}

impl<W: Watch> Watched<W> {
    pub(crate) fn new(inner: Body, span: tracing::Span, watch: W) -> Watched<W> {
        Watched { inner, span, watch: Some(watch) }
    }

    fn end(&mut self) {
        if let Some(watch) = self.watch.take() {
            let _enter = self.span.enter();
            watch.end();
        }
    }
}

/// A hook run once at the end of a body.
pub(crate) struct Hook(Box<dyn FnOnce() + Send>);

impl Watch for Hook {
    fn end(self) {
        (self.0)();
    }
}

/// A response body that calls its hook once: when its last frame was read, or when it is
/// dropped before that (the client went away).
pub(crate) type OnEnd = Watched<Hook>;

impl OnEnd {
    pub(crate) fn hook(
        inner: Body,
        span: tracing::Span,
        hook: impl FnOnce() + Send + 'static,
    ) -> OnEnd {
        Watched::new(inner, span, Hook(Box::new(hook)))
    }
}

impl<W: Watch> Drop for Watched<W> {
    fn drop(&mut self) {
        self.end();
    }
}

impl<W: Watch> HttpBody for Watched<W> {
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
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(watch)) = (frame.data_ref(), this.watch.as_mut()) {
                    watch.frame(data);
                }
            }
            Poll::Ready(None) => this.end(),
            _ => {}
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
