//! Request bodies that say they have ended with their last frame, so that
//! a unary call goes out as HEADERS and one DATA frame carrying
//! END_STREAM, not HEADERS, DATA and an empty DATA frame to end it.
//!
//! Why. hyper's HTTP/2 client marks a DATA frame as the stream's last
//! only if the body reports `is_end_stream()` right after yielding it.
//! tonic's request body learns that it has ended only when it is polled
//! once more, so every call ended with a separate empty frame, which h2
//! wrote out on its own: `strace` of an idle controller at 320 switches
//! showed three `writev`s per register Read (34, 688 and 9 bytes), and
//! the kernel's loopback writes were about a fifth of its CPU. [`Ends`]
//! polls the body one frame ahead, so the end is known when the last
//! frame is handed out; the call then takes two writes.
//!
//! What a body sees: frames, their order and errors are passed on
//! unchanged, and nothing is read past an error or the end (it is past
//! trailers, which end a body anyway). A streaming body (the
//! StreamChannel) is polled a little earlier, so one more encoded chunk
//! may wait here while hyper waits for flow-control capacity, and
//! messages that tonic would have packed into one chunk may go out as
//! two.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::transport::Channel;

/// The channel every session's calls go through: requests' bodies wrapped
/// in [`Ends`].
pub(crate) type Transport = tower::util::MapRequest<Channel, fn(http::Request<Body>) -> http::Request<Body>>;

/// Wraps `channel` so that its requests' bodies know their end.
pub(crate) fn transport(channel: Channel) -> Transport {
    tower::util::MapRequest::new(channel, wrap as fn(http::Request<Body>) -> http::Request<Body>)
}

fn wrap(req: http::Request<Body>) -> http::Request<Body> {
    req.map(|b| Body::new(Ends::new(b)))
}

/// A body read one frame ahead (see the module text).
pub(crate) struct Ends<B: HttpBody> {
    inner: B,
    /// The frame (or error) read ahead, handed out at the next poll.
    ahead: Option<Result<Frame<B::Data>, B::Error>>,
    /// The inner body has ended, and nothing is left ahead.
    ended: bool,
}

impl<B: HttpBody> Ends<B> {
    pub(crate) fn new(inner: B) -> Self {
        Ends { inner, ahead: None, ended: false }
    }
}

// `ahead` is never pinned (it moves in and out through `&mut`), and
// `inner` is polled through `Pin::new`, which needs `B: Unpin`. Without
// this impl, `Ends<B>` would be `Unpin` only where `B::Error` is.
impl<B: HttpBody + Unpin> Unpin for Ends<B> {}

impl<B> HttpBody for Ends<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let me = self.get_mut();
        if me.ended {
            return Poll::Ready(None);
        }
        let out = match me.ahead.take() {
            Some(r) => r,
            None => match Pin::new(&mut me.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    me.ended = true;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(r)) => r,
            },
        };
        // An error ends what is handed out; nothing is read past it.
        if out.is_ok() {
            // Pending leaves the end open: the next poll reads on (the
            // inner body also holds this task's waker, an extra wake-up at
            // most).
            match Pin::new(&mut me.inner).poll_frame(cx) {
                Poll::Pending => {}
                Poll::Ready(None) => me.ended = true,
                Poll::Ready(Some(next)) => me.ahead = Some(next),
            }
        }
        Poll::Ready(Some(out))
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (self.ahead.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended {
            return SizeHint::with_exact(0);
        }
        let ahead = match &self.ahead {
            Some(Ok(f)) => f.data_ref().map_or(0, |d| d.len() as u64),
            _ => 0,
        };
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(ahead));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(ahead));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use tonic::Status;

    /// A body that yields a script of results, `Pending` where the script
    /// says so (waking itself, or keeping the waker for the test), and
    /// ends when the script does; `says_end`: its `is_end_stream()` is
    /// true once the script is used up.
    struct Script {
        steps: VecDeque<Option<Result<Frame<Bytes>, Status>>>,
        polls: usize,
        self_wake: bool,
        says_end: bool,
        parked: Option<std::task::Waker>,
    }

    impl HttpBody for Script {
        type Data = Bytes;
        type Error = Status;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            self.polls += 1;
            match self.steps.pop_front() {
                None => Poll::Ready(None),
                Some(None) => {
                    if self.self_wake {
                        cx.waker().wake_by_ref();
                    } else {
                        self.parked = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
                Some(Some(r)) => Poll::Ready(Some(r)),
            }
        }

        fn is_end_stream(&self) -> bool {
            self.says_end && self.steps.is_empty()
        }
    }

    fn data(s: &'static str) -> Option<Result<Frame<Bytes>, Status>> {
        Some(Ok(Frame::data(Bytes::from_static(s.as_bytes()))))
    }

    /// Polls `body` to its end: each output (None for Pending) with
    /// `is_end_stream()` right after it.
    fn drain(mut body: Ends<Script>) -> Vec<(Option<String>, bool)> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        for _ in 0..32 {
            let got = match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Pending => None,
                Poll::Ready(None) => {
                    out.push((Some("<end>".to_owned()), body.is_end_stream()));
                    return out;
                }
                Poll::Ready(Some(Ok(f))) => Some(match f.into_data() {
                    Ok(d) => String::from_utf8_lossy(&d).into_owned(),
                    Err(f) => format!("<trailers {}>", f.trailers_ref().map_or(0, |t| t.len())),
                }),
                Poll::Ready(Some(Err(e))) => Some(format!("<error {}>", e.message())),
            };
            out.push((got, body.is_end_stream()));
        }
        panic!("the body never ended: {out:?}");
    }

    fn script(steps: Vec<Option<Result<Frame<Bytes>, Status>>>) -> Ends<Script> {
        Ends::new(Script { steps: steps.into(), polls: 0, self_wake: true, says_end: false, parked: None })
    }

    /// Counts its wake-ups.
    struct Count(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_single_message_says_it_is_the_last() {
        let got = drain(script(vec![data("m")]));
        assert_eq!(got, vec![(Some("m".into()), true), (Some("<end>".into()), true)]);
    }

    #[test]
    fn frames_keep_their_order_and_only_the_last_is_marked() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x", http::HeaderValue::from_static("1"));
        let got = drain(script(vec![data("a"), data("b"), Some(Ok(Frame::trailers(trailers))), data("c")]));
        assert_eq!(
            got,
            vec![
                (Some("a".into()), false),
                (Some("b".into()), false),
                (Some("<trailers 1>".into()), false),
                (Some("c".into()), true),
                (Some("<end>".into()), true),
            ]
        );
    }

    #[test]
    fn a_pending_read_ahead_leaves_the_end_open_and_the_next_frame_comes_later() {
        // A stream: a message, then nothing yet, then another, then the end.
        let got = drain(script(vec![data("a"), None, data("b"), None, None]));
        assert_eq!(
            got,
            vec![
                (Some("a".into()), false),
                (Some("b".into()), false),
                (None, false),
                (Some("<end>".into()), true),
            ]
        );
    }

    #[test]
    fn an_error_read_ahead_comes_after_the_frame_before_it_and_nothing_is_read_past_it() {
        let mut body = script(vec![data("a"), Some(Err(Status::internal("boom"))), data("never")]);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let first = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(matches!(first, Poll::Ready(Some(Ok(_)))));
        assert!(!body.is_end_stream());
        let second = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(matches!(second, Poll::Ready(Some(Err(ref e))) if e.message() == "boom"));
        assert_eq!(
            body.inner.polls, 2,
            "the error was read ahead with the first frame, and nothing after it"
        );
    }

    #[test]
    fn the_size_counts_the_frame_read_ahead() {
        let mut body = script(vec![data("ab"), data("cde")]);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let _ = Pin::new(&mut body).poll_frame(&mut cx);
        assert_eq!(body.size_hint().lower(), 3, "\"cde\" is ahead");
        let _ = Pin::new(&mut body).poll_frame(&mut cx);
        assert_eq!(body.size_hint().exact(), Some(0));
    }

    #[test]
    fn after_the_end_the_inner_body_is_not_polled_again() {
        let mut body = script(vec![data("a")]);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(Pin::new(&mut body).poll_frame(&mut cx), Poll::Ready(Some(Ok(_)))));
        assert_eq!(body.inner.polls, 2, "the frame, and the end read ahead");
        for _ in 0..3 {
            assert!(matches!(Pin::new(&mut body).poll_frame(&mut cx), Poll::Ready(None)));
        }
        assert_eq!(body.inner.polls, 2);
    }

    #[test]
    fn before_the_first_poll_the_end_is_what_the_body_says() {
        let mut empty = script(vec![]);
        empty.inner.says_end = true;
        assert!(empty.is_end_stream(), "an empty body that says so is ended from the start");
        assert!(!script(vec![data("a")]).is_end_stream());
    }

    #[test]
    fn a_frame_read_ahead_keeps_the_end_open_though_the_body_is_used_up() {
        let mut body = script(vec![data("a"), data("b")]);
        body.inner.says_end = true;
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let _ = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(body.inner.is_end_stream(), "the script is used up: \"b\" is ahead");
        assert!(!body.is_end_stream(), "\"b\" is still to come");
    }

    #[test]
    fn an_error_first_comes_at_once_and_nothing_is_read_past_it() {
        let mut body = script(vec![Some(Err(Status::internal("first"))), data("never")]);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let got = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(matches!(got, Poll::Ready(Some(Err(ref e))) if e.message() == "first"));
        assert_eq!(body.inner.polls, 1);
        assert!(!body.is_end_stream());
    }

    #[test]
    fn a_read_ahead_that_waits_leaves_the_callers_waker_with_the_body() {
        let mut body = script(vec![data("a"), None, data("b")]);
        body.inner.self_wake = false;
        let count = std::sync::Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
        let waker = std::task::Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(Pin::new(&mut body).poll_frame(&mut cx), Poll::Ready(Some(Ok(_)))));
        let parked = body.inner.parked.take().expect("the read-ahead waited");
        parked.wake();
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1, "the caller's own waker");
    }

    /// Reads what an HTTP/2 client writes on `io` until stream 1 ends:
    /// each frame of stream 1 as (type, flags, payload length).
    async fn stream_one_frames(mut io: tokio::io::DuplexStream) -> std::io::Result<Vec<(u8, u8, usize)>> {
        use tokio::io::AsyncReadExt;
        let mut preface = [0u8; 24];
        io.read_exact(&mut preface).await?;
        let mut frames = Vec::new();
        loop {
            let mut head = [0u8; 9];
            io.read_exact(&mut head).await?;
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]);
            let mut payload = vec![0u8; len];
            io.read_exact(&mut payload).await?;
            if stream == 1 {
                frames.push((kind, flags, len));
                // END_STREAM (0x1) on DATA (0) or HEADERS (1).
                if kind <= 1 && flags & 0x1 != 0 {
                    return Ok(frames);
                }
            }
        }
    }

    /// The frames of one unary call (Capabilities) over `wrap(channel)`,
    /// to a peer that only listens.
    async fn unary_call_frames<S>(wrap: impl FnOnce(Channel) -> S) -> Vec<(u8, u8, usize)>
    where
        S: tonic::client::GrpcService<Body> + Send + 'static,
        S::Error: Into<tonic::codegen::StdError>,
        S::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
        <S::ResponseBody as HttpBody>::Error: Into<tonic::codegen::StdError> + Send,
        S::Future: Send,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = std::sync::Mutex::new(Some(tx));
        let connector = tower::service_fn(move |_: tonic::transport::Uri| {
            let (client, server) = tokio::io::duplex(1 << 16);
            if let Some(tx) = tx.lock().unwrap().take() {
                tokio::spawn(async move { tx.send(stream_one_frames(server).await) });
            }
            async move { Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(client)) }
        });
        let channel = tonic::transport::Endpoint::from_static("http://wire.invalid")
            .connect_with_connector_lazy(connector);
        let mut client = crate::proto::p4::v1::p4_runtime_client::P4RuntimeClient::new(wrap(channel));
        let call = tokio::spawn(async move {
            let _ = client.capabilities(crate::proto::p4::v1::CapabilitiesRequest { device_id: 1 }).await;
        });
        let frames = tokio::time::timeout(std::time::Duration::from_secs(10), rx)
            .await
            .expect("the call's frames within 10 s")
            .expect("the reader ran")
            .expect("the client wrote a whole stream");
        call.abort();
        frames
    }

    #[tokio::test]
    async fn on_the_wire_a_unary_call_ends_with_its_data_frame() {
        const HEADERS: u8 = 1;
        const DATA: u8 = 0;
        let wrapped = unary_call_frames(transport).await;
        assert_eq!(wrapped.len(), 2, "HEADERS, then one DATA frame: {wrapped:?}");
        assert_eq!((wrapped[0].0, wrapped[0].1 & 0x1), (HEADERS, 0));
        assert_eq!((wrapped[1].0, wrapped[1].1 & 0x1), (DATA, 1), "the DATA frame ends the stream");
        assert!(wrapped[1].2 > 0, "the message is in it");
        // Why the wrapper exists: tonic's body alone ends with an empty
        // DATA frame. If this changes, `Ends` can go.
        let bare = unary_call_frames(|c| c).await;
        assert_eq!(bare.last().map(|f| (f.0, f.1 & 0x1, f.2)), Some((DATA, 1, 0)), "{bare:?}");
    }
}
