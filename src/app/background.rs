//! Work that outlives the request that started it and must end before the bridge stops:
//! a card press answered before it was stored keeps going after its answer, and the
//! shutdown waits for it (within its grace period) before the committers stop.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::{sync::Notify, task::JoinHandle};

/// The tasks started through [`BackgroundTasks::spawn`] that have not ended yet.
#[derive(Debug, Default, Clone)]
pub struct BackgroundTasks {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    running: AtomicUsize,
    ended: Notify,
}

/// Counts one task while it lives, however it ends (finished, panicked or dropped).
struct Running(Arc<Inner>);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.ended.notify_waiters();
        }
    }
}

impl BackgroundTasks {
    /// Runs `task` on the runtime, counted until it ends.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.running.fetch_add(1, Ordering::AcqRel);
        let running = Running(self.inner.clone());
        tokio::spawn(async move {
            let _running = running;
            task.await
        })
    }

    /// How many have not ended.
    pub fn running(&self) -> usize {
        self.inner.running.load(Ordering::Acquire)
    }

    /// Resolves once none is running (at once when none is).
    pub async fn idle(&self) {
        loop {
            let ended = self.inner.ended.notified();
            tokio::pin!(ended);
            // Registered before the count is read, so an end in between is not missed.
            ended.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            ended.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test]
    async fn idle_waits_for_every_task_however_it_ends() {
        let tasks = BackgroundTasks::default();
        tasks.idle().await;
        let (finish, finished) = oneshot::channel::<()>();
        let (_never, pending) = oneshot::channel::<()>();
        tasks.spawn(async move {
            let _ = finished.await;
        });
        let stuck = tasks.spawn(async move {
            let _ = pending.await;
        });
        assert_eq!(tasks.running(), 2);
        let idle = tokio::spawn({
            let tasks = tasks.clone();
            async move { tasks.idle().await }
        });
        finish.send(()).expect("task waits");
        stuck.abort();
        idle.await.expect("idle once both ended");
        assert_eq!(tasks.running(), 0);
    }
}
