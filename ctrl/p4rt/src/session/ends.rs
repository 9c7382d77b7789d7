//! Request bodies that say they have ended with their last frame, so that
//! a unary call goes out as HEADERS and one DATA frame carrying
//! END_STREAM, not HEADERS, DATA and an empty DATA frame to end it.
//!
//! Why. hyper's HTTP/2 client marks a DATA frame as the stream's last
//! only if the body reports `is_end_stream()` right after yielding it.
//! tonic's request body learns that it has ended only when it is polled
//! once more, so every call ended with a separate empty frame, sent at a
//! later turn of the connection task: `strace` of an idle controller at
//! 320 switches showed three `writev`s per register Read (34, 688 and 9
//! bytes), and the kernel's loopback writes were about a fifth of its
//! CPU. [`Ends`] polls the body one frame ahead, so the end is known
//! when the last frame is handed out; the call then takes two writes.
//! Frames, their order and errors are passed on unchanged; a streaming
//! body (the StreamChannel) only sees its next poll come a little
//! earlier.

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

// Nothing in `Ends` is ever pinned but `inner`, which is `Unpin` itself.
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
            // Pending registers this task's waker with the inner body, so
            // a frame that comes later still wakes the reader.
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
    /// says so (waking itself), and ends when the script does.
    struct Script {
        steps: VecDeque<Option<Result<Frame<Bytes>, Status>>>,
        polls: usize,
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
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(Some(r)) => Poll::Ready(Some(r)),
            }
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
        Ends::new(Script { steps: steps.into(), polls: 0 })
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
}
