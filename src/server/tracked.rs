//! The socket and body wrappers that report a connection's progress to its
//! [`Tracker`]: bytes arriving on an idle socket, the end of a request body, and the
//! end of a response body.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::phase::Tracker;

/// A socket that tells its tracker when bytes arrive.
#[derive(Debug)]
pub struct WatchedIo<S> {
    inner: S,
    tracker: Tracker,
}

impl<S> WatchedIo<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, tracker: Tracker) -> Self {
        Self { inner, tracker }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WatchedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        // End of stream reads nothing; only real bytes start a request.
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.tracker.bytes_arrived();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WatchedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Which end a [`TrackedBody`] reports.
#[derive(Debug, Clone, Copy)]
pub enum BodyEnd {
    /// A request body: its end moves the connection from `Body` to `Handling`.
    Request,
    /// A response body: its end moves the connection to `Idle`.
    Response,
}

/// A body that tells its tracker when it has ended or was dropped unfinished.
#[derive(Debug)]
pub struct TrackedBody<B> {
    inner: B,
    end: BodyEnd,
    tracker: Option<Tracker>,
}

impl<B> TrackedBody<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, end: BodyEnd, tracker: Tracker) -> Self {
        Self {
            inner,
            end,
            tracker: Some(tracker),
        }
    }

    fn finish(&mut self) {
        if let Some(tracker) = self.tracker.take() {
            match self.end {
                BodyEnd::Request => tracker.request_body_done(),
                BodyEnd::Response => tracker.response_done(),
            }
        }
    }
}

impl<B: Body + Unpin> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if ended {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for TrackedBody<B> {
    fn drop(&mut self) {
        self.finish();
    }
}
