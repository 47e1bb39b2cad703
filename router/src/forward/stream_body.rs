//! A client's request body passed to a shard as it arrives, never held
//! whole: the body the shard connection reads from counts the bytes and
//! cuts the request off past a cap (declared length or not), or when the
//! client pauses longer than the idle timeout between two pieces. What
//! became of it is shared with the request's handler through [`Progress`],
//! which tells a cut (the client's fault: 400 or 408) from a shard failure,
//! and when the body ended (the shard's response time counts from then).
//!
//! A body dropped unfinished without a cut (the shard answered early, say
//! a 400 for a bad form, or could not be reached) is read on and dropped in
//! the background, up to the cap and with the same idle timeout, so the
//! client, still sending, reads the answer rather than a reset connection
//! (a "lingering close").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

use crate::errors::BoxError;

/// Why a streamed body was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// More bytes than the route's cap.
    TooLarge,
    /// No byte for longer than the idle timeout.
    Idle,
    /// The client's connection failed mid-body.
    Unreadable,
}

#[derive(Debug, thiserror::Error)]
#[error("request body cut off: {0:?}")]
pub struct CutError(pub Cut);

/// What the handler learns about a body the shard connection is reading.
pub struct Progress {
    started: Instant,
    /// Ms after `started` of the last piece read (or of the start).
    last_ms: AtomicU64,
    cut: Mutex<Option<Cut>>,
    over: AtomicBool,
    notify: Notify,
}

impl Progress {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            last_ms: AtomicU64::new(0),
            cut: Mutex::new(None),
            over: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    /// Why the body was cut off, if it was.
    pub fn cut(&self) -> Option<Cut> {
        *self.cut.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the last piece of the body was read (or reading began).
    pub fn last_activity(&self) -> Instant {
        self.started + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// Whether the body is over: read to its end, cut off, or dropped.
    pub fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// Resolves once [`Progress::is_over`].
    pub async fn over(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_over() {
                return;
            }
            notified.await;
        }
    }

    fn touch(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn end(&self, cut: Option<Cut>) {
        if let Some(cut) = cut {
            self.cut
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(cut);
        }
        self.over.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// The body a shard receives: `inner`, at most `cap` bytes, with at most
/// `idle` between two pieces.
pub struct StreamedBody<B: Lingering> {
    /// Taken on drop when the body must be read on (see [`linger`]).
    inner: Option<B>,
    seen: u64,
    cap: u64,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    finished: bool,
    progress: Arc<Progress>,
}

/// What a streamed body must be to be read on after it was dropped.
pub trait Lingering: HttpBody<Data = Bytes> + Send + Unpin + 'static {}
impl<B: HttpBody<Data = Bytes> + Send + Unpin + 'static> Lingering for B {}

impl<B: Lingering> StreamedBody<B> {
    pub fn new(inner: B, cap: u64, idle: Duration) -> (Self, Arc<Progress>) {
        let progress = Arc::new(Progress::new());
        let body = Self {
            inner: Some(inner),
            seen: 0,
            cap,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            finished: false,
            progress: progress.clone(),
        };
        (body, progress)
    }

    fn cut(&mut self, cut: Cut) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.finished = true;
        self.progress.end(Some(cut));
        Poll::Ready(Some(Err(Box::new(CutError(cut)))))
    }
}

impl<B: Lingering> HttpBody for StreamedBody<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut().filter(|_| !this.finished) else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    if this.seen > this.cap {
                        return this.cut(Cut::TooLarge);
                    }
                }
                this.progress.touch();
                let next = Instant::now() + this.idle;
                this.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(_))) => this.cut(Cut::Unreadable),
            Poll::Ready(None) => {
                this.finished = true;
                this.progress.end(None);
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => this.cut(Cut::Idle),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.finished || self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

impl<B: Lingering> Drop for StreamedBody<B> {
    fn drop(&mut self) {
        self.progress.end(None);
        if self.finished {
            return;
        }
        let (Some(inner), Ok(runtime)) = (self.inner.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let left = self.cap.saturating_sub(self.seen);
        runtime.spawn(linger(inner, left, self.idle));
    }
}

/// Reads and drops the rest of an abandoned body: at most `left` bytes, at
/// most `idle` between two pieces; then stops (the connection closes).
async fn linger<B: Lingering>(mut body: B, mut left: u64, idle: Duration) {
    use http_body_util::BodyExt;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout(idle, body.frame()).await {
        let n = frame.data_ref().map_or(0, |d| d.len() as u64);
        if n > left {
            return;
        }
        left -= n;
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures::channel::mpsc;
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    type Chunks = StreamBody<mpsc::UnboundedReceiver<Result<Frame<Bytes>, Infallible>>>;

    fn chunks() -> (
        mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>,
        Chunks,
    ) {
        let (tx, rx) = mpsc::unbounded();
        (tx, StreamBody::new(rx))
    }

    fn piece(n: usize) -> Result<Frame<Bytes>, Infallible> {
        Ok(Frame::data(Bytes::from(vec![b'x'; n])))
    }

    /// Reads `body` to its end or first error; the bytes read and the cut.
    async fn drain<B: HttpBody<Data = Bytes, Error = BoxError> + Unpin>(
        mut body: B,
    ) -> (u64, Option<Cut>) {
        let mut read = 0;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => read += f.into_data().map_or(0, |d| d.len() as u64),
                Err(e) => return (read, e.downcast_ref::<CutError>().map(|c| c.0)),
            }
        }
        (read, None)
    }

    #[tokio::test]
    async fn a_body_within_its_cap_passes_whole_and_ends() {
        let (tx, inner) = chunks();
        for n in [3, 4, 3] {
            tx.unbounded_send(piece(n)).unwrap();
        }
        drop(tx);
        let (body, progress) = StreamedBody::new(inner, 10, Duration::from_secs(30));
        assert!(!progress.is_over());
        assert_eq!(drain(body).await, (10, None));
        assert!(progress.is_over());
        assert_eq!(progress.cut(), None);
        progress.over().await;
    }

    #[tokio::test]
    async fn past_the_cap_the_body_is_cut_off() {
        let (tx, inner) = chunks();
        for n in [6, 6, 6] {
            tx.unbounded_send(piece(n)).unwrap();
        }
        drop(tx);
        let (body, progress) = StreamedBody::new(inner, 10, Duration::from_secs(30));
        // The first piece passes; the one crossing the cap never reaches the shard.
        assert_eq!(drain(body).await, (6, Some(Cut::TooLarge)));
        assert_eq!(progress.cut(), Some(Cut::TooLarge));
        assert!(progress.is_over());
    }

    #[tokio::test]
    async fn a_pause_longer_than_the_idle_timeout_cuts_it_off() {
        let (tx, inner) = chunks();
        let (body, progress) = StreamedBody::new(inner, 1000, Duration::from_secs(2));
        let sender = tokio::spawn(async move {
            // Pieces well within the idle timeout of one another...
            for _ in 0..5 {
                tx.unbounded_send(piece(1)).unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // ...then silence, with the connection still open.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(tx);
        });
        assert_eq!(drain(body).await, (5, Some(Cut::Idle)));
        assert_eq!(progress.cut(), Some(Cut::Idle));
        sender.abort();
    }

    #[tokio::test]
    async fn a_dropped_body_is_over_without_a_cut() {
        let (_tx, inner) = chunks();
        let (body, progress) = StreamedBody::new(inner, 10, Duration::from_secs(30));
        let waiter = {
            let progress = progress.clone();
            tokio::spawn(async move { progress.over().await })
        };
        drop(body);
        waiter.await.unwrap();
        assert_eq!(progress.cut(), None);
    }

    #[tokio::test]
    async fn an_abandoned_body_is_read_on_up_to_its_cap() {
        let (tx, inner) = chunks();
        let (mut body, progress) = StreamedBody::new(inner, 10, Duration::from_secs(30));
        tx.unbounded_send(piece(4)).unwrap();
        assert!(body.frame().await.is_some());
        // The shard answered early: the body is dropped half read.
        drop(body);
        assert!(progress.is_over());
        assert_eq!(progress.cut(), None);
        // The rest the client sends is read and dropped (the channel stays
        // open while it is read) until the cap is passed.
        tx.unbounded_send(piece(6)).unwrap();
        tx.unbounded_send(piece(1)).unwrap();
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            while !tx.is_closed() {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(closed.is_ok(), "past the cap the body is let go");
    }

    #[tokio::test]
    async fn the_size_hint_is_the_inner_bodys() {
        let inner =
            http_body_util::Full::new(Bytes::from_static(b"abc")).map_err(|never| match never {});
        let (body, _) = StreamedBody::new(inner, 10, Duration::from_secs(30));
        assert_eq!(body.size_hint().exact(), Some(3));
    }
}
