//! Plain-HTTP upstream connections driven by the request that uses them.
//!
//! A general HTTP client runs each connection as a task of its own and hands a reply's body to
//! the request through a channel that holds one chunk: an upstream reply of N chunks (a
//! streamed reply has one per event) costs N hand-overs between two tasks, often on two
//! threads. Here the connection is polled by whoever polls the reply — the request's own
//! task — so a reply is read where it is used, with no hand-over. Idle connections wait in a
//! small pool of their own.
//!
//! Only for `http://` upstreams reached without a proxy (`UpstreamClient::new` decides); TLS
//! and proxies stay with the general client.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};

mod leg;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::TrySendError;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use reqwest::Url;
use tokio::net::TcpStream;
use tokio::time::Instant;

use self::leg::{Leg, Raw};

type Conn = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;
type Request = http::Request<Full<Bytes>>;

/// An idle connection is dropped after this long unused (the upstream may have closed it).
const IDLE_FOR: Duration = Duration::from_secs(90);
/// At most this many idle connections are kept per upstream; more are closed when done.
const MAX_IDLE: usize = 1024;
/// While connections are idle, they are looked at this often: one the upstream closed, or
/// one idle too long, is closed on the gateway's side too (no socket is left half-closed).
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// A request on a kept-alive connection that failed this soon after it went out, with no
/// answer, met a connection the upstream had just closed: it goes again on a new one. One
/// that fails later may have reached the model, and is not sent twice.
pub(crate) const STALE_WITHIN: Duration = Duration::from_secs(1);

/// Why a request got no answer on a direct connection.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Connecting took longer than `connect_timeout_secs`.
    ConnectTimeout,
    /// Connecting failed (refused, unreachable, no such name).
    Connect(std::io::Error),
    /// The HTTP exchange failed before the head of an answer; `reused` says whether the
    /// connection had served a request before (and may have been closed by the upstream).
    Exchange { err: hyper::Error, reused: bool },
    /// The upstream closed the connection before the head of an answer.
    Closed { reused: bool },
}

impl Failure {
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, Failure::ConnectTimeout)
    }

    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, Failure::ConnectTimeout | Failure::Connect(_))
    }

    /// A kept-alive connection that turned out closed before any answer (whether the
    /// request reached the model is for the caller to judge, by when it failed).
    fn is_stale(&self) -> bool {
        match self {
            Failure::Exchange { err, reused } => *reused && !err.is_parse(),
            Failure::Closed { reused } => *reused,
            Failure::ConnectTimeout | Failure::Connect(_) => false,
        }
    }

    /// The error and its causes, as one line.
    pub(crate) fn chain(&self) -> String {
        let err: &(dyn std::error::Error + 'static) = match self {
            Failure::ConnectTimeout => return "connecting timed out".to_owned(),
            Failure::Closed { .. } => {
                return "the upstream closed the connection before answering".to_owned();
            }
            Failure::Connect(err) => err,
            Failure::Exchange { err, .. } => err,
        };
        let mut chain = vec![err.to_string()];
        let mut source = err.source();
        while let Some(next) = source {
            chain.push(next.to_string());
            source = next.source();
        }
        chain.join(": ")
    }
}

/// The idle connections to one upstream, and where to open new ones.
#[derive(Clone)]
pub(crate) struct Direct {
    /// `host:port` to connect to (brackets taken off an IPv6 literal).
    host: String,
    port: u16,
    /// The `host` header: the URL's host, and its port when it is not the default.
    authority: String,
    connect_within: Duration,
    pool: Arc<Pool>,
}

/// The idle connections, and whether a task is looking after them.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Idle>>,
    swept: AtomicBool,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct").field("authority", &self.authority).finish_non_exhaustive()
    }
}

struct Idle {
    sender: SendRequest<Full<Bytes>>,
    conn: Pin<Box<Conn>>,
    since: Instant,
}

/// Whether the environment names a proxy the general client would use for `http://`.
fn proxied() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

impl Direct {
    /// Direct connections to `url`'s server, when it is plain HTTP and no proxy is set.
    pub(crate) fn for_url(url: &Url, connect_within: Duration) -> Option<Direct> {
        if url.scheme() != "http" || proxied() {
            return None;
        }
        let shown = url.host_str()?;
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(port) => format!("{shown}:{port}"),
            None => shown.to_owned(),
        };
        let host = shown.trim_start_matches('[').trim_end_matches(']').to_owned();
        Some(Direct { host, port, authority, connect_within, pool: Arc::default() })
    }

    /// Whether a request to `url` goes to this server.
    pub(crate) fn serves(&self, url: &Url) -> bool {
        url.scheme() == "http"
            && url.port_or_known_default() == Some(self.port)
            && url.host_str().map(|h| h.trim_start_matches('[').trim_end_matches(']'))
                == Some(self.host.as_str())
    }

    /// Sends `request` (its URL one this server `serves`) and waits for the head of the
    /// answer. The answer's body reads on the same connection, polled by whoever reads it;
    /// the connection goes back to the pool when the body has been read to its end.
    ///
    /// A request goes again, once, on a new connection when it never went out (the
    /// connection closed first), or when a kept-alive connection failed within
    /// `STALE_WITHIN` of it going out, with no answer: the upstream had closed it (llama.cpp's
    /// server closes one idle for 5 s). Nothing else is sent twice.
    pub(crate) async fn send(
        &self,
        request: reqwest::Request,
    ) -> Result<reqwest::Response, Failure> {
        let (head, body) = self.to_hyper(request).into_parts();
        let (mut sender, mut conn, reused) = self.ready(true).await?;
        // A copy to send again, only where it may be needed: on a kept-alive connection.
        let again = reused
            .then(|| (head.method.clone(), head.uri.clone(), head.headers.clone(), body.clone()));
        let sent = Instant::now();
        let answer = sender.try_send_request(http::Request::from_parts(head, body));
        let response = match answer_head(answer, &mut conn, reused).await {
            Ok(response) => response,
            Err(NoAnswer { failure, unsent }) => {
                let quick = failure.is_stale() && sent.elapsed() < STALE_WITHIN;
                let Some(request) = unsent.or_else(|| again.filter(|_| quick).map(rebuilt)) else {
                    return Err(failure);
                };
                tracing::info!(upstream = %self.authority, cause = %failure.chain(),
                    "the upstream closed the connection before answering; sending again on a new one");
                (sender, conn, _) = self.ready(false).await?;
                let answer = sender.try_send_request(request);
                answer_head(answer, &mut conn, false).await.map_err(|no| no.failure)?
            }
        };
        let (mut parts, body) = response.into_parts();
        let decoder = leg::Decoder::for_head(&mut parts.headers);
        let leg = Leg::new(Raw { body, conn, sender }, decoder, self.clone());
        Ok(reqwest::Response::from(http::Response::from_parts(
            parts,
            reqwest::Body::wrap_stream(leg),
        )))
    }

    /// The request as hyper sends it on a connection: origin-form target, a `host` header.
    fn to_hyper(&self, mut request: reqwest::Request) -> http::Request<Full<Bytes>> {
        let mut headers = std::mem::take(request.headers_mut());
        let url = request.url();
        let mut target = url.path().to_owned();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let method = request.method().clone();
        if let Ok(host) = http::HeaderValue::from_str(&self.authority) {
            headers.insert(http::header::HOST, host);
        }
        let body = request.body().and_then(reqwest::Body::as_bytes).map(Bytes::copy_from_slice);
        let mut out = http::Request::new(Full::new(body.unwrap_or_default()));
        *out.method_mut() = method;
        *out.headers_mut() = headers;
        if let Ok(uri) = target.parse() {
            *out.uri_mut() = uri;
        }
        out
    }

    /// A connection ready to send on: an idle one that is still open (with `pooled`), else a
    /// new one; and whether it was idle.
    async fn ready(
        &self,
        pooled: bool,
    ) -> Result<(SendRequest<Full<Bytes>>, Pin<Box<Conn>>, bool), Failure> {
        while let Some(Idle { mut sender, mut conn, .. }) = pooled.then(|| self.take()).flatten() {
            if ready(&mut sender, &mut conn, true).await.is_ok() {
                return Ok((sender, conn, true));
            }
        }
        let tcp = tokio::time::timeout(
            self.connect_within,
            TcpStream::connect((self.host.as_str(), self.port)),
        )
        .await
        .map_err(|_| Failure::ConnectTimeout)?
        .map_err(Failure::Connect)?;
        // Events are small writes that must go out at once.
        let _ = tcp.set_nodelay(true);
        let (mut sender, conn) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|err| Failure::Exchange { err, reused: false })?;
        let mut conn = Box::pin(conn);
        ready(&mut sender, &mut conn, false).await?;
        Ok((sender, conn, false))
    }

    /// The most recently used idle connection that has not been idle too long.
    fn take(&self) -> Option<Idle> {
        let mut idle = self.pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        idle.retain(|c| now.duration_since(c.since) < IDLE_FOR && !c.sender.is_closed());
        idle.pop()
    }

    /// A connection whose answer has been read to its end: kept for the next request when
    /// it can take one.
    fn give_back(&self, raw: Raw) {
        let Raw { mut conn, sender, .. } = raw;
        // One more poll lets the connection finish the message and wait for the next one
        // (whoever takes it polls it again with their own waker).
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if conn.as_mut().poll(&mut cx).is_ready() || sender.is_closed() {
            return;
        }
        let mut idle = self.pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(Idle { sender, conn, since: Instant::now() });
        }
        drop(idle);
        if !self.pool.swept.swap(true, Ordering::AcqRel) {
            sweep_while_idle(Arc::downgrade(&self.pool));
        }
    }
}

impl Pool {
    /// Closes the idle connections the upstream closed (their end is read here) or that
    /// were idle too long; whether any is left.
    fn sweep(&self) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        idle.retain_mut(|c| {
            now.duration_since(c.since) < IDLE_FOR
                && !c.sender.is_closed()
                && c.conn.as_mut().poll(&mut cx).is_pending()
        });
        !idle.is_empty()
    }
}

/// A task that sweeps the pool every `SWEEP_EVERY` while it holds idle connections, and ends
/// when none is left (the next one given back starts another) or the pool is gone.
fn sweep_while_idle(pool: Weak<Pool>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        if let Some(pool) = pool.upgrade() {
            pool.swept.store(false, Ordering::Release);
        }
        return;
    };
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            let Some(pool) = pool.upgrade() else { return };
            if !pool.sweep() {
                pool.swept.store(false, Ordering::Release);
                // One given back between the sweep and the store found the flag still set.
                if pool.sweep() && !pool.swept.swap(true, Ordering::AcqRel) {
                    continue;
                }
                return;
            }
        }
    });
}

/// The request a kept-alive connection took before it failed, made again from its parts.
fn rebuilt(
    (method, uri, headers, body): (http::Method, http::Uri, http::HeaderMap, Full<Bytes>),
) -> Request {
    let mut request = http::Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    request
}

/// Why no answer came, and the request when it never went out (hyper gives it back).
struct NoAnswer {
    failure: Failure,
    unsent: Option<Request>,
}

impl NoAnswer {
    fn of(mut err: TrySendError<Request>, reused: bool) -> NoAnswer {
        let unsent = err.take_message();
        NoAnswer { failure: Failure::Exchange { err: err.into_error(), reused }, unsent }
    }
}

/// Polls the connection until it takes a request. The connection first: one the upstream
/// closed while it was idle reads the end here (when its news has come).
async fn ready(
    sender: &mut SendRequest<Full<Bytes>>,
    conn: &mut Pin<Box<Conn>>,
    reused: bool,
) -> Result<(), Failure> {
    std::future::poll_fn(|cx| match conn.as_mut().poll(cx) {
        Poll::Ready(Ok(())) => Poll::Ready(Err(Failure::Closed { reused })),
        Poll::Ready(Err(err)) => Poll::Ready(Err(Failure::Exchange { err, reused })),
        Poll::Pending => sender.poll_ready(cx).map_err(|err| Failure::Exchange { err, reused }),
    })
    .await
}

/// Polls the answer and the connection together until the head of the answer is read.
async fn answer_head(
    answer: impl Future<Output = Result<http::Response<Incoming>, TrySendError<Request>>>,
    conn: &mut Pin<Box<Conn>>,
    reused: bool,
) -> Result<http::Response<Incoming>, NoAnswer> {
    let mut answer = std::pin::pin!(answer);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(done) = answer.as_mut().poll(cx) {
            return Poll::Ready(done.map_err(|err| NoAnswer::of(err, reused)));
        }
        let end = match conn.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(end) => end,
        };
        // The connection ended: the answer is either read now or never.
        if let Poll::Ready(done) = answer.as_mut().poll(cx) {
            return Poll::Ready(done.map_err(|err| NoAnswer::of(err, reused)));
        }
        let failure = match end {
            Ok(()) => Failure::Closed { reused },
            Err(err) => Failure::Exchange { err, reused },
        };
        Poll::Ready(Err(NoAnswer { failure, unsent: None }))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"))
    }

    #[test]
    fn only_plain_http_goes_direct_with_the_host_as_written() {
        let within = Duration::from_secs(1);
        assert!(Direct::for_url(&url("https://api.example.com/v1"), within).is_none());
        // The environment may name a proxy here (then nothing goes direct, rightly).
        let Some(plain) = Direct::for_url(&url("http://localhost:8080/v1/chat"), within) else {
            assert!(proxied());
            return;
        };
        assert_eq!(
            (plain.host.as_str(), plain.port, plain.authority.as_str()),
            ("localhost", 8080, "localhost:8080")
        );
        assert!(plain.serves(&url("http://localhost:8080/v1/models")));
        assert!(!plain.serves(&url("http://localhost:8081/v1/models")));
        assert!(!plain.serves(&url("https://localhost:8080/v1/models")));
        let default_port = Direct::for_url(&url("http://model.internal/v1"), within);
        let default_port = default_port.map(|d| (d.port, d.authority));
        assert_eq!(default_port, Some((80, "model.internal".to_owned())));
        let v6 =
            Direct::for_url(&url("http://[::1]:9000/v1"), within).map(|d| (d.host, d.authority));
        assert_eq!(v6, Some(("::1".to_owned(), "[::1]:9000".to_owned())));
    }

    #[test]
    fn the_request_target_is_the_path_and_query_with_the_host_header() {
        let Some(direct) =
            Direct::for_url(&url("http://127.0.0.1:7000/v1"), Duration::from_secs(1))
        else {
            return;
        };
        let mut request = reqwest::Request::new(
            http::Method::POST,
            url("http://127.0.0.1:7000/v1/chat/completions?api-version=2"),
        );
        *request.body_mut() = Some(reqwest::Body::from("{}"));
        let sent = direct.to_hyper(request);
        assert_eq!(sent.uri().to_string(), "/v1/chat/completions?api-version=2");
        assert_eq!(sent.headers()["host"], "127.0.0.1:7000");
        assert_eq!(sent.method(), http::Method::POST);
    }

    /// A server on 127.0.0.1 that answers one request on its first connection with `ok`,
    /// then closes that connection 50 ms later.
    async fn answers_once_then_closes() -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await;
        let listener = listener.unwrap_or_else(|err| panic!("{err}"));
        let addr = listener.local_addr().unwrap_or_else(|err| panic!("{err}"));
        tokio::runtime::Handle::current().spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let mut head = Vec::new();
            let mut buf = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        });
        addr
    }

    #[tokio::test]
    async fn idle_connections_the_upstream_closed_are_swept() {
        let addr = answers_once_then_closes().await;
        let Some(direct) =
            Direct::for_url(&url(&format!("http://{addr}/v1")), Duration::from_secs(1))
        else {
            return;
        };
        let request =
            reqwest::Request::new(http::Method::GET, url(&format!("http://{addr}/v1/models")));
        let body = match direct.send(request).await {
            Ok(response) => response.bytes().await.ok(),
            Err(failure) => panic!("{}", failure.chain()),
        };
        assert_eq!(body.as_deref(), Some(&b"ok"[..]));
        // Read to its end, the connection waits in the pool, and a sweeper looks after it.
        assert!(direct.pool.swept.load(Ordering::Acquire));
        assert!(direct.pool.sweep(), "still open: kept");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!direct.pool.sweep(), "closed by the upstream: closed here too");
        assert!(direct.take().is_none());
    }
}
