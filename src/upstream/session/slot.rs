//! Where one call in flight meets the session routing its answer: a slot that
//! holds the response and a bounded queue of events before it, and wakes the
//! caller. Knows nothing of sessions, transports or ids.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use crate::protocol::{Notification, Request, Response};
use crate::upstream::error::UpstreamError;

/// What a caller receives while its request is in flight, besides the response.
#[derive(Debug)]
pub(crate) enum CallEvent {
    /// A notification tied to the request (progress with the caller's own token, log messages).
    Notification(Notification),
    /// A server→client request made while serving this request.
    ServerRequest(Request),
}

/// Bound of the per-request event queue; progress beyond it is dropped, never the response.
/// The queue grows on demand up to this bound (a call without events allocates none).
const CALL_EVENT_QUEUE: usize = 64;

/// What a call in flight shares with the session that routes its answer: one
/// allocation per call, in place of a oneshot and an event channel.
pub(crate) struct CallSlot {
    state: Mutex<SlotState>,
    /// Wakes the caller; a notification without a waiter is kept as a permit, so none is lost.
    wake: Notify,
}

#[derive(Default)]
struct SlotState {
    /// Events before the response, oldest first, at most [`CALL_EVENT_QUEUE`].
    events: VecDeque<CallEvent>,
    response: Option<Result<Response, UpstreamError>>,
    /// Nothing more will be settled: the response came, or the session let go of the call.
    settled: bool,
    /// The caller dropped its call: events have nobody to go to.
    detached: bool,
}

/// What the caller finds in its slot.
pub(crate) enum Taken {
    Event(CallEvent),
    Done(Result<Response, UpstreamError>),
    Abandoned,
}

impl CallSlot {
    pub(crate) fn new() -> Arc<CallSlot> {
        Arc::new(CallSlot {
            state: Mutex::new(SlotState::default()),
            wake: Notify::new(),
        })
    }

    /// The response, or the reason there is none; only the first settlement counts.
    pub(crate) fn settle(&self, result: Result<Response, UpstreamError>) {
        {
            let mut state = self.lock();
            if state.settled {
                return;
            }
            state.settled = true;
            state.response = Some(result);
        }
        self.wake.notify_one();
    }

    /// The session let go of the call without an answer.
    pub(crate) fn abandon(&self) {
        {
            let mut state = self.lock();
            if state.settled {
                return;
            }
            state.settled = true;
        }
        self.wake.notify_one();
    }

    /// Queues an event; gives it back when the caller is gone or the queue is full.
    pub(crate) fn push_event(&self, event: CallEvent) -> Result<(), CallEvent> {
        {
            let mut state = self.lock();
            if state.detached || state.events.len() >= CALL_EVENT_QUEUE {
                return Err(event);
            }
            state.events.push_back(event);
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Events first (in order), then the response.
    pub(crate) fn take(&self, skip_events: bool) -> Option<Taken> {
        let mut state = self.lock();
        if skip_events {
            state.events = VecDeque::new();
        } else if let Some(event) = state.events.pop_front() {
            return Some(Taken::Event(event));
        }
        if let Some(result) = state.response.take() {
            return Some(Taken::Done(result));
        }
        state.settled.then_some(Taken::Abandoned)
    }

    /// Waits until something was pushed or settled since the last wake. A
    /// wait dropped after its wake passes the wake on, to the next wait.
    pub(crate) fn woken(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// The caller is gone: drop queued events and refuse new ones.
    pub(crate) fn detach(&self) {
        let mut state = self.lock();
        state.detached = true;
        state.events = VecDeque::new();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        // A poisoned lock only means another thread panicked mid-update; the state is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::Id;

    fn progress(n: u64) -> CallEvent {
        CallEvent::Notification(Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progress": n}).into()),
        })
    }

    fn server_request() -> CallEvent {
        CallEvent::ServerRequest(Request {
            id: Id::number(9),
            method: "sampling/createMessage".into(),
            params: None,
        })
    }

    #[test]
    fn a_call_slot_gives_events_in_order_then_the_response() {
        let slot = CallSlot::new();
        assert!(slot.take(false).is_none());
        assert!(slot.push_event(progress(1)).is_ok());
        slot.settle(Ok(Response::result(Id::number(1), json!({}))));
        assert!(slot.push_event(progress(2)).is_ok());
        assert!(
            matches!(slot.take(false), Some(Taken::Event(CallEvent::Notification(n))) if n.params.as_deref() == Some(&json!({"progress": 1})))
        );
        assert!(
            matches!(slot.take(false), Some(Taken::Event(CallEvent::Notification(n))) if n.params.as_deref() == Some(&json!({"progress": 2})))
        );
        assert!(matches!(slot.take(false), Some(Taken::Done(Ok(_)))));
        // A second settlement (a pending entry dropped after answering) changes nothing.
        slot.abandon();
        assert!(slot.lock().response.is_none());
    }

    #[test]
    fn a_call_slot_is_bounded_and_refuses_events_once_detached() {
        let slot = CallSlot::new();
        assert_eq!(slot.lock().events.capacity(), 0, "no queue before the first event");
        for n in 0..CALL_EVENT_QUEUE as u64 {
            assert!(slot.push_event(progress(n)).is_ok());
        }
        assert!(matches!(
            slot.push_event(server_request()),
            Err(CallEvent::ServerRequest(_))
        ));
        slot.settle(Ok(Response::result(Id::number(1), json!({}))));
        // Waiting for the response only skips the events.
        assert!(matches!(slot.take(true), Some(Taken::Done(Ok(_)))));
        let slot = CallSlot::new();
        slot.detach();
        assert!(matches!(
            slot.push_event(server_request()),
            Err(CallEvent::ServerRequest(_))
        ));
    }

    #[test]
    fn an_abandoned_call_slot_ends_the_wait() {
        let slot = CallSlot::new();
        slot.abandon();
        assert!(matches!(slot.take(false), Some(Taken::Abandoned)));
        slot.settle(Ok(Response::result(Id::number(1), json!({}))));
        assert!(
            matches!(slot.take(false), Some(Taken::Abandoned)),
            "nothing settles an abandoned call"
        );
    }

    #[tokio::test]
    async fn a_waiting_caller_is_woken_by_an_event_and_by_the_response() {
        let slot = CallSlot::new();
        let producer = slot.clone();
        let task = tokio::spawn(async move {
            tokio::task::yield_now().await;
            let _ = producer.push_event(progress(1));
            tokio::task::yield_now().await;
            producer.settle(Ok(Response::result(Id::number(1), json!({}))));
        });
        let mut seen = Vec::new();
        loop {
            match slot.take(false) {
                Some(Taken::Event(_)) => seen.push("event"),
                Some(Taken::Done(_)) => {
                    seen.push("done");
                    break;
                }
                Some(Taken::Abandoned) => panic!("abandoned"),
                None => slot.woken().await,
            }
        }
        assert_eq!(seen, ["event", "done"]);
        task.await.expect("producer");
    }
}
