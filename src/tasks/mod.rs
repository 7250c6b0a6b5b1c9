//! Tasks, the 2026-07-28 `io.modelcontextprotocol/tasks` extension (SEP-2663),
//! the pure part: a task's record and status, the shapes its methods answer
//! (`CreateTaskResult`, the detailed task of `tasks/get`, the empty acks), and
//! the checks on their params. The store is [`store`] (shared by replicas
//! through Redis: [`shared`]); running the upstream call behind a task is
//! `crate::bridge::tasks`.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use crate::protocol::ErrorObject;

pub(crate) mod shared;
pub(crate) mod store;

/// The extension's identifier, in `capabilities.extensions` and a request's
/// `clientCapabilities.extensions`.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Longest task id eragate accepts (its own are 32 hex digits).
const MAX_TASK_ID: usize = 128;

/// Where a task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Its call runs.
    Working,
    /// Its call waits for the client's answers (`inputRequests`).
    InputRequired,
    /// Its call answered (a tool error too: `result.isError`).
    Completed,
    /// The client cancelled it.
    Cancelled,
    /// Its call ended with a JSON-RPC error (`error`).
    Failed,
}

impl Status {
    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
        }
    }

    /// Whether the task has ended.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Cancelled | Status::Failed)
    }
}

/// What a task is, as `tasks/get` shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TaskRecord {
    /// Its id: 128 random bits, never guessed.
    pub(crate) id: String,
    /// The principal that created it; nobody else sees it.
    pub(crate) owner: String,
    /// Where it is.
    pub(crate) status: Status,
    /// What it is doing or why it ended, for people.
    pub(crate) status_message: Option<String>,
    /// When it was created.
    pub(crate) created_at: SystemTime,
    /// When its status, input or outcome last changed.
    pub(crate) last_updated_at: SystemTime,
    /// How long it is kept after creation.
    pub(crate) ttl: Duration,
    /// How often its client is asked to poll.
    pub(crate) poll_interval: Duration,
    /// The questions awaiting an answer, by key (`{method, params}` each).
    pub(crate) input_requests: Map<String, Value>,
    /// The call's result, once `completed`.
    pub(crate) result: Option<Value>,
    /// The call's JSON-RPC error, once `failed`.
    pub(crate) error: Option<Value>,
}

impl TaskRecord {
    /// A task just created, `working`.
    pub(crate) fn new(
        id: String,
        owner: String,
        now: SystemTime,
        ttl: Duration,
        poll_interval: Duration,
    ) -> TaskRecord {
        TaskRecord {
            id,
            owner,
            status: Status::Working,
            status_message: None,
            created_at: now,
            last_updated_at: now,
            ttl,
            poll_interval,
            input_requests: Map::new(),
            result: None,
            error: None,
        }
    }

    /// When it stops being answered.
    pub(crate) fn expires_at(&self) -> SystemTime {
        self.created_at + self.ttl
    }

    /// The members every task shape carries.
    fn envelope(&self, result_type: &str) -> Map<String, Value> {
        let mut task = Map::new();
        task.insert("resultType".into(), result_type.into());
        task.insert("taskId".into(), self.id.clone().into());
        task.insert("status".into(), self.status.as_str().into());
        if let Some(message) = &self.status_message {
            task.insert("statusMessage".into(), message.clone().into());
        }
        task.insert("createdAt".into(), timestamp(self.created_at).into());
        task.insert("lastUpdatedAt".into(), timestamp(self.last_updated_at).into());
        task.insert("ttlMs".into(), millis(self.ttl).into());
        task.insert("pollIntervalMs".into(), millis(self.poll_interval).max(1).into());
        task
    }

    /// The `CreateTaskResult` a `tools/call` answers: the task, flat, without
    /// its input, result or error (those are `tasks/get`'s).
    pub(crate) fn create_result(&self) -> Value {
        Value::Object(self.envelope("task"))
    }

    /// What `tasks/get` answers: the task with what its status carries inlined.
    pub(crate) fn detailed(&self) -> Value {
        let mut task = self.envelope("complete");
        match self.status {
            Status::InputRequired => {
                task.insert("inputRequests".into(), Value::Object(self.input_requests.clone()));
            }
            Status::Completed => {
                task.insert("result".into(), self.result.clone().unwrap_or_else(|| json!({})));
            }
            Status::Failed => {
                let error = self.error.clone();
                task.insert(
                    "error".into(),
                    error.unwrap_or_else(|| ErrorObject::internal("the task failed").to_value()),
                );
            }
            Status::Working | Status::Cancelled => {}
        }
        Value::Object(task)
    }
}

/// The empty acknowledgement of `tasks/update` and `tasks/cancel`.
pub(crate) fn ack() -> Value {
    json!({"resultType": "complete"})
}

/// Whether a request's `clientCapabilities` declare the extension.
pub(crate) fn declares_extension(client_capabilities: &Value) -> bool {
    client_capabilities
        .get("extensions")
        .and_then(|e| e.get(EXTENSION))
        .is_some()
}

/// The `-32021` for a request that needs the extension and did not declare it.
pub(crate) fn extension_required(what: &str) -> ErrorObject {
    ErrorObject::missing_client_capability(
        json!({"extensions": {EXTENSION: {}}}),
        format!("{what} needs the {EXTENSION} extension: declare it in the request's clientCapabilities.extensions"),
    )
}

/// The `-32602` for a task id that names no task of the caller's (unknown,
/// forgotten, or another principal's: the same answer, so ids cannot be probed).
pub(crate) fn unknown_task(id: &str) -> ErrorObject {
    let shown: String = id.chars().take(MAX_TASK_ID).collect();
    ErrorObject::invalid_params(format!("Unknown task: {shown}"))
}

/// The `taskId` of a tasks method's params: a non-empty string of at most 128
/// characters, else `-32602`.
pub(crate) fn task_id_of(params: Option<&Value>) -> Result<&str, ErrorObject> {
    match params.and_then(|p| p.get("taskId")) {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_TASK_ID => Ok(id),
        Some(Value::String(_)) => Err(ErrorObject::invalid_params(format!(
            "params.taskId must be 1 to {MAX_TASK_ID} characters"
        ))),
        Some(_) => Err(ErrorObject::invalid_params("params.taskId must be a string")),
        None => Err(ErrorObject::invalid_params("params.taskId is required")),
    }
}

/// The `inputResponses` of a `tasks/update`: an object, else `-32602`.
pub(crate) fn input_responses_of(params: Option<&Value>) -> Result<Map<String, Value>, ErrorObject> {
    match params.and_then(|p| p.get("inputResponses")) {
        Some(Value::Object(responses)) => Ok(responses.clone()),
        Some(_) => Err(ErrorObject::invalid_params("params.inputResponses must be an object")),
        None => Err(ErrorObject::invalid_params("params.inputResponses is required")),
    }
}

/// A fresh task id: 128 random bits as hex.
pub(crate) fn new_task_id() -> String {
    use rand::Rng;
    format!("{:032x}", rand::rng().random::<u128>())
}

/// RFC 3339 in UTC, to the millisecond.
fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: Status) -> TaskRecord {
        let created = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_066_600);
        let mut task = TaskRecord::new(
            "786512e2".into(),
            "alice".into(),
            created,
            Duration::from_secs(60),
            Duration::from_millis(5000),
        );
        task.status = status;
        task
    }

    /// SEP-2663's examples: a flat `CreateTaskResult` whose durations are
    /// integer milliseconds, and a detailed task per status.
    #[test]
    fn shapes_of_the_extension() {
        let created = record(Status::Working).create_result();
        assert_eq!(
            created,
            json!({
                "resultType": "task",
                "taskId": "786512e2",
                "status": "working",
                "createdAt": "2025-11-25T10:30:00.000Z",
                "lastUpdatedAt": "2025-11-25T10:30:00.000Z",
                "ttlMs": 60000,
                "pollIntervalMs": 5000
            })
        );
        let mut asking = record(Status::InputRequired);
        asking.input_requests.insert(
            "elicit-name".into(),
            json!({"method": "elicitation/create", "params": {"message": "Please enter your name."}}),
        );
        let cases = [
            (record(Status::Working), "working", None),
            (asking, "input_required", Some("inputRequests")),
            (
                TaskRecord {
                    result: Some(json!({"content": [{"type": "text", "text": "done"}]})),
                    ..record(Status::Completed)
                },
                "completed",
                Some("result"),
            ),
            (record(Status::Failed), "failed", Some("error")),
            (record(Status::Cancelled), "cancelled", None),
        ];
        for (task, status, inlined) in cases {
            let detailed = task.detailed();
            assert_eq!(detailed["resultType"], "complete", "{status}");
            assert_eq!(detailed["status"], status);
            for member in [
                "inputRequests",
                "result",
                "error",
                "requestState",
                "ttl",
                "pollInterval",
            ] {
                assert_eq!(
                    detailed.get(member).is_some(),
                    inlined == Some(member),
                    "{status}: {member}"
                );
            }
        }
    }

    #[test]
    fn task_ids_are_checked() {
        let cases = [
            (json!({"taskId": "abc"}), Ok("abc")),
            (json!({"taskId": 7}), Err(())),
            (json!({"taskId": ""}), Err(())),
            (json!({"taskId": "x".repeat(129)}), Err(())),
            (json!({}), Err(())),
        ];
        for (params, expected) in cases {
            let got = task_id_of(Some(&params)).map_err(|e| assert_eq!(e.code.0, -32602));
            assert_eq!(got, expected, "{params}");
        }
        assert!(task_id_of(None).is_err());
        assert_eq!(new_task_id().len(), 32);
        assert_ne!(new_task_id(), new_task_id());
    }

    #[test]
    fn the_extension_is_declared_per_request() {
        assert!(declares_extension(&json!({"extensions": {EXTENSION: {}}})));
        assert!(!declares_extension(&json!({"extensions": {}})));
        assert!(!declares_extension(&json!({"tasks": {}})));
        let error = extension_required("tasks/get");
        assert_eq!(error.code.0, -32021);
        assert_eq!(
            error.data,
            Some(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}))
        );
    }
}
