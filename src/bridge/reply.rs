//! What eragate answers to one client message, independent of the client's
//! transport: one message now, or a stream of them ending with the response.
//!
//! The edge renders a [`Reply`]: HTTP as a status and a JSON body or an SSE
//! stream, stdio and HTTP+SSE as messages on the client's channel.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::handoff;
/// How the wait for a stream's first message ends ([`Responses::recv_first`]).
pub(crate) use super::handoff::First;
use super::sessions::ClientSession;
use crate::policy::held::Hold;
use crate::protocol::errors::{Rejection, handler_error_status};
use crate::protocol::jsonrpc::Outcome as ResponseOutcome;
use crate::protocol::{Era, Id, Message, Response};
use crate::router::UpstreamError;
use crate::telemetry::{Exchange, Outcome};

/// The answer to one client message.
pub(crate) enum Reply {
    /// A notification or response was taken: HTTP 202, nothing on stdio.
    Accepted,
    /// One message, now.
    Message(Status, Message),
    /// Refused before dispatch: the refusal decides the HTTP status and the error.
    Rejected(Option<Id>, Rejection),
    /// Messages as they come (notifications, relayed requests), ending with the
    /// response when there is one; the channel closes after it. The era is the
    /// client's: it decides the HTTP status of an error answered at once.
    Stream(Responses, Era),
    /// A legacy `initialize` answered: the client now has this session.
    Initialized(Message, Arc<ClientSession>),
    /// A 2026-07-28 client cancelled its request with this id: a transport that
    /// carries several calls on one connection (stdio) stops that call's answer,
    /// which cancels the upstream call; elsewhere it is taken like any notification.
    Cancelled(Id),
}

/// The messages of a streamed answer. When the request's telemetry record
/// rides along, the final response (or the stream's end without one) closes it:
/// no task and no extra channel hop per request.
pub(crate) struct Responses {
    messages: Source,
    exchange: Option<(Exchange, Era)>,
    /// The request's place in its principal's in-flight quota, given back with the response.
    in_flight: Option<Hold>,
    /// Reshapes each message as it is received (a federated or narrowed
    /// answer), instead of a relay task and channel per request.
    reshape: Option<Reshape>,
    /// Which (reshaped) messages the client may see; the others are skipped.
    keep: Option<Keep>,
    /// Ends the stream early once cancelled (dropping it then cancels the call
    /// behind it); the guard is kept as long as the stream.
    cancel: Option<Box<(CancellationToken, Box<dyn Send + Sync>)>>,
    /// What sends these messages (a call's pump), run by whoever receives
    /// them: a call costs no task of its own. (In a `Mutex` only to make the
    /// stream `Sync`: it is reached with `get_mut`, never locked.)
    producer: Option<Mutex<Producer>>,
}

/// The future that sends a stream's messages, driven by its receiver.
pub(crate) type Producer = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A change made to each message of a stream as it is received.
pub(crate) type Reshape = Box<dyn FnMut(Message) -> Message + Send + Sync>;

/// Whether a message of a stream reaches the client.
pub(crate) type Keep = Box<dyn Fn(&Message) -> bool + Send + Sync>;

impl Responses {
    /// The next message; `None` once the producer is done.
    pub(crate) async fn recv(&mut self) -> Option<Message> {
        loop {
            if let First::Message(message) = self.next(false).await {
                return message;
            }
        }
    }

    /// The first message (or the end), or [`First::Late`] when none came `within`.
    /// A call's pump tells lateness on the timer it keeps for the call's deadline;
    /// any other stream is timed here.
    pub(crate) async fn recv_first(&mut self, within: Duration) -> First {
        let pump_tells = match (&mut self.messages, &self.producer) {
            (Source::Handoff(messages), Some(_)) => messages.ask_first_by(Instant::now() + within),
            _ => false,
        };
        if pump_tells {
            return self.next(true).await;
        }
        match tokio::time::timeout(within, self.recv()).await {
            Ok(message) => First::Message(message),
            Err(_) => First::Late,
        }
    }

    /// The next message the client may see, or lateness when `hear_late` (asked before).
    async fn next(&mut self, hear_late: bool) -> First {
        loop {
            let Responses {
                messages,
                producer,
                cancel,
                ..
            } = self;
            let received = match cancel {
                None => next_message(messages, producer, hear_late).await,
                Some(cancel) => tokio::select! {
                    received = next_message(messages, producer, hear_late) => received,
                    () = cancel.0.cancelled() => First::Message(None),
                },
            };
            let First::Message(message) = received else {
                return First::Late;
            };
            let message = self.reshaped(message);
            if message.as_ref().is_some_and(|m| !self.kept(m)) {
                continue;
            }
            self.observe(message.as_ref());
            return First::Message(message);
        }
    }

    fn kept(&self, message: &Message) -> bool {
        self.keep.as_ref().is_none_or(|keep| keep(message))
    }

    /// These messages without those `keep` refuses (judged after every reshaping).
    pub(crate) fn filtered_by(mut self, keep: impl Fn(&Message) -> bool + Send + Sync + 'static) -> Responses {
        self.keep = Some(Box::new(keep));
        self
    }

    fn reshaped(&mut self, message: Option<Message>) -> Option<Message> {
        match (&mut self.reshape, message) {
            (Some(reshape), Some(message)) => Some(reshape(message)),
            (_, message) => message,
        }
    }

    /// These messages, each changed by `reshape` as it is received (after any
    /// change already asked for).
    pub(crate) fn reshaped_by(
        mut self,
        mut reshape: impl FnMut(Message) -> Message + Send + Sync + 'static,
    ) -> Responses {
        self.reshape = Some(match self.reshape.take() {
            None => Box::new(reshape),
            Some(mut first) => Box::new(move |message| reshape(first(message))),
        });
        self
    }

    /// These messages until `token` is cancelled; `guard` is dropped with them.
    pub(crate) fn cancelled_by(mut self, token: CancellationToken, guard: impl Send + Sync + 'static) -> Responses {
        self.cancel = Some(Box::new((token, Box::new(guard))));
        self
    }

    /// The next message to relay to `client`: `None` once the producer is
    /// done, or as soon as `client`'s receiver is gone (not at the next
    /// message, which a hanging call never sends): the relay then drops
    /// `self`, which cancels the call behind it.
    pub(crate) async fn recv_for(&mut self, client: &mpsc::Sender<Message>) -> Option<Message> {
        tokio::select! {
            message = self.recv() => message,
            () = client.closed() => None,
        }
    }

    /// A message already queued, without waiting.
    pub(crate) fn try_recv(&mut self) -> Result<Message, mpsc::error::TryRecvError> {
        let message = loop {
            let message = self.messages.try_recv().map(|message| match &mut self.reshape {
                Some(reshape) => reshape(message),
                None => message,
            });
            match message {
                Ok(m) if !self.kept(&m) => continue,
                message => break message,
            }
        };
        match &message {
            Ok(message) => self.observe(Some(message)),
            Err(mpsc::error::TryRecvError::Disconnected) => self.observe(None),
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        message
    }

    /// These messages, closing `exchange` with the response among them.
    fn watched(mut self, exchange: Exchange) -> Responses {
        let era = exchange.era();
        self.exchange = Some((exchange, era));
        self
    }

    /// These messages, holding the request's in-flight place until its response.
    pub(crate) fn holding(mut self, hold: Hold) -> Responses {
        self.in_flight = Some(hold);
        self
    }

    fn observe(&mut self, message: Option<&Message>) {
        if matches!(message, None | Some(Message::Response(_))) {
            self.in_flight = None;
        }
        match message {
            Some(Message::Response(response)) => {
                if let Some((exchange, era)) = self.exchange.take() {
                    let (outcome, status, code) = response_outcome(response, era);
                    exchange.finish(outcome, status, code);
                }
            }
            Some(_) => {}
            // Ended without a response: dropping the record counts it as cancelled.
            None => self.exchange = None,
        }
    }
}

impl Drop for Responses {
    fn drop(&mut self) {
        // Its receiver left before the producer ended: the producer runs on,
        // on its own, to see the receiver gone and end as it would (a call's
        // pump cancels the call upstream, as a client leaving asks).
        if let Some(producer) = self.producer.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(producer.into_inner().unwrap_or_else(PoisonError::into_inner));
        }
    }
}

impl From<mpsc::Receiver<Message>> for Responses {
    fn from(messages: mpsc::Receiver<Message>) -> Responses {
        Responses::from(Source::Channel(messages))
    }
}

impl From<Source> for Responses {
    fn from(messages: Source) -> Responses {
        Responses {
            messages,
            exchange: None,
            in_flight: None,
            reshape: None,
            keep: None,
            cancel: None,
            producer: None,
        }
    }
}

impl Responses {
    /// The messages `producer` sends on the channel `messages` receives from,
    /// `producer` driven as they are received.
    pub(crate) fn produced_by(messages: handoff::Receiver, producer: Producer) -> Responses {
        let mut responses = Responses::from(Source::Handoff(messages));
        responses.producer = Some(Mutex::new(producer));
        responses
    }
}

/// Where a stream's messages come from: a channel other tasks send on (a
/// session's GET stream, a relay), or the queue of the call pumped as they are
/// received.
enum Source {
    Channel(mpsc::Receiver<Message>),
    Handoff(handoff::Receiver),
}

impl Source {
    /// The next message or the end; with `hear_late`, also a late first message
    /// its pump reports.
    fn poll_next(&mut self, cx: &mut std::task::Context<'_>, hear_late: bool) -> std::task::Poll<First> {
        match self {
            Source::Channel(messages) => messages.poll_recv(cx).map(First::Message),
            Source::Handoff(messages) if hear_late => messages.poll_received(cx),
            Source::Handoff(messages) => messages.poll_recv(cx).map(First::Message),
        }
    }

    /// Before the receiver's own task drives the producer: see [`handoff::Receiver::forget_waker`].
    fn forget_waker(&mut self) {
        if let Source::Handoff(messages) = self {
            messages.forget_waker();
        }
    }

    fn try_recv(&mut self) -> Result<Message, mpsc::error::TryRecvError> {
        match self {
            Source::Channel(messages) => messages.try_recv(),
            Source::Handoff(messages) => messages.try_recv(),
        }
    }
}

/// The next message on `messages`, driving `producer` (until it ends) meanwhile.
async fn next_message(messages: &mut Source, producer: &mut Option<Mutex<Producer>>, hear_late: bool) -> First {
    if producer.is_none() {
        return std::future::poll_fn(|cx| messages.poll_next(cx, hear_late)).await;
    }
    std::future::poll_fn(|cx| {
        if let Some(running) = producer {
            messages.forget_waker();
            let running = running.get_mut().unwrap_or_else(PoisonError::into_inner);
            if running.as_mut().poll(cx).is_ready() {
                *producer = None;
            }
        }
        messages.poll_next(cx, hear_late)
    })
    .await
}

/// `reply`, with `exchange` closed now (one message) or when its stream ends.
pub(crate) fn observed(reply: Reply, mut exchange: Exchange) -> Reply {
    match reply {
        Reply::Accepted | Reply::Cancelled(_) => exchange.finish(Outcome::Accepted, 202, None),
        Reply::Message(Status::Overloaded, Message::Response(ref response)) => {
            exchange.finish(Outcome::Overloaded, 503, error_code(response));
        }
        Reply::Message(_, Message::Response(ref response)) => {
            let (outcome, status, code) = response_outcome(response, exchange.era());
            exchange.finish(outcome, status, code);
        }
        Reply::Message(..) => exchange.finish(Outcome::Ok, 200, None),
        Reply::Rejected(_, ref rejection) => {
            let code = rejection.error().map(|e| e.code.0);
            exchange.finish(Outcome::Rejected, rejection.status().as_u16(), code);
        }
        Reply::Initialized(_, ref session) => {
            exchange.negotiated(&session.id, session.revision);
            exchange.finish(Outcome::Ok, 200, None);
        }
        Reply::Stream(responses, era) => return Reply::Stream(responses.watched(exchange), era),
    }
    reply
}

fn response_outcome(response: &Response, era: Era) -> (Outcome, u16, Option<i64>) {
    match &response.outcome {
        ResponseOutcome::Result(_) => (Outcome::Ok, 200, None),
        ResponseOutcome::Error(error) => (
            Outcome::Error,
            handler_error_status(error.code, era).as_u16(),
            Some(error.code.0),
        ),
    }
}

fn error_code(response: &Response) -> Option<i64> {
    match &response.outcome {
        ResponseOutcome::Error(error) => Some(error.code.0),
        ResponseOutcome::Result(_) => None,
    }
}

/// How a one-message reply maps onto HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// 200: a result, or an error produced by a handler.
    Ok,
    /// 503 with `Retry-After`: the upstream is at capacity.
    Overloaded,
}

impl Reply {
    /// A result.
    pub(crate) fn result(id: Id, result: Value) -> Reply {
        Reply::Message(Status::Ok, Response::result(id, result).into_message())
    }

    /// A refusal before dispatch, answering the request `id` (if it was one).
    pub(crate) fn rejected(id: Option<Id>, rejection: Rejection) -> Reply {
        Reply::Rejected(id, rejection)
    }

    /// An upstream failure as the client's JSON-RPC error.
    pub(crate) fn upstream_failure(id: Option<Id>, error: &UpstreamError) -> Reply {
        if let UpstreamError::ShareExhausted { what, limit, .. } = error {
            return Reply::Rejected(id, Rejection::QuotaExceeded { what, limit: *limit });
        }
        let status = if error.is_overload() {
            Status::Overloaded
        } else {
            Status::Ok
        };
        Reply::Message(status, Response::error(id, error.to_error_object()).into_message())
    }
}

/// Writes a reply onto a message channel (stdio, or an HTTP+SSE stream), in the
/// background. Returns the task streaming a call, so that the caller can stop it
/// (which cancels a modern call).
pub(crate) fn forward_to(reply: Reply, out: mpsc::Sender<Message>) -> Option<tokio::task::JoinHandle<()>> {
    match reply {
        Reply::Accepted | Reply::Cancelled(_) => None,
        Reply::Message(_, message) | Reply::Initialized(message, _) => {
            tokio::spawn(async move {
                let _ = out.send(message).await;
            });
            None
        }
        Reply::Rejected(id, rejection) => {
            let message = rejection_message(id, &rejection);
            tokio::spawn(async move {
                let _ = out.send(message).await;
            });
            None
        }
        Reply::Stream(mut messages, _) => Some(tokio::spawn(async move {
            while let Some(message) = messages.recv().await {
                if out.send(message).await.is_err() {
                    return;
                }
            }
        })),
    }
}

/// The responses of a batch's replies, in order, for one JSON array answer.
/// Notifications streamed along the way have no place in a batch answer and are dropped.
pub(crate) async fn batch_responses(replies: Vec<Reply>) -> Vec<Message> {
    // Received together: each streamed reply drives its own call meanwhile.
    let answers = futures_util::future::join_all(replies.into_iter().map(final_response)).await;
    answers.into_iter().flatten().collect()
}

/// The response `reply` ends with (a stream driven to its end, its
/// notifications dropped), if it has one.
pub(crate) async fn final_response(reply: Reply) -> Option<Message> {
    match reply {
        Reply::Accepted | Reply::Cancelled(_) => None,
        Reply::Message(_, message) | Reply::Initialized(message, _) => Some(message),
        Reply::Rejected(id, rejection) => Some(rejection_message(id, &rejection)),
        Reply::Stream(mut rx, _) => {
            let mut response = None;
            while let Some(message) = rx.recv().await {
                if matches!(message, Message::Response(_)) {
                    response = Some(message);
                }
            }
            response
        }
    }
}

/// Relays what a session's upstream sends outside any request onto `out`.
pub(crate) fn forward_unsolicited(session: &Arc<ClientSession>, out: mpsc::Sender<Message>) {
    if let Ok(mut unsolicited) = session.attach_stream() {
        tokio::spawn(async move {
            while let Some(message) = unsolicited.recv().await {
                if out.send(message).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A refusal as the JSON-RPC error a message channel carries.
pub(crate) fn rejection_message(id: Option<Id>, rejection: &Rejection) -> Message {
    Response::error(id, rejection.in_band()).into_message()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Notification;
    use serde_json::json;

    fn updated(uri: &str) -> Message {
        Message::Notification(Notification {
            method: "notifications/resources/updated".into(),
            params: Some(json!({ "uri": uri }).into()),
        })
    }

    fn uri(message: &Message) -> Option<String> {
        match message {
            Message::Notification(n) => n.params.as_ref()?.get("uri")?.as_str().map(str::to_owned),
            _ => None,
        }
    }

    /// A stream's filter judges each message after every reshaping, skips what
    /// it refuses whichever way the stream is read, and lets the response end it.
    #[tokio::test]
    async fn a_filtered_stream_skips_what_its_filter_refuses() {
        let sent = ["a://1", "b://2", "b://3", "a://4"];
        let expected = ["x+a://1", "x+a://4"];
        for reading in ["recv", "try_recv"] {
            let (tx, rx) = mpsc::channel(8);
            for uri in sent {
                tx.send(updated(uri)).await.expect("queued");
            }
            tx.send(Response::result(Id::number(1), json!({})).into_message())
                .await
                .expect("queued");
            drop(tx);
            let mut responses = Responses::from(rx)
                .reshaped_by(|message| match message {
                    Message::Notification(mut n) => {
                        let prefixed = n
                            .params
                            .as_ref()
                            .and_then(|p| p.get("uri")?.as_str().map(|u| format!("x+{u}")));
                        n.params = prefixed.map(|u| json!({ "uri": u }).into());
                        Message::Notification(n)
                    }
                    other => other,
                })
                .filtered_by(|message| uri(message).is_none_or(|u| u.starts_with("x+a:")));
            let mut seen = Vec::new();
            loop {
                let message = match reading {
                    "recv" => responses.recv().await,
                    _ => responses.try_recv().ok(),
                };
                let Some(message) = message else { break };
                match (uri(&message), &message) {
                    (Some(u), _) => seen.push(u),
                    (None, Message::Response(_)) => seen.push("response".into()),
                    (None, other) => panic!("{reading}: {other:?}"),
                }
            }
            let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
            want.push("response".into());
            assert_eq!(seen, want, "{reading}");
        }
    }

    /// A pumped stream's first wait hears from the pump's own timer that nothing
    /// came in time, also when what did come is not the client's to see; and a
    /// first message in time is answered with.
    #[tokio::test]
    async fn a_pumped_streams_first_wait_ends_at_the_time_given() {
        for (skipped_first, answered) in [(false, false), (true, false), (false, true)] {
            let (tx, rx) = handoff::queue(8);
            let pumping = async move {
                let due = tx.first_due().expect("the receiver asked");
                if skipped_first {
                    let _ = tx.send(updated("hidden://1")).await;
                }
                if answered {
                    let _ = tx.send(Response::result(Id::number(1), json!({})).into_message()).await;
                    return;
                }
                tokio::time::sleep_until(due).await;
                tx.first_is_late();
                // The call goes on, long past the test.
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            };
            let mut responses = Responses::produced_by(rx, Box::pin(pumping))
                .filtered_by(|message| uri(message).is_none_or(|u| !u.starts_with("hidden:")));
            let first = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                responses.recv_first(std::time::Duration::from_millis(50)),
            )
            .await
            .expect("the first wait ended");
            match (answered, first) {
                (true, First::Message(Some(Message::Response(_)))) | (false, First::Late) => {}
                (_, First::Message(other)) => panic!("skipped {skipped_first}, answered {answered}: {other:?}"),
                (_, First::Late) => panic!("answered, yet late"),
            }
        }
    }
}
