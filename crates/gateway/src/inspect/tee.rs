//! `Tee`: a response body that copies what the client receives into the request's record,
//! and ends the record when the body ends or is dropped (the client went away).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};

use super::Capture;

/// The response body, recorded.
pub(crate) struct Tee {
    inner: Body,
    capture: Option<Capture>,
    status: u16,
    /// Bytes past the bound, not kept.
    left_out: usize,
}

impl Tee {
    /// `response`, recorded into `capture` as it goes out.
    pub(crate) fn wrap(response: Response, capture: Capture) -> Response {
        let status = response.status().as_u16();
        response.map(|inner| Body::new(Tee { inner, capture: Some(capture), status, left_out: 0 }))
    }

    fn end(&mut self) {
        if let Some(capture) = self.capture.take() {
            if self.left_out > 0 {
                let note = super::left_out_note(self.left_out);
                capture.note(|record| record.response.push_str(&note));
            }
            capture.end(self.status);
        }
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        self.end();
    }
}

impl HttpBody for Tee {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(capture)) = (frame.data_ref(), &this.capture) {
                    if this.left_out > 0 {
                        this.left_out += data.len();
                    } else {
                        let (kept, left_out) = capture.keep_part(&String::from_utf8_lossy(data));
                        capture.note(|record| record.response.push_str(&kept));
                        this.left_out = left_out;
                    }
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
