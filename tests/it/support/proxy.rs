//! A TCP proxy in front of the real Postgres that a test can switch off: existing
//! connections are cut and new ones are accepted but never answered (a database host
//! that stopped responding), until it is switched on again.

use std::net::SocketAddr;

use tokio::{
    io::copy_bidirectional,
    net::{TcpListener, TcpStream},
    sync::watch,
};

/// The proxy; stops when dropped.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    up: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("addr");
        let (up, rx) = watch::channel(true);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, upstream, rx.clone()));
            }
        });
        Self { addr, up, task }
    }

    /// Cuts every connection; new ones hang.
    pub fn down(&self) {
        self.up.send_replace(false);
    }

    /// Forwards again.
    pub fn up(&self) {
        self.up.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut client: TcpStream, upstream: SocketAddr, mut up: watch::Receiver<bool>) {
    if !*up.borrow_and_update() {
        // Hold the connection without a word until the database is back, then drop it.
        let _ = up.wait_for(|u| *u).await;
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    tokio::select! {
        _ = copy_bidirectional(&mut client, &mut server) => {}
        _ = up.wait_for(|u| !*u) => {}
    }
}
