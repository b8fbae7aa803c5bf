//! An answer's body on a direct connection: read by polling the connection in the same poll,
//! decoded when the upstream compressed it, and its connection kept for the next request.

use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use futures::Stream;
use http_body::Body as _;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;

use super::{Conn, Direct};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A dropped body whose rest has not arrived is read on, for its connection's sake, for at
/// most this long…
const DRAIN_WITHIN: Duration = Duration::from_secs(1);
/// …and at most this many bytes.
const DRAIN_BYTES: usize = 64 << 10;
/// Compressed input is inflated this many bytes at a time, so one chunk cannot expand into
/// one huge buffer (deflate expands at most about 1,000 times).
const INFLATE_STEP: usize = 1024;

/// A connection and the body it is reading.
pub(super) struct Raw {
    pub(super) body: Incoming,
    pub(super) conn: Pin<Box<Conn>>,
    pub(super) sender: SendRequest<Full<Bytes>>,
}

/// What reading a raw body came to.
enum Read {
    Data(Bytes),
    End,
    Failed(BoxError),
}

impl Raw {
    /// The next data of the body, polling the connection when the body waits on it. `None`
    /// while nothing is ready (the connection or the body will wake the task).
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Read> {
        let mut drove = false;
        loop {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => return Poll::Ready(Read::Data(data)),
                    // Trailers carry nothing a reply needs.
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Read::Failed(err.into())),
                Poll::Ready(None) => return Poll::Ready(Read::End),
                Poll::Pending if drove => return Poll::Pending,
                Poll::Pending => {}
            }
            drove = true;
            match self.conn.as_mut().poll(cx) {
                Poll::Pending => {}
                Poll::Ready(Err(err)) => return Poll::Ready(Read::Failed(err.into())),
                // The connection closed (it is not polled again): the body has what it will
                // get, and whatever it still waits for is not coming.
                Poll::Ready(Ok(())) => {
                    return match Pin::new(&mut self.body).poll_frame(cx) {
                        Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                            Ok(data) => Poll::Ready(Read::Data(data)),
                            Err(_) => Poll::Ready(Read::End),
                        },
                        Poll::Ready(Some(Err(err))) => Poll::Ready(Read::Failed(err.into())),
                        Poll::Ready(None) => Poll::Ready(Read::End),
                        Poll::Pending => Poll::Ready(Read::Failed(
                            std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                "the upstream closed the connection before the reply ended",
                            )
                            .into(),
                        )),
                    };
                }
            }
        }
    }
}

/// An answer's body as the general client's body stream.
pub(super) struct Leg {
    /// None once the body ended or failed (its connection given back or closed).
    raw: Option<Raw>,
    decoder: Option<Decoder>,
    pool: Direct,
}

impl Leg {
    pub(super) fn new(raw: Raw, decoder: Option<Decoder>, pool: Direct) -> Leg {
        Leg { raw: Some(raw), decoder, pool }
    }

    /// The next piece of the body as it came: `None` at its end.
    fn poll_raw(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        let Some(raw) = self.raw.as_mut() else {
            return Poll::Ready(None);
        };
        match raw.poll_read(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Read::Data(data)) => Poll::Ready(Some(Ok(data))),
            Poll::Ready(Read::Failed(err)) => {
                self.raw = None;
                Poll::Ready(Some(Err(err)))
            }
            Poll::Ready(Read::End) => {
                if let Some(raw) = self.raw.take() {
                    self.pool.give_back(raw);
                }
                Poll::Ready(None)
            }
        }
    }
}

impl Stream for Leg {
    type Item = Result<Bytes, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(decoder) = this.decoder.as_mut() {
                match decoder.step() {
                    Ok(Some(out)) => return Poll::Ready(Some(Ok(out))),
                    Ok(None) => {}
                    Err(err) => {
                        this.raw = None;
                        this.decoder = None;
                        return Poll::Ready(Some(Err(err.into())));
                    }
                }
            }
            let polled = this.poll_raw(cx);
            let Poll::Ready(next) = polled else {
                return Poll::Pending;
            };
            match (next, this.decoder.as_mut()) {
                (Some(Ok(data)), None) => return Poll::Ready(Some(Ok(data))),
                (Some(Ok(data)), Some(decoder)) => decoder.feed(data),
                (Some(Err(err)), _) => return Poll::Ready(Some(Err(err))),
                (None, _) => {
                    return match this.decoder.take().map(Decoder::finish) {
                        None => Poll::Ready(None),
                        Some(Ok(rest)) if rest.is_empty() => Poll::Ready(None),
                        Some(Ok(rest)) => Poll::Ready(Some(Ok(rest))),
                        Some(Err(err)) => Poll::Ready(Some(Err(err.into()))),
                    };
                }
            }
        }
    }
}

/// A reader that stops early (a streamed reply ends at `[DONE]`, before the chunked body's
/// last chunk) drops the body. Whatever of the rest has already arrived is read now; if more
/// is due, a small task reads it (within `DRAIN_WITHIN`, up to `DRAIN_BYTES`, discarded: the
/// reader was done) so the connection can serve the next request instead of being closed.
impl Drop for Leg {
    fn drop(&mut self) {
        let Some(mut raw) = self.raw.take() else {
            return;
        };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut read = 0;
        while read <= DRAIN_BYTES {
            match raw.poll_read(&mut cx) {
                Poll::Ready(Read::Data(data)) => read += data.len(),
                Poll::Ready(Read::End) => return self.pool.give_back(raw),
                Poll::Ready(Read::Failed(_)) => return,
                Poll::Pending => break,
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        runtime.spawn(async move {
            let drained = tokio::time::timeout(DRAIN_WITHIN, async {
                while read <= DRAIN_BYTES {
                    match std::future::poll_fn(|cx| raw.poll_read(cx)).await {
                        Read::Data(data) => read += data.len(),
                        Read::End => return Some(raw),
                        Read::Failed(_) => return None,
                    }
                }
                None
            });
            if let Ok(Some(raw)) = drained.await {
                pool.give_back(raw);
            }
        });
    }
}

/// Inflates a body the upstream compressed (`gzip`, or `deflate`, which is zlib).
pub(super) struct Decoder {
    inflate: Inflate,
    /// Compressed input not inflated yet.
    pending: Bytes,
    /// Whether any input came (an empty body is empty, not a cut-off stream).
    fed: bool,
}

enum Inflate {
    Gzip(flate2::write::GzDecoder<Vec<u8>>),
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
}

impl Decoder {
    /// A decoder for the answer's `content-encoding`, taken off the head (with its
    /// `content-length`, which counts compressed bytes); none when it is not compressed, or
    /// compressed in a way this does not read (the head keeps saying so).
    pub(super) fn for_head(headers: &mut http::HeaderMap) -> Option<Decoder> {
        let encoding = headers.get(http::header::CONTENT_ENCODING)?.to_str().ok()?.trim();
        let inflate =
            if encoding.eq_ignore_ascii_case("gzip") || encoding.eq_ignore_ascii_case("x-gzip") {
                Inflate::Gzip(flate2::write::GzDecoder::new(Vec::new()))
            } else if encoding.eq_ignore_ascii_case("deflate") {
                Inflate::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
            } else {
                return None;
            };
        headers.remove(http::header::CONTENT_ENCODING);
        headers.remove(http::header::CONTENT_LENGTH);
        Some(Decoder { inflate, pending: Bytes::new(), fed: false })
    }

    /// Compressed input, to be inflated by `step`.
    fn feed(&mut self, data: Bytes) {
        self.fed |= !data.is_empty();
        self.pending = data;
    }

    /// Inflates pending input until some output comes: `None` when the input ran out first.
    /// Each step's output is flushed out of the decoder at once (it would otherwise wait in
    /// the decoder's buffer for the next input: a streamed event a chunk late).
    fn step(&mut self) -> std::io::Result<Option<Bytes>> {
        while !self.pending.is_empty() {
            let step = self.pending.len().min(INFLATE_STEP);
            let used = match &mut self.inflate {
                Inflate::Gzip(d) => {
                    d.write(&self.pending[..step]).and_then(|n| d.flush().map(|()| n))?
                }
                Inflate::Zlib(d) => {
                    d.write(&self.pending[..step]).and_then(|n| d.flush().map(|()| n))?
                }
            };
            if used == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "data after the end of the compressed body",
                ));
            }
            self.pending.advance(used);
            let out = std::mem::take(self.output());
            if !out.is_empty() {
                return Ok(Some(Bytes::from(out)));
            }
        }
        Ok(None)
    }

    /// The end of the input (all of it inflated: the body ends only after `step` has taken
    /// every piece): what the decoder still holds, or an error if the body was cut off.
    fn finish(mut self) -> std::io::Result<Bytes> {
        if !self.fed {
            return Ok(Bytes::new());
        }
        match &mut self.inflate {
            Inflate::Gzip(d) => d.try_finish()?,
            Inflate::Zlib(d) => d.try_finish()?,
        }
        Ok(Bytes::from(std::mem::take(self.output())))
    }

    fn output(&mut self) -> &mut Vec<u8> {
        match &mut self.inflate {
            Inflate::Gzip(d) => d.get_mut(),
            Inflate::Zlib(d) => d.get_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip_decoder() -> Decoder {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::CONTENT_ENCODING, http::HeaderValue::from_static("gzip"));
        headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from_static("10"));
        let decoder = Decoder::for_head(&mut headers);
        assert!(headers.is_empty(), "the encoding and the compressed length are taken off");
        decoder.unwrap_or_else(|| panic!("gzip is read"))
    }

    /// Everything `step` gives for one piece of input.
    fn inflated(decoder: &mut Decoder, data: &[u8]) -> Vec<u8> {
        decoder.feed(Bytes::copy_from_slice(data));
        let mut out = Vec::new();
        while let Some(piece) = decoder.step().unwrap_or_else(|err| panic!("{err}")) {
            out.extend_from_slice(&piece);
        }
        out
    }

    #[test]
    fn each_compressed_event_comes_out_when_its_bytes_do() {
        let first = b"data: {\"choices\":[{\"delta\":{\"content\":\"It is \"}}]}\n\n";
        let second = b"data: [DONE]\n\n";
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let flushed = encoder.write_all(first).and_then(|()| encoder.flush());
        assert!(flushed.is_ok());
        let cut = encoder.get_ref().len();
        assert!(encoder.write_all(second).is_ok());
        let whole = encoder.finish().unwrap_or_default();
        let mut decoder = gzip_decoder();
        // The first event is out before any byte of the second arrives.
        assert_eq!(inflated(&mut decoder, &whole[..cut]), first);
        assert_eq!(inflated(&mut decoder, &whole[cut..]), second);
        assert_eq!(decoder.finish().ok(), Some(Bytes::new()));
    }

    #[test]
    fn an_empty_body_is_empty_and_a_cut_one_is_an_error() {
        assert_eq!(gzip_decoder().finish().ok(), Some(Bytes::new()));
        // Bytes that do not compress, so that half the body is half the stream.
        let text: Vec<u8> =
            (0u32..4096).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        assert!(encoder.write_all(&text).is_ok());
        let whole = encoder.finish().unwrap_or_default();
        let mut decoder = gzip_decoder();
        let out = inflated(&mut decoder, &whole[..whole.len() / 2]);
        assert_eq!(out[..], text[..out.len()]);
        assert!(decoder.finish().is_err(), "a body cut off is not taken as whole");
    }
}
