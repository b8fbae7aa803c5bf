//! `Tee`: copies what the client receives into the request's record, and ends the record when
//! the body ends or is dropped (the client went away). It watches the body (`body::Watched`).

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;

use super::Capture;
use crate::body::{Watch, Watched};

/// The response body's copy.
pub(crate) struct Tee {
    capture: Capture,
    status: u16,
    /// Bytes past the bound, not kept.
    left_out: usize,
}

impl Tee {
    /// `response`, recorded into `capture` as it goes out.
    pub(crate) fn wrap(response: Response, capture: Capture) -> Response {
        let status = response.status().as_u16();
        let tee = Tee { capture, status, left_out: 0 };
        response.map(|inner| Body::new(Watched::new(inner, tracing::Span::none(), tee)))
    }
}

impl Watch for Tee {
    fn frame(&mut self, data: &Bytes) {
        if self.left_out > 0 {
            self.left_out += data.len();
        } else {
            let (kept, left_out) = self.capture.keep_part(&String::from_utf8_lossy(data));
            self.capture.note(|record| record.response.push_str(&kept));
            self.left_out = left_out;
        }
    }

    fn end(self) {
        if self.left_out > 0 {
            let note = super::left_out_note(self.left_out);
            self.capture.note(|record| record.response.push_str(&note));
        }
        self.capture.end(self.status);
    }
}
