//! Graceful shutdown: a request already in flight is finished and its event stored.

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
};

use crate::support::{Signer, TestApp, TestDb, config, config_toml};

#[tokio::test]
async fn an_in_flight_request_completes_during_graceful_shutdown() {
    let db = TestDb::sqlite();
    let app = TestApp::spawn(config(&config_toml(&db, ""))).await;
    let req = Signer::default().message("ev-inflight", "om-inflight", "almost there");
    let host = app.base.trim_start_matches("http://").to_string();

    let stream = TcpStream::connect(&host).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut head = format!(
        "POST /webhook/planner/event HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nExpect: 100-continue\r\n",
        req.body.len()
    );
    for (k, v) in &req.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    write.write_all(head.as_bytes()).await.expect("send head");
    // The server asks for the body only once the handler is reading it: from here on
    // the request is in flight.
    let mut line = String::new();
    read.read_line(&mut line).await.expect("read 100");
    assert!(line.starts_with("HTTP/1.1 100"), "{line}");
    read.read_line(&mut line).await.expect("blank line");

    let stopping = tokio::spawn(app.stop());
    write
        .write_all(req.body.as_bytes())
        .await
        .expect("send body");
    let mut response = String::new();
    read.read_to_string(&mut response)
        .await
        .expect("read response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#"{"msg":"success"}"#), "{response}");
    stopping.await.expect("join").expect("clean stop");
    assert_eq!(
        db.count("inbox_events").await,
        1,
        "the in-flight event was stored"
    );
}
