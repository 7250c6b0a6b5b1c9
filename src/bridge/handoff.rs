//! The bounded queue from a call's pump to the answer that drives it.
//!
//! A call's pump is polled by whoever receives its messages (see
//! [`super::reply::Responses::produced_by`]), and most calls send it one
//! message, the response, so this queue (behind a mutex nobody else takes)
//! holds its first message in place: one small allocation, where tokio's mpsc
//! channel makes cache-padded state and a 32-slot block. It keeps the channel's
//! promises that the pump relies on: at most `bound` messages wait, a sender
//! waits for room, a send after the receiver left fails, [`Sender::closed`]
//! resolves when the receiver leaves, and the receiver sees every message sent
//! before the last sender went.
//!
//! It also carries one question the other way: a receiver that wants to know
//! when a first message is late ([`Receiver::ask_first_by`]) asks the pump, which
//! answers on the timer it keeps for the call's deadline ([`Sender::first_is_late`]),
//! so that a call costs one timer, not two.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use tokio::sync::mpsc::error::TryRecvError;
use tokio::time::Instant;

use crate::protocol::Message;

/// A queue of at most `bound` messages (at least one).
pub(crate) fn queue(bound: usize) -> (Sender, Receiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            first: None,
            rest: VecDeque::new(),
            bound: bound.max(1),
            senders: 1,
            receiver_alive: true,
            receiver_waker: None,
            waiting_for_room: Wakers::default(),
            waiting_for_leave: Wakers::default(),
            first_due: FirstDue::Unasked,
        }),
    });
    (
        Sender {
            shared: Arc::clone(&shared),
        },
        Receiver { shared },
    )
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the queue as it was: go on with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct State {
    /// The oldest message, kept in place: most calls send one.
    first: Option<Message>,
    /// The messages after it.
    rest: VecDeque<Message>,
    bound: usize,
    /// Senders alive; the receiver sees the end once none is and the queue is empty.
    senders: usize,
    receiver_alive: bool,
    /// The receiver waiting for a message.
    receiver_waker: Option<Waker>,
    /// Senders waiting for room, woken when a message is taken.
    waiting_for_room: Wakers,
    /// Senders waiting for the receiver to leave ([`Sender::closed`]), woken
    /// only then: the pump waits so all along, in the task that takes its
    /// messages, and a wake per message taken would poll that task once more.
    waiting_for_leave: Wakers,
    /// Whether the receiver hears of a late first message.
    first_due: FirstDue,
}

/// The receiver's question "tell me if no message came by then", and its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FirstDue {
    /// Not asked, and the sender has not looked: the receiver may still ask.
    Unasked,
    /// Asked for this time; the sender has not looked yet.
    Asked(Instant),
    /// The sender looked and found the question: it reports lateness.
    Watched,
    /// The sender reported the first message late; the receiver has not heard it yet.
    Late,
    /// Nothing is left to tell: the sender looked before any question, or the
    /// receiver heard the lateness.
    Settled,
}

/// What a receiver waiting for its first message gets.
pub(crate) enum First {
    /// A message, or `None` at the end (every sender gone, the queue empty).
    Message(Option<Message>),
    /// Nothing came by the time the receiver asked about.
    Late,
}

impl State {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn push(&mut self, message: Message) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(message);
        } else {
            self.rest.push_back(message);
        }
    }

    fn pop(&mut self) -> Option<Message> {
        self.first.take().or_else(|| self.rest.pop_front())
    }
}

/// Tasks waiting for one thing, each kept once (a waker that would wake the
/// same task is not kept twice). The pump and the stages it awaits are one
/// task, so the second place is seldom used.
#[derive(Default)]
struct Wakers {
    first: Option<Waker>,
    more: Vec<Waker>,
}

impl Wakers {
    fn wait(&mut self, waker: &Waker) {
        match &self.first {
            None => self.first = Some(waker.clone()),
            Some(kept) if kept.will_wake(waker) => {}
            Some(_) => {
                if !self.more.iter().any(|w| w.will_wake(waker)) {
                    self.more.push(waker.clone());
                }
            }
        }
    }

    fn wake_all(&mut self) {
        if let Some(waker) = self.first.take() {
            waker.wake();
        }
        for waker in self.more.drain(..) {
            waker.wake();
        }
    }
}

/// The sending side (cloned for a stage that sends on the pump's behalf).
pub(crate) struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// Queues `message`, waiting while the queue is full; `Err` with the message
    /// when the receiver has left.
    pub(crate) async fn send(&self, message: Message) -> Result<(), Message> {
        let mut message = Some(message);
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            let Some(taken) = message.take() else {
                return Poll::Ready(Ok(()));
            };
            if !state.receiver_alive {
                return Poll::Ready(Err(taken));
            }
            if state.len() >= state.bound {
                message = Some(taken);
                state.waiting_for_room.wait(cx.waker());
                return Poll::Pending;
            }
            state.push(taken);
            if let Some(waker) = state.receiver_waker.take() {
                waker.wake();
            }
            Poll::Ready(Ok(()))
        })
        .await
    }

    /// When the receiver wants to hear that no message came ([`Receiver::ask_first_by`]),
    /// if it asked; read once, at the pump's start: a question asked later is refused.
    pub(crate) fn first_due(&self) -> Option<Instant> {
        let mut state = self.shared.lock();
        let due = match state.first_due {
            FirstDue::Asked(at) => Some(at),
            _ => None,
        };
        state.first_due = if due.is_some() {
            FirstDue::Watched
        } else {
            FirstDue::Settled
        };
        due
    }

    /// Tells the receiver that its first message is late (it then answers with a
    /// stream). Nothing when it did not ask.
    pub(crate) fn first_is_late(&self) {
        let mut state = self.shared.lock();
        if state.first_due == FirstDue::Watched {
            state.first_due = FirstDue::Late;
            if let Some(waker) = state.receiver_waker.take() {
                waker.wake();
            }
        }
    }

    /// Resolves once the receiver has left.
    pub(crate) async fn closed(&self) {
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            if state.receiver_alive {
                state.waiting_for_leave.wait(cx.waker());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
    }
}

impl Clone for Sender {
    fn clone(&self) -> Sender {
        self.shared.lock().senders += 1;
        Sender {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.senders -= 1;
        if state.senders > 0 {
            return;
        }
        // No sender is left to wake: a waker kept from one would, when the
        // receiver leaves, poll a task (often the receiver's own) for nothing.
        state.waiting_for_room = Wakers::default();
        state.waiting_for_leave = Wakers::default();
        if let Some(waker) = state.receiver_waker.take() {
            waker.wake();
        }
    }
}

/// The receiving side.
pub(crate) struct Receiver {
    shared: Arc<Shared>,
}

impl Receiver {
    /// The next message, `None` once every sender has gone and the queue is empty.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.poll_inner(cx, false).map(|received| match received {
            First::Message(message) => message,
            // Never: lateness is told only to `poll_received`.
            First::Late => None,
        })
    }

    /// Asks the sender to report when no message came by `at` ([`First::Late`]
    /// from [`Receiver::poll_received`]). False when the sender has started already
    /// and will not: the receiver keeps a timer of its own then.
    pub(crate) fn ask_first_by(&mut self, at: Instant) -> bool {
        let mut state = self.shared.lock();
        if state.first_due == FirstDue::Unasked {
            state.first_due = FirstDue::Asked(at);
            true
        } else {
            false
        }
    }

    /// The next message, the end, or (once, when no message is queued) that the
    /// first message is late.
    pub(crate) fn poll_received(&mut self, cx: &mut Context<'_>) -> Poll<First> {
        self.poll_inner(cx, true)
    }

    fn poll_inner(&mut self, cx: &mut Context<'_>, hear_late: bool) -> Poll<First> {
        let mut state = self.shared.lock();
        match state.pop() {
            Some(message) => {
                // Lateness stays to be told: a receiver that skips this message
                // (not the client's to see) is still waiting for its first one.
                state.waiting_for_room.wake_all();
                Poll::Ready(First::Message(Some(message)))
            }
            None if state.senders == 0 => Poll::Ready(First::Message(None)),
            None if hear_late && state.first_due == FirstDue::Late => {
                state.first_due = FirstDue::Settled;
                Poll::Ready(First::Late)
            }
            None => {
                state.receiver_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Forgets the waker of the last wait. Its task calls this before it drives
    /// the sender itself (a call's pump): what the pump sends is then found by
    /// the wait that follows, where a kept waker would wake the task it runs in
    /// to poll it once more for nothing.
    pub(crate) fn forget_waker(&mut self) {
        self.shared.lock().receiver_waker = None;
    }

    /// A message already queued, without waiting.
    pub(crate) fn try_recv(&mut self) -> Result<Message, TryRecvError> {
        let mut state = self.shared.lock();
        match state.pop() {
            Some(message) => {
                state.waiting_for_room.wake_all();
                Ok(message)
            }
            None if state.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.receiver_alive = false;
        state.receiver_waker = None;
        let unread = (state.first.take(), std::mem::take(&mut state.rest));
        state.waiting_for_room.wake_all();
        state.waiting_for_leave.wake_all();
        drop(state);
        drop(unread);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Id, Response};
    use serde_json::json;
    use std::time::Duration;

    fn message(n: u64) -> Message {
        Response::result(Id::number(n), json!({})).into_message()
    }

    fn id_of(message: &Message) -> Option<Id> {
        match message {
            Message::Response(response) => response.id.clone(),
            _ => None,
        }
    }

    async fn recv(receiver: &mut Receiver) -> Option<Message> {
        poll_fn(|cx| receiver.poll_recv(cx)).await
    }

    #[tokio::test]
    async fn messages_arrive_in_order_then_the_end() {
        let (sender, mut receiver) = queue(4);
        let second = sender.clone();
        sender.send(message(1)).await.unwrap();
        second.send(message(2)).await.unwrap();
        assert!(matches!(receiver.try_recv(), Ok(m) if id_of(&m) == Some(Id::number(1))));
        drop(sender);
        // One sender is left: the queue is empty, not ended.
        assert!(matches!(receiver.try_recv(), Ok(m) if id_of(&m) == Some(Id::number(2))));
        assert!(matches!(receiver.try_recv(), Err(TryRecvError::Empty)));
        second.send(message(3)).await.unwrap();
        drop(second);
        // What was sent before the last sender went is still received.
        assert_eq!(recv(&mut receiver).await.as_ref().and_then(id_of), Some(Id::number(3)));
        assert!(recv(&mut receiver).await.is_none());
        assert!(matches!(receiver.try_recv(), Err(TryRecvError::Disconnected)));
    }

    #[tokio::test]
    async fn order_holds_when_sends_and_receives_interleave() {
        let (sender, mut receiver) = queue(8);
        let mut received = Vec::new();
        for (sends, receives) in [(2, 1), (1, 1), (3, 2), (0, 2)] {
            for _ in 0..sends {
                // Ids count up in the order sent.
                let next = received.len() as u64 + receiver.shared.lock().len() as u64;
                sender.send(message(next)).await.unwrap();
            }
            for _ in 0..receives {
                received.push(receiver.try_recv().ok().as_ref().and_then(id_of));
            }
        }
        assert_eq!(received, (0..6).map(|n| Some(Id::number(n))).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_full_queue_makes_the_sender_wait_until_a_message_is_taken() {
        let (sender, mut receiver) = queue(2);
        let sending = tokio::spawn(async move {
            for n in 0..5 {
                sender.send(message(n)).await.unwrap();
            }
        });
        let mut received = Vec::new();
        while let Some(message) = recv(&mut receiver).await {
            // Never more than the bound waits.
            assert!(receiver.shared.lock().len() <= 2);
            received.push(id_of(&message));
            tokio::task::yield_now().await;
        }
        sending.await.unwrap();
        assert_eq!(received, (0..5).map(|n| Some(Id::number(n))).collect::<Vec<_>>());
    }

    fn poll_now(receiver: &mut Receiver) -> Poll<First> {
        receiver.poll_received(&mut Context::from_waker(Waker::noop()))
    }

    #[tokio::test]
    async fn a_receiver_that_asked_hears_once_that_its_first_message_is_late() {
        let (sender, mut receiver) = queue(4);
        let due = Instant::now() + Duration::from_secs(2);
        assert!(receiver.ask_first_by(due));
        assert_eq!(sender.first_due(), Some(due));
        assert!(poll_now(&mut receiver).is_pending());
        sender.first_is_late();
        assert!(matches!(poll_now(&mut receiver), Poll::Ready(First::Late)));
        // Told once; the stream goes on with the messages.
        assert!(poll_now(&mut receiver).is_pending());
        sender.send(message(1)).await.unwrap();
        assert!(
            matches!(poll_now(&mut receiver), Poll::Ready(First::Message(Some(m))) if id_of(&m) == Some(Id::number(1)))
        );
        drop(sender);
        assert!(matches!(poll_now(&mut receiver), Poll::Ready(First::Message(None))));
    }

    #[tokio::test]
    async fn a_message_queued_before_the_lateness_comes_first() {
        let (sender, mut receiver) = queue(4);
        assert!(receiver.ask_first_by(Instant::now()));
        assert!(sender.first_due().is_some());
        sender.send(message(1)).await.unwrap();
        sender.first_is_late();
        assert!(matches!(poll_now(&mut receiver), Poll::Ready(First::Message(Some(_)))));
        // A receiver that skipped that message (one its client may not see) still hears
        // of the lateness; one that answered with it reads on with `poll_recv`.
        assert!(matches!(poll_now(&mut receiver), Poll::Ready(First::Late)));
        assert!(poll_now(&mut receiver).is_pending());
    }

    #[tokio::test]
    async fn a_question_after_the_sender_looked_is_refused_and_never_answered() {
        let (sender, mut receiver) = queue(4);
        assert_eq!(sender.first_due(), None);
        assert!(
            !receiver.ask_first_by(Instant::now()),
            "the receiver must keep its own timer"
        );
        sender.first_is_late();
        assert!(poll_now(&mut receiver).is_pending());
    }

    #[tokio::test]
    async fn a_receiver_reading_messages_only_never_sees_lateness() {
        let (sender, mut receiver) = queue(4);
        assert!(receiver.ask_first_by(Instant::now()));
        assert!(sender.first_due().is_some());
        sender.first_is_late();
        assert!(receiver.poll_recv(&mut Context::from_waker(Waker::noop())).is_pending());
        // It is still there for the receiver that listens for it.
        assert!(matches!(poll_now(&mut receiver), Poll::Ready(First::Late)));
    }

    /// A waker that counts its wakes.
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn counting_waker() -> (Arc<Wakes>, Waker) {
        let wakes = Arc::new(Wakes(0.into()));
        (Arc::clone(&wakes), Waker::from(wakes))
    }

    fn woken(wakes: &Wakes) -> usize {
        wakes.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The pump and the receiver share one task: every wake below would poll it
    /// once more for nothing, so none may happen.
    #[tokio::test]
    async fn a_task_that_both_sends_and_receives_is_never_woken_by_itself() {
        let (sender, mut receiver) = queue(4);
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        // The pump waits for the receiver to leave all along; the receiver waits for a message.
        let mut closed = Box::pin(sender.closed());
        assert!(closed.as_mut().poll(&mut cx).is_pending());
        assert!(receiver.poll_recv(&mut cx).is_pending());
        // The task drives the pump: it forgets its waker first, so the send does not wake it.
        receiver.forget_waker();
        sender.send(message(1)).await.unwrap();
        // Taking the message wakes senders waiting for room, not one waiting for the end.
        assert!(matches!(receiver.poll_recv(&mut cx), Poll::Ready(Some(_))));
        assert!(closed.as_mut().poll(&mut cx).is_pending());
        assert_eq!(woken(&wakes), 0);
        // The pump ends: the receiver, waiting again, hears the end.
        assert!(receiver.poll_recv(&mut cx).is_pending());
        receiver.forget_waker();
        drop(closed);
        drop(sender);
        assert!(matches!(receiver.poll_recv(&mut cx), Poll::Ready(None)));
        // The receiver leaving wakes no sender that is gone.
        drop(receiver);
        assert_eq!(woken(&wakes), 0);
    }

    #[tokio::test]
    async fn a_taken_message_wakes_a_sender_waiting_for_room() {
        let (sender, mut receiver) = queue(1);
        sender.send(message(1)).await.unwrap();
        let (wakes, waker) = counting_waker();
        let mut sending = std::pin::pin!(sender.send(message(2)));
        assert!(sending.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert!(receiver.try_recv().is_ok());
        assert_eq!(woken(&wakes), 1);
        assert!(matches!(
            sending.poll(&mut Context::from_waker(&waker)),
            Poll::Ready(Ok(()))
        ));
    }

    #[tokio::test]
    async fn the_receiver_leaving_ends_a_waiting_send_and_wakes_closed() {
        let (sender, receiver) = queue(1);
        sender.send(message(1)).await.unwrap();
        let sender = Arc::new(sender);
        let waiting = {
            let sender = Arc::clone(&sender);
            tokio::spawn(async move { sender.send(message(2)).await.is_err() })
        };
        let closed = {
            let sender = Arc::clone(&sender);
            tokio::spawn(async move { sender.closed().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished() && !closed.is_finished());
        drop(receiver);
        assert!(waiting.await.unwrap(), "a send after the receiver left fails");
        closed.await.unwrap();
        assert!(sender.send(message(3)).await.is_err());
    }
}
