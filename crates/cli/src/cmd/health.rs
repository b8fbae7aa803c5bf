//! `toolshim health`: a `GET` of a running gateway's `/readyz`, for health checks where no
//! HTTP client is installed (the container image has none).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::args::HealthArgs;
use crate::cmd::UsageError;

/// The largest answer read.
const MAX_ANSWER: u64 = 1 << 20;

pub(crate) fn run(args: &HealthArgs) -> anyhow::Result<()> {
    let (authority, path) = split(&args.url)?;
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(UsageError::new(format!(
            "--timeout {}: must be a positive number of seconds",
            args.timeout
        ))
        .into());
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let deadline = Instant::now() + timeout;
    let address = authority
        .to_socket_addrs()
        .with_context(|| format!("{authority}: not an address"))?
        .next()
        .with_context(|| format!("{authority}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, timeout)
        .with_context(|| format!("{}: nothing answers", args.url))?;
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n")?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .with_context(|| format!("{}: no whole answer", args.url))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok()).unwrap_or(0);
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", body.trim_end())?;
    if !(200..300).contains(&status) {
        bail!("{} answered {status}", args.url);
    }
    Ok(())
}

/// `HOST:PORT` and the path of an `http://` URL.
fn split(url: &str) -> anyhow::Result<(String, String)> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(UsageError::new(format!(
            "--url {url}: only http:// URLs (the gateway on its own host)"
        ))
        .into());
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(UsageError::new(format!("--url {url}: no host")).into());
    }
    let authority =
        if authority.contains(':') { authority.to_owned() } else { format!("{authority}:80") };
    Ok((authority, path.to_owned()))
}
