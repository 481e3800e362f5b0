//! A bridge in a runtime of its own, so that a test can crash it: dropping the runtime
//! ends every task wherever it stands, with nothing flushed or cleaned up — what a
//! killed process leaves behind.

use feishu_bridge::{Bridge, Config, inbox::Processed};
use tokio::{
    net::TcpListener,
    sync::{broadcast, oneshot},
};

/// A bridge that can only be crashed, never stopped.
pub struct Crashable {
    /// `http://127.0.0.1:port`
    pub base: String,
    processed: broadcast::Receiver<Processed>,
    crash: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Crashable {
    /// Starts the bridge on its own two-thread runtime.
    pub async fn start(config: Config) -> Self {
        let (base_tx, base_rx) = oneshot::channel();
        let (crash, crashed) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let bridge = Bridge::start(config).await.expect("bridge starts");
                let processed = bridge.state().processed.subscribe();
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let addr = listener.local_addr().expect("addr");
                tokio::spawn(bridge.serve(listener, std::future::pending()));
                base_tx.send((format!("http://{addr}"), processed)).ok();
                crashed.await.ok();
            });
            rt.shutdown_background();
        });
        let (base, processed) = base_rx.await.expect("bridge started");
        Self {
            base,
            processed,
            crash,
            thread,
        }
    }

    /// Posts a signed callback to `/webhook/planner/event`; returns the HTTP status.
    pub async fn event(&self, req: &super::Request) -> u16 {
        let r =
            req.apply(reqwest::Client::new().post(format!("{}/webhook/planner/event", self.base)));
        r.send().await.expect("request sent").status().as_u16()
    }

    /// Waits until the worker has processed `event_id` (of any profile).
    pub async fn processed(&mut self, event_id: &str) -> Processed {
        let what = format!("the processing of {event_id}");
        super::next_matching(&mut self.processed, &what, |p| p.event_id == event_id).await
    }

    /// Crashes it and waits until its runtime is gone.
    pub async fn crash(self) {
        self.crash.send(()).ok();
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .expect("join")
            .expect("bridge thread");
    }
}
