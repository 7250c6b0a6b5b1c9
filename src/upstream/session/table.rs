//! The table of one session's requests in flight, by upstream id: fresh ids
//! (and the `progressToken` rewrite that goes with them), and handing each
//! response or event to its call's slot with the caller's own ids restored.
//! It decides nothing about where a message goes: the session asks it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use super::slot::{CallEvent, CallSlot};
use crate::fast_hash::FastMap;
use crate::protocol::{Id, LazyJson, Notification, Response};
use crate::translate::multiplex::{restore_progress_token, retag_subscription, rewrite_progress_token};
use crate::upstream::error::UpstreamError;

/// One session's requests in flight.
pub(crate) struct CallTable {
    next_id: AtomicU64,
    /// A std mutex: held only to insert, look up or remove an entry, never across `.await`.
    /// Keyed by eragate's own ids: [`FastMap`].
    pending: Mutex<FastMap<u64, Pending>>,
}

/// One request in flight: where its answer goes, and the caller's own ids.
struct Pending {
    slot: Arc<CallSlot>,
    original_id: Id,
    original_progress_token: Option<Value>,
}

/// What became of an event handed to a call.
pub(crate) enum Delivery {
    /// Queued for the caller.
    Delivered,
    /// The call is in flight but takes no more events (its caller is gone, or its queue is full).
    Refused(CallEvent),
    /// No such request in flight.
    NotInFlight(CallEvent),
}

impl CallTable {
    /// An empty table whose first request gets `first_id`.
    pub(crate) fn new(first_id: u64) -> CallTable {
        CallTable {
            next_id: AtomicU64::new(first_id),
            pending: Mutex::new(FastMap::default()),
        }
    }

    /// Enters a request: a fresh upstream id (which also becomes its
    /// `progressToken`, if it has one) and the slot its answer will reach.
    pub(crate) fn open(&self, params: &mut Option<LazyJson>, original_id: Id) -> (u64, Arc<CallSlot>) {
        let upstream_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let original_progress_token = rewrite_progress_token(params, upstream_id);
        let slot = CallSlot::new();
        let pending = Pending {
            slot: slot.clone(),
            original_id,
            original_progress_token,
        };
        self.lock().insert(upstream_id, pending);
        (upstream_id, slot)
    }

    /// Settles a request with its response, under the caller's id; `false`
    /// when it is no longer in flight (finished or cancelled).
    pub(crate) fn answer(&self, upstream_id: u64, mut response: Response) -> bool {
        let Some(mut pending) = self.lock().remove(&upstream_id) else {
            return false;
        };
        response.id = Some(std::mem::replace(&mut pending.original_id, Id::number(0)));
        pending.slot.settle(Ok(response));
        true
    }

    /// Fails one request, if it is still in flight.
    pub(crate) fn fail(&self, upstream_id: u64, error: UpstreamError) {
        // Removed under the lock, settled outside it.
        let pending = self.lock().remove(&upstream_id);
        if let Some(pending) = pending {
            pending.slot.settle(Err(error));
        }
    }

    /// Fails every request in flight with `error()`.
    pub(crate) fn fail_all(&self, error: impl Fn() -> UpstreamError) {
        let drained: Vec<Pending> = self.lock().drain().map(|(_, p)| p).collect();
        for pending in drained {
            pending.slot.settle(Err(error()));
        }
    }

    /// Hands progress to the request whose upstream id is its token, with the
    /// caller's own token; dropped when that request is not in flight.
    pub(crate) fn deliver_progress(&self, token: u64, mut notification: Notification) {
        let pending = self.lock();
        let Some(entry) = pending.get(&token) else {
            return; // progress for nothing in flight: nobody asked
        };
        if let Some(original) = &entry.original_progress_token {
            restore_progress_token(&mut notification, original);
        }
        let _ = entry.slot.push_event(CallEvent::Notification(notification));
    }

    /// Hands a listen's notification to that listen, tagged with the id its
    /// caller gave; given back when the listen is not in flight.
    pub(crate) fn deliver_to_listen(&self, listen: u64, mut notification: Notification) -> Result<(), Notification> {
        let pending = self.lock();
        let Some(entry) = pending.get(&listen) else {
            return Err(notification);
        };
        retag_subscription(&mut notification, entry.original_id.to_value());
        let _ = entry.slot.push_event(CallEvent::Notification(notification));
        Ok(())
    }

    /// Hands `event` to the request `upstream_id`, when there is one.
    pub(crate) fn deliver(&self, upstream_id: Option<u64>, event: CallEvent) -> Delivery {
        let pending = self.lock();
        match upstream_id.and_then(|id| pending.get(&id)) {
            Some(entry) => match entry.slot.push_event(event) {
                Ok(()) => Delivery::Delivered,
                Err(event) => Delivery::Refused(event),
            },
            None => Delivery::NotInFlight(event),
        }
    }

    /// The request in flight, if there is exactly one.
    pub(crate) fn sole(&self) -> Option<u64> {
        let pending = self.lock();
        if pending.len() == 1 {
            pending.keys().next().copied()
        } else {
            None
        }
    }

    /// Whether a request is still awaiting its response.
    pub(crate) fn contains(&self, upstream_id: u64) -> bool {
        self.lock().contains_key(&upstream_id)
    }

    /// Requests awaiting their response.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, FastMap<u64, Pending>> {
        // A poisoned lock only means another thread panicked mid-insert; the map is still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Dropped without an answer (the session itself went away): its caller must not wait forever.
        self.slot.abandon();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::envelope::SUBSCRIPTION_ID;
    use crate::upstream::session::slot::Taken;

    fn progress(token: u64) -> Notification {
        Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progressToken": token, "progress": 1}).into()),
        }
    }

    #[test]
    fn answers_and_progress_reach_their_caller_under_its_own_ids() {
        let table = CallTable::new(40);
        let mut params = Some(LazyJson::from(json!({"_meta": {"progressToken": "mine"}})));
        let (upstream_id, slot) = table.open(&mut params, Id::from_value(&json!("client-1")).expect("id"));
        assert_eq!(upstream_id, 40);
        assert_eq!(params.as_deref(), Some(&json!({"_meta": {"progressToken": 40}})));
        table.deliver_progress(upstream_id, progress(upstream_id));
        table.deliver_progress(99, progress(99)); // nobody's: dropped
        assert!(table.answer(upstream_id, Response::result(Id::number(40), json!({}))));
        assert!(!table.answer(upstream_id, Response::result(Id::number(40), json!({}))));
        assert!(
            matches!(slot.take(false), Some(Taken::Event(CallEvent::Notification(n))) if n.params.as_deref() == Some(&json!({"progressToken": "mine", "progress": 1})))
        );
        assert!(matches!(slot.take(false), Some(Taken::Done(Ok(r))) if r.id == Id::from_value(&json!("client-1"))));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn listens_get_their_notifications_retagged_and_others_are_given_back() {
        let table = CallTable::new(7);
        let (listen, slot) = table.open(&mut None, Id::number(3));
        let updated = |tag: u64| Notification {
            method: "notifications/resources/updated".into(),
            params: Some(json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: tag}}).into()),
        };
        assert!(table.deliver_to_listen(listen, updated(listen)).is_ok());
        assert!(table.deliver_to_listen(8, updated(8)).is_err());
        assert!(
            matches!(slot.take(false), Some(Taken::Event(CallEvent::Notification(n))) if n.params.as_deref() == Some(&json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: 3}})))
        );
    }

    #[test]
    fn the_sole_request_and_failing_everything() {
        let table = CallTable::new(1);
        assert_eq!(table.sole(), None);
        let (first, first_slot) = table.open(&mut None, Id::number(1));
        assert_eq!(table.sole(), Some(first));
        let (_, second_slot) = table.open(&mut None, Id::number(2));
        assert_eq!(table.sole(), None);
        table.fail_all(|| UpstreamError::closed("u", "gone"));
        assert_eq!(table.len(), 0);
        for slot in [first_slot, second_slot] {
            assert!(matches!(
                slot.take(false),
                Some(Taken::Done(Err(UpstreamError::Closed { .. })))
            ));
        }
    }
}
