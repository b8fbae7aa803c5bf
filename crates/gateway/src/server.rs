//! Accepting connections: the open-connection cap, the header-read and keep-alive timeouts,
//! and shutdown with a drain timeout.
//!
//! Each connection is served by hyper's HTTP/1 server in a task of the server's
//! `TaskTracker`, watched by a small state machine (`Phase`): while no request is in flight
//! the connection may be idle for `keep_alive_timeout_secs`; once the first byte of a request
//! head arrives the whole head must come within `header_read_timeout_secs`; while a request
//! is in flight the connection has no deadline of its own (the body has
//! `body_read_timeout_secs`, enforced where it is read, and the reply has the upstream's
//! timeouts). A connection past its deadline is closed.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::body::OnEnd;

/// The limits on client connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    /// Open connections at most; one more is answered 503 and closed.
    pub(crate) max_connections: usize,
    /// From the first byte of a request head to its end.
    pub(crate) header_read: Duration,
    /// How long a connection with no request in flight stays open.
    pub(crate) keep_alive: Duration,
}

/// How a shutdown ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServeReport {
    /// Requests still in flight when the drain timeout passed, which were cut off (streams
    /// end with an in-band error, other requests get a 503).
    pub cut_requests: usize,
}

/// Where a connection is, for its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No request in flight and no byte of the next one: the keep-alive timeout runs.
    Idle { since: Instant },
    /// Bytes of a request head have come: the header-read timeout runs.
    Head { since: Instant },
    /// `n` requests are in flight (a head was read, the response is not yet fully sent).
    Busy { n: usize },
}

/// A connection's phase, shared by its reader, its service and its watchdog.
#[derive(Debug)]
struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            phase: Mutex::new(Phase::Idle { since: Instant::now() }),
            changed: Notify::new(),
        }
    }

    /// Changes the phase. The watchdog is woken only when a deadline starts (the first byte
    /// of a head, or the end of the last request in flight); a phase that removes or extends
    /// the deadline waits until the watchdog next looks (at its old deadline), which saves a
    /// wake-up per request.
    fn update(&self, change: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        let next = change(*phase);
        let starts_deadline = matches!(
            (*phase, next),
            (Phase::Idle { .. }, Phase::Head { .. }) | (Phase::Busy { .. }, Phase::Idle { .. })
        );
        *phase = next;
        if starts_deadline {
            self.changed.notify_one();
        }
    }

    fn get(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived from the client.
    fn read(&self) {
        self.update(|phase| match phase {
            Phase::Idle { .. } => Phase::Head { since: Instant::now() },
            other => other,
        });
    }

    /// A request head was read and handed to the router.
    fn request_started(&self) {
        self.update(|phase| match phase {
            Phase::Busy { n } => Phase::Busy { n: n + 1 },
            Phase::Idle { .. } | Phase::Head { .. } => Phase::Busy { n: 1 },
        });
    }

    /// A response was sent whole, or dropped.
    fn request_ended(&self) {
        self.update(|phase| match phase {
            Phase::Busy { n } if n > 1 => Phase::Busy { n: n - 1 },
            _ => Phase::Idle { since: Instant::now() },
        });
    }
}

/// The client socket, reporting reads to the connection's `Activity`.
struct Watched {
    tcp: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// One request counted in the server's `in_flight` until it is dropped.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::SeqCst);
        InFlight(count)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The open-connection cap actually used: the configured one, lowered so that client
/// connections and their upstream connections fit the process's file-descriptor limit.
pub(crate) fn connection_cap(configured: usize) -> usize {
    match fd_limit() {
        Some(limit) => {
            // Each client connection may hold an upstream connection too; keep some
            // descriptors for the listener, logs and the upstream pool.
            let fit = usize::try_from(limit.saturating_sub(64) / 2).unwrap_or(usize::MAX).max(1);
            if fit < configured {
                tracing::warn!(
                    configured,
                    used = fit,
                    fd_limit = limit,
                    "max_connections is above what the file-descriptor limit allows; using the lower cap (raise `ulimit -n` to lift it)"
                );
            }
            configured.min(fit)
        }
        None => configured,
    }
}

#[cfg(unix)]
fn fd_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn fd_limit() -> Option<u64> {
    None
}

/// What a connection is answered when the cap is reached.
const BUSY_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: 131\r\n\r\n{\"error\":{\"message\":\"The gateway has too many open connections; try again later.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";

/// Connections past the cap that are waiting for a place or being answered 503, at once.
const MAX_REFUSALS: usize = 64;

/// The open connections, for eviction at the cap, and the connections past the cap waiting
/// for a place. Ids are given in the order connections are accepted.
#[derive(Debug)]
struct Registry {
    /// The places (the semaphore's permits).
    cap: usize,
    next_id: AtomicUsize,
    places: Mutex<Places>,
    /// A connection was registered or removed.
    changed: Notify,
}

#[derive(Debug, Default)]
struct Places {
    open: Vec<Registered>,
    /// Connections past the cap waiting for a place.
    waiting: usize,
}

/// What a connection past the cap may count on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// As many places are on their way (connections being evicted, permits not yet taken
    /// up by a connection) as connections wait.
    Coming,
    /// No place is coming, none is being freed, and there is nothing to evict: every
    /// connection accepted before this one has a request in flight.
    Full,
}

#[derive(Debug)]
struct Registered {
    id: usize,
    activity: Arc<Activity>,
    evict: CancellationToken,
}

impl Registry {
    fn new(cap: usize) -> Registry {
        Registry {
            cap,
            next_id: AtomicUsize::new(0),
            places: Mutex::new(Places::default()),
            changed: Notify::new(),
        }
    }

    fn places(&self) -> std::sync::MutexGuard<'_, Places> {
        self.places.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The id of a connection just accepted.
    fn next_id(&self) -> usize {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn add(&self, id: usize, activity: Arc<Activity>, evict: CancellationToken) {
        self.places().open.push(Registered { id, activity, evict });
        self.changed.notify_waiters();
    }

    fn remove(&self, id: usize) {
        let mut places = self.places();
        if let Some(at) = places.open.iter().position(|entry| entry.id == id) {
            places.open.swap_remove(at);
        }
        drop(places);
        self.changed.notify_waiters();
    }

    /// For connection `id`, waiting past the cap: when fewer places are on their way than
    /// connections wait, closes the connection accepted before it that has waited longest
    /// with no request in flight (one accepted later never makes room for an earlier one).
    /// With none to close, it waits while places are being freed (a connection it could
    /// close may be placed then), and is `Full` when none are.
    fn make_room(&self, id: usize) -> Room {
        let places = self.places();
        let closing = places.open.iter().filter(|entry| entry.evict.is_cancelled()).count();
        let unclaimed = self.cap.saturating_sub(places.open.len());
        if closing + unclaimed >= places.waiting {
            return Room::Coming;
        }
        let oldest = places
            .open
            .iter()
            .filter(|entry| entry.id < id && !entry.evict.is_cancelled())
            .filter_map(|entry| match entry.activity.get() {
                Phase::Idle { since } | Phase::Head { since } => Some((since, entry)),
                Phase::Busy { .. } => None,
            })
            .min_by_key(|(since, _)| *since);
        match oldest {
            Some((_, entry)) => {
                entry.evict.cancel();
                Room::Coming
            }
            None if closing + unclaimed > 0 => Room::Coming,
            None => Room::Full,
        }
    }

    /// Waits for a place for connection `id`, past the cap: in the queue for a permit first,
    /// then making room as long as too few places are coming. `None` when there is no room
    /// (`Room::Full`) or none came within `within` (the header-read timeout: a connection
    /// that waits has not had its head read).
    async fn wait_for_place(
        &self,
        id: usize,
        permits: Arc<Semaphore>,
        within: Duration,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        use futures::FutureExt;
        let acquire = permits.acquire_owned();
        tokio::pin!(acquire);
        // In the queue first, then make room: the place an eviction frees goes to a
        // connection that waits for one, never to the next one accepted.
        if let Some(place) = (&mut acquire).now_or_never() {
            return place.ok();
        }
        let _waiting = Waiting::new(self);
        let wait = async {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if self.make_room(id) == Room::Full {
                    return None;
                }
                tokio::select! {
                    place = &mut acquire => return place.ok(),
                    () = &mut changed => {}
                }
            }
        };
        tokio::time::timeout(within, wait).await.ok().flatten()
    }
}

/// A connection counted in `Places::waiting` until it is dropped.
struct Waiting<'a>(&'a Registry);

impl Waiting<'_> {
    fn new(registry: &Registry) -> Waiting<'_> {
        registry.places().waiting += 1;
        Waiting(registry)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut places = self.0.places();
        places.waiting = places.waiting.saturating_sub(1);
    }
}

/// What a connection task needs.
struct Serve {
    app: Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
    in_flight: Arc<AtomicUsize>,
    registry: Arc<Registry>,
}

/// A connection that has its place: registered, so that it can be evicted, from the
/// moment it holds a permit.
struct Placed {
    id: usize,
    activity: Arc<Activity>,
    evict: CancellationToken,
    permit: tokio::sync::OwnedSemaphorePermit,
}

impl Serve {
    fn place(&self, id: usize, permit: tokio::sync::OwnedSemaphorePermit) -> Placed {
        let activity = Arc::new(Activity::new());
        let evict = CancellationToken::new();
        self.registry.add(id, Arc::clone(&activity), evict.clone());
        Placed { id, activity, evict, permit }
    }

    async fn run(self, tcp: TcpStream, peer: SocketAddr, placed: Placed) {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY on a client connection");
        }
        let Placed { id, activity, evict, permit } = placed;
        self.connection(tcp, peer, activity, evict).await;
        self.registry.remove(id);
        drop(permit);
    }
}

/// Answers a connection past the cap with a 503, then reads what the client sent for a
/// moment (50 ms), so the answer is not lost to a reset.
async fn refuse(mut tcp: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = async {
        tcp.write_all(BUSY_RESPONSE).await?;
        tcp.shutdown().await?;
        let mut sink = [0; 1024];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_millis(50), answer).await;
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then lets requests in flight
/// finish for `drain`; past that, `cut` is cancelled (streams end with an in-band error,
/// other requests are answered 503) and the report counts the requests that were cut.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: CancellationToken,
    drain: Duration,
    cut: CancellationToken,
) -> ServeReport {
    let tracker = TaskTracker::new();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let registry = Arc::new(Registry::new(limits.max_connections));
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                // Out of descriptors, or a connection reset before it was accepted: the
                // listener itself is fine. Back off briefly so a full table can drain.
                tracing::warn!(error = %err, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let serve = Serve {
            app: app.clone(),
            limits,
            shutdown: shutdown.clone(),
            in_flight: Arc::clone(&in_flight),
            registry: Arc::clone(&registry),
        };
        let id = serve.registry.next_id();
        if let Ok(permit) = Arc::clone(&permits).try_acquire_owned() {
            // Registered here, not in its task: a burst accepts many connections before
            // their tasks run, and the ones after the cap must find them to evict.
            let placed = serve.place(id, permit);
            tracker.spawn(serve.run(tcp, peer, placed));
            continue;
        }
        // At the cap. The connection that has waited longest without a request in flight
        // (an idle one, or one sending its head slowly) makes room; the new one waits for
        // its place (`Registry::wait_for_place`: for connections to close, never for a
        // set time), and is answered 503 if there is no room. A few at a time; past that,
        // it is closed at once.
        let Ok(slot) = Arc::clone(&refusals).try_acquire_owned() else {
            tracing::warn!(peer = %peer, max_connections = limits.max_connections, "connection closed: too many open connections");
            drop(tcp);
            continue;
        };
        let permits = Arc::clone(&permits);
        tracker.spawn(async move {
            let place = serve.registry.wait_for_place(id, permits, limits.header_read).await;
            drop(slot);
            match place {
                Some(permit) => {
                    let placed = serve.place(id, permit);
                    serve.run(tcp, peer, placed).await;
                }
                None => {
                    tracing::warn!(peer = %peer, max_connections = limits.max_connections, "connection refused: too many open connections");
                    refuse(tcp).await;
                }
            }
        });
    }
    drop(listener);
    tracker.close();
    let mut report = ServeReport::default();
    if tokio::time::timeout(drain, tracker.wait()).await.is_err() {
        report.cut_requests = in_flight.load(Ordering::SeqCst);
        tracing::warn!(
            cut = report.cut_requests,
            "drain timeout reached; cutting the requests still in flight"
        );
        cut.cancel();
        // They end at once now; the grace only lets their last bytes go out.
        if tokio::time::timeout(Duration::from_secs(2), tracker.wait()).await.is_err() {
            tracing::warn!("connections still open after the cut; closing them");
        }
    }
    report
}

impl Serve {
    /// Serves one connection until it ends, its deadline passes, it is evicted, or the
    /// server shuts down.
    async fn connection(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        activity: Arc<Activity>,
        evict: CancellationToken,
    ) {
        let (app, limits, shutdown, in_flight) =
            (self.app.clone(), self.limits, self.shutdown.clone(), Arc::clone(&self.in_flight));
        let io = TokioIo::new(Watched { tcp, activity: Arc::clone(&activity) });
        let service_activity = Arc::clone(&activity);
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let activity = Arc::clone(&service_activity);
            activity.request_started();
            let guard = InFlight::new(Arc::clone(&in_flight));
            let app = app.clone();
            async move {
                let response = app.oneshot(request.map(Body::new)).await;
                // The request ends when its response body was sent whole, or dropped.
                response.map(|response| {
                    response.map(|inner| {
                        OnEnd::hook(inner, tracing::Span::none(), move || {
                            activity.request_ended();
                            drop(guard);
                        })
                    })
                })
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .header_read_timeout(None)
            .serve_connection(io, service);
        tokio::pin!(conn);
        let mut closing = false;
        // One timer, reset when the deadline moves.
        let sleep = tokio::time::sleep(limits.keep_alive);
        tokio::pin!(sleep);
        loop {
            let phase = activity.get();
            let deadline = match phase {
                Phase::Busy { .. } => None,
                Phase::Head { since } => Some((since + limits.header_read, "header_read_timeout")),
                Phase::Idle { since } => Some((since + limits.keep_alive, "keep_alive_timeout")),
            };
            if closing && deadline.is_some() {
                // Shutting down and nothing in flight (an idle connection, or half a head).
                return;
            }
            if let Some((at, _)) = deadline {
                if sleep.deadline() != at {
                    sleep.as_mut().reset(at);
                }
            }
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(peer = %peer, error = %err, "client connection ended with an error");
                    }
                    return;
                }
                () = activity.changed.notified() => {}
                () = evict.cancelled(), if !closing => {
                    tracing::debug!(peer = %peer, "closing a waiting connection to make room");
                    if !matches!(activity.get(), Phase::Busy { .. }) {
                        return;
                    }
                    // A request came in the meantime: it finishes, then the connection closes.
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = &mut sleep, if deadline.is_some() => {
                    if activity.get() != phase {
                        continue;
                    }
                    if let Some((_, which)) = deadline {
                        tracing::debug!(peer = %peer, timeout = which, "closing a client connection");
                    }
                    return;
                }
                () = shutdown.cancelled(), if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
