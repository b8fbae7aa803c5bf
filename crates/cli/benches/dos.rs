//! Attempts to take the gateway down without a key (issue 14), on loopback: half-sent
//! request heads, idle connections, and large unauthenticated bodies. Shared by the load
//! bench's `dos` scenario (`cargo bench -p toolshim --bench load -- --scenario dos`, which
//! prints the figures) and the CLI tests (which run them briefly, with assertions).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Half a request head: what a slowloris client sends and then keeps open.
pub(crate) const HALF_HEAD: &[u8] =
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: appl";

/// Opens `n` connections; each sends `first` (nothing when empty). Connections the
/// gateway refused or closed at once still count as opened.
pub(crate) async fn open(addr: SocketAddr, n: usize, first: &[u8]) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        let Ok(mut stream) = TcpStream::connect(addr).await else { continue };
        if !first.is_empty() {
            let _ = stream.write_all(first).await;
        }
        streams.push(stream);
    }
    streams
}

/// Reads each stream until the gateway closes it, or `within` passes: when each closed,
/// from now (`None`: still open).
pub(crate) async fn closed_after(
    streams: Vec<TcpStream>,
    within: Duration,
) -> Vec<Option<Duration>> {
    let started = Instant::now();
    let waits = streams.into_iter().map(|mut stream| async move {
        let mut buf = [0; 1024];
        loop {
            let left = within.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, stream.read(&mut buf)).await {
                Err(_) => return None,
                Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
                Ok(Ok(_)) => {}
            }
        }
    });
    futures::future::join_all(waits).await
}

/// `GET /healthz` on a fresh connection: the status (0 when there was no HTTP answer) and
/// how long it took.
pub(crate) async fn health(addr: SocketAddr) -> (u16, Duration) {
    let started = Instant::now();
    let status = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response);
        text.split(' ').nth(1)?.parse().ok()
    };
    let status = tokio::time::timeout(Duration::from_secs(10), status).await.ok().flatten();
    (status.unwrap_or(0), started.elapsed())
}

/// `n` requests at once, each announcing a `size`-byte body without a key and sending it:
/// the status each got (0 for none) and when.
pub(crate) async fn unauthenticated_bodies(
    addr: SocketAddr,
    n: usize,
    size: usize,
) -> Vec<(u16, Duration)> {
    let started = Instant::now();
    let sends = (0..n).map(|_| async move {
        let Ok(stream) = TcpStream::connect(addr).await else { return (0, started.elapsed()) };
        let (mut read, mut write) = stream.into_split();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n"
        );
        let sender = async move {
            let _ = write.write_all(head.as_bytes()).await;
            let piece = vec![b' '; 64 << 10];
            let mut sent = 0;
            while sent < size {
                let n = piece.len().min(size - sent);
                if write.write_all(&piece[..n]).await.is_err() {
                    break;
                }
                sent += n;
            }
        };
        let reader = async move {
            let mut buf = vec![0; 4096];
            let n = read.read(&mut buf).await.unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            (text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), started.elapsed())
        };
        // The answer is what counts; the sender stops when the gateway closes.
        let (answer, ()) = tokio::join!(reader, async {
            let _ = tokio::time::timeout(Duration::from_secs(10), sender).await;
        });
        answer
    });
    futures::future::join_all(sends).await
}
