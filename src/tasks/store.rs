//! Where this replica keeps its tasks: each task's record, which `tasks/get`
//! reads, and the way to the call running it, which `tasks/update` and
//! `tasks/cancel` take. Bounded by `[tasks] max_tasks` and
//! `max_tasks_per_principal` (live tasks); finished tasks are forgotten
//! `ttl` after their creation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use dashmap::DashMap;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::shared::{RemoteControl, RunnersHere, SharedTasks};
use super::{Status, TaskRecord};
use crate::config::TasksConfig;
use crate::store::redis::{RedisError, Target};

/// Messages a task's runner takes from its client, at most this many waiting.
const CONTROL_QUEUE: usize = 8;

/// What a client asks of a running task; the runner answers on `done` once
/// the record shows it.
pub(crate) enum Control {
    /// `tasks/update`: answers to the questions keyed so.
    Answers {
        /// The `inputResponses`.
        responses: Map<String, Value>,
        /// Told once the record shows them.
        done: oneshot::Sender<()>,
    },
    /// `tasks/cancel`.
    Cancel {
        /// Told once the task is cancelled.
        done: oneshot::Sender<()>,
    },
}

/// The runner's end of a task: the client's requests arrive here.
pub(crate) type ControlReceiver = mpsc::Receiver<Control>;

/// Why a task cannot be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Full {
    /// `max_tasks` live tasks exist.
    Everyone(usize),
    /// The principal has `max_tasks_per_principal` live tasks.
    Principal(usize),
}

impl Full {
    /// The configuration key and its bound.
    pub(crate) fn what(self) -> (&'static str, usize) {
        match self {
            Full::Everyone(limit) => ("tasks (tasks.max_tasks)", limit),
            Full::Principal(limit) => ("tasks (tasks.max_tasks_per_principal)", limit),
        }
    }
}

/// This replica's tasks.
pub(crate) struct TaskStore {
    tasks: DashMap<String, Entry>,
    /// Live tasks by owner, and in all: what the bounds count.
    live: Mutex<Live>,
    config: TasksConfig,
    /// Tasks created since start.
    created: AtomicU64,
    /// Tasks ended since start, by how: completed, failed, cancelled.
    ended: [AtomicU64; 3],
    /// Every replica's tasks, with `[redis]`.
    shared: OnceLock<Arc<SharedTasks>>,
}

/// Where a client's `tasks/update` or `tasks/cancel` goes.
pub(crate) enum Route {
    /// To the runner on this replica (`None`: the task has ended).
    Here(Option<mpsc::Sender<Control>>),
    /// To the replica running the task, through Redis.
    Elsewhere,
    /// Nowhere: the task has ended, on another replica.
    Ended,
}

/// What the store holds and has done, for `/pools`, `/metrics` and the status page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct TaskCounts {
    /// Tasks kept (live, and finished within their ttl).
    pub(crate) kept: usize,
    /// Live tasks.
    pub(crate) live: usize,
    /// Created since start.
    pub(crate) created: u64,
    /// Ended `completed` since start.
    pub(crate) completed: u64,
    /// Ended `failed` since start (the ttl or the input bound passed, too).
    pub(crate) failed: u64,
    /// Ended `cancelled` since start.
    pub(crate) cancelled: u64,
}

#[derive(Default)]
struct Live {
    total: usize,
    by_owner: HashMap<String, usize>,
}

struct Entry {
    record: TaskRecord,
    /// To the runner, while the task is live.
    control: Option<mpsc::Sender<Control>>,
}

impl TaskStore {
    /// An empty store under `config`'s bounds.
    pub(crate) fn new(config: &TasksConfig) -> TaskStore {
        TaskStore {
            tasks: DashMap::new(),
            live: Mutex::new(Live::default()),
            config: config.clone(),
            created: AtomicU64::new(0),
            ended: Default::default(),
            shared: OnceLock::new(),
        }
    }

    /// Shares this replica's tasks with every replica through `target` (`[redis]`).
    pub(crate) fn share(self: &Arc<Self>, target: Target) {
        let (shared, spawn) = SharedTasks::new(target);
        if self.shared.set(shared).is_ok() {
            let runners: Weak<TaskStore> = Arc::downgrade(self);
            spawn(runners);
        }
    }

    /// Makes a created task durable where every replica finds it (with
    /// `[redis]`); until this returns, its client must not hear of it.
    pub(crate) async fn persist(&self, record: &TaskRecord) -> Result<(), RedisError> {
        match self.shared.get() {
            Some(shared) => shared.put(record).await,
            None => Ok(()),
        }
    }

    /// `owner`'s task `id` as `tasks/get` shows it, from this replica or,
    /// with `[redis]`, another's; `None` for an unknown id or another's task.
    pub(crate) async fn detailed(&self, id: &str, owner: &str) -> Option<serde_json::Value> {
        if let Some(entry) = self.tasks.get(id) {
            return (entry.record.owner == owner).then(|| entry.record.detailed());
        }
        let shared = self.shared.get()?;
        match shared.get(id).await {
            Ok(Some((stored_owner, task))) => (stored_owner == owner).then_some(task),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "tasks in redis: a task could not be read");
                None
            }
        }
    }

    /// Where a request about `owner`'s task `id` goes; `Err` for an unknown
    /// id or another's task.
    pub(crate) async fn route(&self, id: &str, owner: &str) -> Result<Route, ()> {
        if self.tasks.contains_key(id) {
            return self.control(id, owner).map(Route::Here);
        }
        let Some(task) = self.detailed(id, owner).await else {
            return Err(());
        };
        let ended = task["status"]
            .as_str()
            .is_none_or(|s| matches!(s, "completed" | "failed" | "cancelled"));
        Ok(if ended { Route::Ended } else { Route::Elsewhere })
    }

    /// Hands `control` to the replica running task `id`, through Redis.
    pub(crate) async fn send_elsewhere(&self, id: &str, control: RemoteControl) -> Result<(), RedisError> {
        match self.shared.get() {
            Some(shared) => shared.send(id, control).await,
            None => Ok(()),
        }
    }

    /// The bounds and timings tasks run under.
    pub(crate) fn config(&self) -> &TasksConfig {
        &self.config
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates a `working` task of `owner`'s, within the bounds: its record is
    /// stored (a `tasks/get` finds it) before this returns.
    pub(crate) fn create(&self, owner: &str) -> Result<(TaskRecord, ControlReceiver), Full> {
        {
            let mut live = self.live();
            if live.total >= self.config.max_tasks {
                return Err(Full::Everyone(self.config.max_tasks));
            }
            let own = live.by_owner.get(owner).copied().unwrap_or(0);
            if own >= self.config.max_tasks_per_principal {
                return Err(Full::Principal(self.config.max_tasks_per_principal));
            }
            live.total += 1;
            *live.by_owner.entry(owner.to_owned()).or_insert(0) += 1;
        }
        let record = TaskRecord::new(
            super::new_task_id(),
            owner.to_owned(),
            SystemTime::now(),
            self.config.ttl.0,
            self.config.poll_interval.0,
        );
        let (tx, rx) = mpsc::channel(CONTROL_QUEUE);
        let entry = Entry {
            record: record.clone(),
            control: Some(tx),
        };
        self.tasks.insert(record.id.clone(), entry);
        self.created.fetch_add(1, Ordering::Relaxed);
        Ok((record, rx))
    }

    /// `owner`'s task `id`, as it is now; `None` for an unknown id or another's task.
    #[cfg(test)]
    pub(crate) fn get(&self, id: &str, owner: &str) -> Option<TaskRecord> {
        let entry = self.tasks.get(id)?;
        (entry.record.owner == owner).then(|| entry.record.clone())
    }

    /// The way to `owner`'s task `id`'s runner: `Ok(None)` when it has ended,
    /// `Err` for an unknown id or another's task.
    pub(crate) fn control(&self, id: &str, owner: &str) -> Result<Option<mpsc::Sender<Control>>, ()> {
        let entry = self.tasks.get(id).ok_or(())?;
        if entry.record.owner != owner {
            return Err(());
        }
        Ok(entry.control.clone())
    }

    /// Changes task `id`'s record (its runner's doing); the change is stamped.
    pub(crate) fn update(&self, id: &str, change: impl FnOnce(&mut TaskRecord)) {
        if let Some(mut entry) = self.tasks.get_mut(id)
            && !entry.record.status.is_terminal()
        {
            change(&mut entry.record);
            entry.record.last_updated_at = SystemTime::now();
            if let Some(shared) = self.shared.get() {
                shared.put_later(&entry.record);
            }
        }
    }

    /// Ends task `id` with `status` and what it carries; it no longer counts
    /// against the bounds, and is kept until its `ttl` has passed.
    pub(crate) fn finish(&self, id: &str, status: Status, change: impl FnOnce(&mut TaskRecord)) {
        let owner = {
            let Some(mut entry) = self.tasks.get_mut(id) else {
                return;
            };
            if entry.record.status.is_terminal() {
                return;
            }
            let record = &mut entry.record;
            record.status = status;
            record.input_requests.clear();
            change(record);
            record.last_updated_at = SystemTime::now();
            entry.control = None;
            if let Some(shared) = self.shared.get() {
                shared.put_later(&entry.record);
            }
            entry.record.owner.clone()
        };
        self.count_end(status);
        self.release(&owner);
    }

    /// Forgets a task whose call could not even be sent (the client gets the
    /// error instead of the task).
    pub(crate) fn abandon(&self, id: &str) {
        if let Some((_, entry)) = self.tasks.remove(id)
            && !entry.record.status.is_terminal()
        {
            self.release(&entry.record.owner);
        }
    }

    fn count_end(&self, status: Status) {
        let slot = match status {
            Status::Completed => 0,
            Status::Failed => 1,
            Status::Cancelled => 2,
            Status::Working | Status::InputRequired => return,
        };
        self.ended[slot].fetch_add(1, Ordering::Relaxed);
    }

    fn release(&self, owner: &str) {
        let mut live = self.live();
        live.total = live.total.saturating_sub(1);
        if let Some(own) = live.by_owner.get_mut(owner) {
            *own = own.saturating_sub(1);
            if *own == 0 {
                live.by_owner.remove(owner);
            }
        }
    }

    /// Forgets every task past its `ttl`; a live one is failed first (its
    /// runner, told to cancel, cancels the upstream call).
    pub(crate) fn expire(&self, now: SystemTime) {
        let expired: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| t.record.expires_at() <= now)
            .map(|t| t.key().clone())
            .collect();
        for id in expired {
            let Some((_, entry)) = self.tasks.remove(&id) else {
                continue;
            };
            if !entry.record.status.is_terminal() {
                self.count_end(Status::Failed);
                self.release(&entry.record.owner);
                if let Some(control) = entry.control {
                    let (done, _) = oneshot::channel();
                    let _ = control.try_send(Control::Cancel { done });
                }
            }
        }
    }

    /// What the store holds and has done.
    pub(crate) fn counts(&self) -> TaskCounts {
        let ended = |slot: usize| self.ended[slot].load(Ordering::Relaxed);
        TaskCounts {
            kept: self.tasks.len(),
            live: self.live().total,
            created: self.created.load(Ordering::Relaxed),
            completed: ended(0),
            failed: ended(1),
            cancelled: ended(2),
        }
    }

    /// Runs [`TaskStore::expire`] every second while the store lives.
    pub(crate) fn spawn_expiry(self: &Arc<Self>) {
        crate::periodic::spawn_every(self, Duration::from_secs(1), |store| store.expire(SystemTime::now()));
    }
}

impl RunnersHere for TaskStore {
    /// A request another replica received for a task this one runs.
    fn deliver(&self, id: &str, control: RemoteControl) {
        let Some(sender) = self.tasks.get(id).and_then(|entry| entry.control.clone()) else {
            return;
        };
        let (done, _) = oneshot::channel();
        let control = match control {
            RemoteControl::Answers(responses) => Control::Answers { responses, done },
            RemoteControl::Cancel => Control::Cancel { done },
        };
        if sender.try_send(control).is_err() {
            tracing::warn!(task = %id, "a task's control queue is full; a request from another replica is dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Humantime;

    fn store(per_principal: usize, max: usize) -> TaskStore {
        TaskStore::new(&TasksConfig {
            max_tasks: max,
            max_tasks_per_principal: per_principal,
            ttl: Humantime(Duration::from_secs(60)),
            ..TasksConfig::default()
        })
    }

    #[test]
    fn tasks_are_their_owners_alone() {
        let store = store(10, 10);
        let Ok((task, _rx)) = store.create("alice") else {
            panic!("room for a task")
        };
        assert_eq!(store.get(&task.id, "alice").map(|t| t.status), Some(Status::Working));
        assert_eq!(store.get(&task.id, "mallory"), None);
        assert!(store.control(&task.id, "mallory").is_err());
        assert!(store.control("no-such-task", "alice").is_err());
        assert!(matches!(store.control(&task.id, "alice"), Ok(Some(_))));
    }

    #[test]
    fn live_tasks_are_bounded_per_principal_and_in_all() {
        let store = store(2, 3);
        let a1 = store.create("alice").map(|(t, _)| t.id);
        let _a2 = store.create("alice").map(|(t, _)| t.id);
        assert_eq!(store.create("alice").err(), Some(Full::Principal(2)));
        let _b1 = store.create("bob");
        assert_eq!(store.create("carol").err(), Some(Full::Everyone(3)));
        // A finished task frees its place, and is still answered.
        let Ok(a1) = a1 else { panic!("first task") };
        store.finish(&a1, Status::Completed, |t| {
            t.result = Some(serde_json::json!({"content": []}))
        });
        assert!(store.create("alice").is_ok());
        assert_eq!(store.get(&a1, "alice").map(|t| t.status), Some(Status::Completed));
        assert!(matches!(store.control(&a1, "alice"), Ok(None)));
        // Finishing twice changes nothing, nor counts twice.
        store.finish(&a1, Status::Failed, |_| {});
        assert_eq!(store.get(&a1, "alice").map(|t| t.status), Some(Status::Completed));
        let counts = store.counts();
        assert_eq!(
            (counts.kept, counts.live, counts.created, counts.completed),
            (4, 3, 4, 1)
        );
    }

    #[test]
    fn tasks_are_forgotten_after_their_ttl() {
        let store = store(10, 10);
        let Ok((task, mut rx)) = store.create("alice") else {
            panic!("room for a task")
        };
        store.expire(SystemTime::now());
        assert!(store.get(&task.id, "alice").is_some());
        store.expire(SystemTime::now() + Duration::from_secs(61));
        assert!(store.get(&task.id, "alice").is_none());
        let counts = store.counts();
        assert_eq!((counts.kept, counts.live, counts.failed), (0, 0, 1));
        // Its runner was told to stop.
        assert!(matches!(rx.try_recv(), Ok(Control::Cancel { .. })));
    }
}
