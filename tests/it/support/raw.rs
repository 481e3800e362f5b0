//! HTTP/1.1 by hand over a plain TCP socket, for clients no HTTP library plays: ones that
//! stop half-way through a request, say nothing at all, or keep a connection idle.

use std::time::Duration;

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
};

/// How long a test waits for the bridge to answer or to close a connection: far above
/// every limit the tests configure, so only a bridge that never acts runs into it.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A client connection.
pub struct Conn(BufReader<TcpStream>);

impl Conn {
    /// Connects to `base` (`http://127.0.0.1:port`).
    pub async fn open(base: &str) -> Self {
        let host = base.trim_start_matches("http://");
        Self(BufReader::new(
            TcpStream::connect(host).await.expect("connect"),
        ))
    }

    /// Connects and sends `bytes`.
    pub async fn sending(base: &str, bytes: &str) -> Self {
        let mut c = Self::open(base).await;
        c.send(bytes).await;
        c
    }

    /// Sends `bytes`.
    pub async fn send(&mut self, bytes: &str) {
        self.0
            .get_mut()
            .write_all(bytes.as_bytes())
            .await
            .expect("send");
    }

    /// Sends `GET path` (keep-alive) and reads the answer: (status, body).
    pub async fn get(&mut self, path: &str) -> (u16, String) {
        self.send(&format!("GET {path} HTTP/1.1\r\nHost: bridge\r\n\r\n"))
            .await;
        self.response().await
    }

    /// Reads one response with a `Content-Length` body: (status, body).
    pub async fn response(&mut self) -> (u16, String) {
        tokio::time::timeout(DEADLINE, self.read_response())
            .await
            .expect("the bridge answers within the deadline")
    }

    async fn read_response(&mut self) -> (u16, String) {
        let mut line = String::new();
        self.0.read_line(&mut line).await.expect("status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP status line: {line:?}"));
        let mut length = 0;
        loop {
            line.clear();
            self.0.read_line(&mut line).await.expect("header line");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("content length");
            }
        }
        let mut body = vec![0; length];
        self.0.read_exact(&mut body).await.expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// Waits until the bridge closes the connection (end of stream or reset); returns
    /// whatever it sent before.
    pub async fn closed_by_server(mut self) -> Vec<u8> {
        let mut received = Vec::new();
        let read = self.0.read_to_end(&mut received);
        match tokio::time::timeout(DEADLINE, read).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Ok(Err(e)) => panic!("read failed: {e}"),
            Err(_) => panic!("the bridge kept the connection open past the deadline"),
        }
        received
    }
}

/// `GET path` on a connection of its own, closed after the answer: (status, body).
pub async fn get_once(base: &str, path: &str) -> (u16, String) {
    let mut c = Conn::open(base).await;
    c.send(&format!(
        "GET {path} HTTP/1.1\r\nHost: bridge\r\nConnection: close\r\n\r\n"
    ))
    .await;
    c.response().await
}

/// The value of an unlabelled or fully labelled sample in Prometheus text, e.g.
/// `feishu_bridge_http_connections` or `x_total{phase="idle"}`.
pub fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{metrics}"))
}
