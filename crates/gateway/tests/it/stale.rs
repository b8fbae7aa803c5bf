//! Kept-alive upstream connections. Issue 24: an upstream that closes one just as the gateway
//! sends on it (llama.cpp's server did, between an emulated attempt and its retry) costs the
//! client nothing: the request goes again on a new connection. Issue 25: a streamed reply
//! read to its `[DONE]` leaves its connection to the next request, whether the body's last
//! chunk came with it or later; and a request the upstream dropped after working on it is not
//! sent twice.

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{MockUpstream, base_config, serve_config};

/// A completion as the upstream's one JSON body.
fn completion(text: &str) -> String {
    let body = json!({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Reads one request (head and a body of `content-length` bytes): its text, if one came.
async fn read_request_text(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut data = Vec::new();
    let mut buf = [0; 8192];
    loop {
        let Ok(n) = stream.read(&mut buf).await else { return None };
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return Some(text.into_owned());
            }
        }
    }
}

/// Reads one request: whether one came, and whether it was a `GET`.
async fn read_request_line(stream: &mut tokio::net::TcpStream) -> Option<bool> {
    read_request_text(stream).await.map(|text| text.starts_with("GET "))
}

/// Reads one request (head and a body of `content-length` bytes).
async fn read_request(stream: &mut tokio::net::TcpStream) -> bool {
    read_request_line(stream).await.is_some()
}

/// One HTTP/1.1 chunk.
fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

/// A raw HTTP/1.1 upstream on 127.0.0.1: each connection it accepts (numbered from 1) is
/// served by `serve`, which sends the connection's number for each request it reads. Its URL,
/// and a reader of those numbers.
async fn raw_upstream<F, Fut>(serve: F) -> (String, Seen)
where
    F: Fn(usize, tokio::net::TcpStream, Sender<usize>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (seen_tx, seen_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    crate::common::spawn(async move {
        let mut connection = 0;
        while let Ok((stream, _)) = listener.accept().await {
            connection += 1;
            crate::common::spawn(serve(connection, stream, seen_tx.clone()));
        }
    });
    (url, Seen(seen_rx))
}

type Sender<T> = tokio::sync::mpsc::UnboundedSender<T>;

/// The numbers of the connections requests came on.
struct Seen(tokio::sync::mpsc::UnboundedReceiver<usize>);

impl Seen {
    /// Those so far, in order.
    fn so_far(&mut self) -> Vec<usize> {
        let mut seen = Vec::new();
        while let Ok(n) = self.0.try_recv() {
            seen.push(n);
        }
        seen
    }
}

#[tokio::test]
async fn issue_25_streamed_replies_leave_their_connection_to_the_next_request() {
    let (url, mut seen) = raw_upstream(|connection, mut stream, seen| async move {
                let mut answered = 0;
                while let Some(get) = read_request_line(&mut stream).await {
                    let _ = seen.send(connection);
                    answered += 1;
                    if get {
                        let list = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            list.len()
                        );
                        let _ = stream.write_all(format!("{head}{list}").as_bytes()).await;
                        continue;
                    }
                    let mut reply = String::from(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
                    );
                    for event in [
                        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"It is "}}]}"#,
                        r#"{"choices":[{"index":0,"delta":{"content":"sunny."},"finish_reason":"stop"}]}"#,
                    ] {
                        reply.push_str(&chunk(&format!("data: {event}\n\n")));
                    }
                    reply.push_str(&chunk("data: [DONE]\n\n"));
                    let _ = stream.write_all(reply.as_bytes()).await;
                    // Every other reply's last chunk comes a moment after its `[DONE]`.
                    if answered % 2 == 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    let _ = stream.write_all(b"0\r\n\r\n").await;
                }
    })
    .await;
    let gw = serve_config(MockUpstream::start().await, base_config(&url)).await;
    let plain = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..4 {
        let (status, body) = gw.chat(&plain).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["message"]["content"], "It is sunny.");
        // Time for a late last chunk to be read before the next request.
        tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    }
    let seen = seen.so_far();
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(seen.iter().all(|&c| c == 1), "every request on the first connection: {seen:?}");
}

#[tokio::test]
async fn issue_24_a_kept_alive_connection_the_upstream_closed_is_not_an_error() {
    // The first connection answers once, keeps the connection open, then takes the next
    // request and closes without an answer; later ones answer.
    let (url, mut seen) = raw_upstream(|connection, mut stream, seen| async move {
        let mut answered = 0;
        while read_request(&mut stream).await {
            let _ = seen.send(connection);
            if connection == 1 && answered == 1 {
                return;
            }
            answered += 1;
            let _ = stream.write_all(completion("It is sunny.").as_bytes()).await;
        }
    })
    .await;
    // The mock is only the helpers' handle: the gateway's upstream is the server above.
    let gw = serve_config(MockUpstream::start().await, base_config(&url)).await;
    let plain = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..2 {
        let (status, body) = gw.chat(&plain).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["message"]["content"], "It is sunny.");
    }
    let seen = seen.so_far();
    // The first connection answered once (the startup probe or the first chat) and closed on
    // the next request, which went again on a new connection.
    assert_eq!(seen.iter().filter(|&&c| c == 1).count(), 2, "{seen:?}");
    assert!(seen.contains(&2), "a second connection was opened: {seen:?}");
}

#[tokio::test]
async fn issue_25_idle_connections_the_upstream_closed_are_not_errors() {
    // As llama.cpp's server does (after 5 s): a connection idle for 100 ms is closed.
    let (url, mut seen) = raw_upstream(|connection, mut stream, seen| async move {
        let idle = std::time::Duration::from_millis(100);
        while let Ok(true) = tokio::time::timeout(idle, read_request(&mut stream)).await {
            let _ = seen.send(connection);
            // Slow enough for requests at once to need a connection each.
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            let _ = stream.write_all(completion("It is sunny.").as_bytes()).await;
        }
    })
    .await;
    let gw = serve_config(MockUpstream::start().await, base_config(&url)).await;
    let plain = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for round in 0..3 {
        // Three at once leave three idle connections, which the upstream then closes.
        let answers = futures::future::join_all((0..3).map(|_| gw.chat(&plain))).await;
        for (status, body) in answers {
            assert_eq!(status, 200, "round {round}: {body}");
            assert_eq!(body["choices"][0]["message"]["content"], "It is sunny.");
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(seen.so_far().len() >= 9);
}

#[tokio::test]
async fn issue_25_a_request_dropped_after_a_while_is_not_sent_again() {
    // Every request is answered at once but one asking about Mars, which the upstream works
    // on for longer than a stale connection takes to show, then drops with its connection.
    let (url, mut seen) = raw_upstream(|connection, mut stream, seen| async move {
        while let Some(text) = read_request_text(&mut stream).await {
            if text.contains("Mars") {
                let _ = seen.send(connection);
                tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
                return;
            }
            let _ = stream.write_all(completion("It is sunny.").as_bytes()).await;
        }
    })
    .await;
    let gw = serve_config(MockUpstream::start().await, base_config(&url)).await;
    let plain = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let (status, body) = gw.chat(&plain).await;
    assert_eq!(status, 200, "{body}");
    // On the kept-alive connection the first request left.
    let mars = json!({"model": "m", "messages": [{"role": "user", "content": "Weather on Mars?"}]});
    let (status, body) = gw.chat(&mars).await;
    assert_eq!(status, 502, "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(seen.so_far().len(), 1, "the model got the request once");
    let (status, body) = gw.chat(&plain).await;
    assert_eq!(status, 200, "the next request is served: {body}");
}
