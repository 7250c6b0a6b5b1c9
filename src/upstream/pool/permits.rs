//! Admission to an upstream: at most `max_in_flight` requests at once, and a
//! bounded queue in front of that bound. It holds permits, never sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Upstream;
use crate::config::UpstreamConfig;
use crate::upstream::error::UpstreamError;

/// The in-flight bound and the bounded queue in front of it.
pub(super) struct Admission {
    permits: Arc<Semaphore>,
    max_in_flight: usize,
    waiting: AtomicUsize,
    queue: usize,
    queue_timeout: Duration,
}

impl Admission {
    pub(super) fn new(config: &UpstreamConfig) -> Admission {
        Admission {
            permits: Arc::new(Semaphore::new(config.max_in_flight)),
            max_in_flight: config.max_in_flight,
            waiting: AtomicUsize::new(0),
            queue: config.pool.queue,
            queue_timeout: config.pool.queue_timeout.0,
        }
    }

    /// Requests holding a permit.
    pub(super) fn in_flight(&self) -> usize {
        self.max_in_flight - self.permits.available_permits()
    }

    /// Requests waiting for one.
    pub(super) fn queued(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

impl Upstream {
    /// A permit to send one request. Past `max_in_flight` a request waits in a
    /// bounded queue for up to `pool.queue_timeout`; past the queue it is refused.
    pub(crate) async fn admit(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        let admission = &self.admission;
        let overloaded = || {
            self.stats.admission_rejected();
            UpstreamError::Overloaded {
                upstream: self.name.to_string(),
            }
        };
        if let Ok(permit) = admission.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let waiting = admission.waiting.fetch_add(1, Ordering::AcqRel);
        let _leave = DecrementOnDrop(&admission.waiting);
        if waiting >= admission.queue {
            return Err(overloaded());
        }
        match tokio::time::timeout(admission.queue_timeout, admission.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) | Err(_) => Err(overloaded()),
        }
    }
}

struct DecrementOnDrop<'a>(&'a AtomicUsize);

impl Drop for DecrementOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
