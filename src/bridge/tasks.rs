//! Tasks for 2026-07-28 clients in front of legacy upstreams, the I/O shell
//! around [`crate::tasks`]: which `tools/call` becomes a task, the runner that
//! drives the upstream call behind a task (its questions become the task's
//! `inputRequests`, its answer the task's outcome), and the extension's
//! methods (`tasks/get`, `tasks/update`, `tasks/cancel`).
//!
//! A task lives in this replica: its record in the [`TaskStore`], its call in
//! a runner task holding the upstream session, the admission slot and the
//! principal's share like any call, until the call ends, the client cancels,
//! input waits past `tasks.input_timeout`, or the task's `ttl` passes.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::modern_client::{ModernSide, answer_upstream, refuse_later};
use super::param_headers::UpstreamTaskSupport;
use super::pooled_session::call_on_pooled_session;
use super::reply::{self, Reply};
use crate::auth::Principal;
use crate::config::{TaskInput, TaskSupport};
use crate::gateway::Gateway;
use crate::protocol::Era;
use crate::protocol::errors::Rejection;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::lazy_json::ParamsView;
use crate::protocol::{ErrorObject, Id, ModernMethod, Notification, Request, Response};
use crate::router::{Admission, Backend, Call, CallEvent, CallStep, OnDrop, Pool, UpstreamError, UpstreamSession};
use crate::tasks::shared::RemoteControl;
use crate::tasks::store::{Control, ControlReceiver, Route, TaskStore};
use crate::tasks::{self, Status, TaskRecord};
use crate::translate::mrtr::{InputKind, declares_input, input_key, input_request};
use crate::translate::{ModernRequest, down};

/// The `_meta` key a 2025-11-25 server tags a task's messages with.
const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

/// How a `tools/call` from a 2026-07-28 client is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallMode {
    /// As an ordinary call: the tool supports no tasks, or the client declared
    /// no extension and the tool's tasks are optional.
    Ordinary,
    /// As a task, created at once.
    Task,
    /// As an ordinary call that becomes a task once its input is answered.
    TaskAfterInput,
    /// As a task of the upstream's own (2025-11-25 `execution.taskSupport`),
    /// bridged to the extension.
    UpstreamTask,
}

/// How the upstream's tool named in `request` runs for this request: `Err` is
/// the `-32021` of a tool that requires tasks, called without the extension.
pub(crate) fn call_mode(pool: &Pool, request: &Request, modern: &ModernRequest) -> Result<CallMode, ErrorObject> {
    let tasks = &pool.config().tasks;
    if !tasks.any() {
        return Ok(CallMode::Ordinary);
    }
    let name = request
        .params
        .as_ref()
        .and_then(|p| ParamsView::str_member(p, "name"))
        .unwrap_or_default();
    let Some(rule) = tasks.rule_for(&name) else {
        return Ok(CallMode::Ordinary);
    };
    let declared = tasks::declares_extension(&modern.envelope.client_capabilities);
    match (declared, rule.support, rule.input) {
        (false, TaskSupport::Optional, _) => Ok(CallMode::Ordinary),
        (false, TaskSupport::Required, _) => Err(tasks::extension_required(&format!("the tool {name}"))),
        (true, _, TaskInput::InTask) => Ok(CallMode::Task),
        (true, _, TaskInput::BeforeTask) => Ok(CallMode::TaskAfterInput),
    }
}

/// How a tool of a 2025-11-25 upstream with tasks of its own runs for a
/// request that no `[[upstreams.tasks.tools]]` entry matched: as the
/// upstream's task for a client declaring the extension, as an ordinary call
/// otherwise (`Err`: the `-32021` of a tool that requires tasks).
pub(crate) async fn upstream_call_mode(
    gateway: &Gateway,
    pool: &Pool,
    request: &Request,
    modern: &ModernRequest,
    principal: &Principal,
) -> Result<CallMode, ErrorObject> {
    if !upstream_takes_tasks(pool, principal).await {
        return Ok(CallMode::Ordinary);
    }
    let support = gateway
        .tool_facts()
        .task_support(pool, request.params.as_ref(), modern, principal)
        .await;
    let declared = tasks::declares_extension(&modern.envelope.client_capabilities);
    match (support, declared) {
        (None, _) | (Some(UpstreamTaskSupport::Optional), false) => Ok(CallMode::Ordinary),
        (Some(_), true) => Ok(CallMode::UpstreamTask),
        (Some(UpstreamTaskSupport::Required), false) => {
            let name = request
                .params
                .as_ref()
                .and_then(|p| ParamsView::str_member(p, "name"))
                .unwrap_or_default();
            Err(tasks::extension_required(&format!("the tool {name}")))
        }
    }
}

/// Whether the upstream's handshake says `tools/call` may be a task of its own.
async fn upstream_takes_tasks(pool: &Pool, principal: &Principal) -> bool {
    let Ok(initialize) = pool.initialize_result(principal).await else {
        return false;
    };
    initialize
        .get("capabilities")
        .and_then(|c| c.get("tasks"))
        .and_then(|t| t.get("requests"))
        .and_then(|r| r.get("tools"))
        .and_then(|t| t.get("call"))
        .is_some()
}

/// Adds the extension to a `server/discover` result's `capabilities.extensions`.
pub(crate) fn advertise(discover: &mut Value) {
    let extensions = discover
        .as_object_mut()
        .and_then(|d| d.get_mut("capabilities"))
        .and_then(Value::as_object_mut)
        .map(|c| c.entry("extensions").or_insert_with(|| Value::Object(Map::new())));
    if let Some(Value::Object(extensions)) = extensions {
        extensions.insert(tasks::EXTENSION.into(), Value::Object(Map::new()));
    }
}

/// Starts a task for a `tools/call` to a legacy upstream and answers its
/// `CreateTaskResult`, once the task is stored and its call sent. With
/// [`CallMode::UpstreamTask`] the call asks the upstream for a task of its own,
/// whose `tasks/result` the task then runs on.
pub(crate) async fn start(
    gateway: &Gateway,
    pool: &Pool,
    request: Request,
    modern: &ModernRequest,
    principal: &Principal,
    mode: CallMode,
) -> Reply {
    let permit = match pool.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let store = gateway.tasks();
    let (record, control) = match store.create(principal.as_str()) {
        Ok(created) => created,
        Err(full) => {
            let (what, limit) = full.what();
            return Reply::rejected(Some(request.id), Rejection::QuotaExceeded { what, limit });
        }
    };
    let id = request.id.clone();
    let capabilities = &modern.envelope.client_capabilities;
    let mut params = request.params.map(down::modern_text_params_for_legacy);
    if mode == CallMode::UpstreamTask {
        params = Some(with_task_param(params, store.config().ttl.0).into());
    }
    let exclusive = declares_input(capabilities);
    let sent = call_on_pooled_session(pool, modern, principal, exclusive, &request.method, params, id.clone()).await;
    let mut call = match sent {
        Ok(call) => call,
        Err(error) => {
            store.abandon(&record.id);
            return Reply::upstream_failure(Some(id), &error);
        }
    };
    let side = ModernSide {
        method: modern.method,
        log_level: None,
        server_info: call.session().server_info_for_modern(),
        cache: pool.cache_policy(),
    };
    let mut upstream_task = None;
    if mode == CallMode::UpstreamTask {
        match Box::pin(upstream_task_result(call, &id, pool.timeout_for("tools/call"))).await {
            Ok((result, task_id)) => {
                upstream_task = Some(task_id);
                call = result;
            }
            Err(answer) => {
                store.abandon(&record.id);
                let mut response = side.translate_done(&id, answer);
                response.id = Some(id);
                return Reply::Message(reply::Status::Ok, response.into_message());
            }
        }
    }
    let mut runner = Runner::new(store, record.id.clone(), side, capabilities.clone());
    runner.upstream_task = upstream_task;
    launch(runner, &record, call, control, permit, id).await
}

/// Makes `record`'s task durable where `tasks/get` reads it, then hands `call`
/// to `runner`; the client's `CreateTaskResult`, or the error when the task
/// could not be stored (its call is then cancelled).
async fn launch(
    runner: Runner,
    record: &TaskRecord,
    call: Call,
    control: ControlReceiver,
    permit: Admission,
    id: Id,
) -> Reply {
    if let Err(error) = runner.store.persist(record).await {
        tracing::warn!(%error, "tasks in redis: a task could not be stored; its call is cancelled");
        runner.store.abandon(&record.id);
        call.cancel("the task could not be stored");
        let error = ErrorObject::internal("the task could not be stored in redis ([redis]); retry the call");
        return Reply::Message(reply::Status::Ok, Response::error(Some(id), error).into_message());
    }
    let created = record.create_result();
    tokio::spawn(runner.run(call, control, permit));
    Reply::result(id, created)
}

/// A legacy `tools/call`'s params asking for a task of the upstream's own (2025-11-25).
fn with_task_param(params: Option<crate::protocol::LazyJson>, ttl: std::time::Duration) -> Value {
    let mut params = params.map_or_else(|| Value::Object(Map::new()), crate::protocol::LazyJson::into_value);
    if let Some(object) = params.as_object_mut() {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        object.insert("task".into(), serde_json::json!({ "ttl": ttl }));
    }
    params
}

/// The upstream's answer to a `tools/call` that asked for its own task: its
/// task's id and the `tasks/result` call that ends with the tool's result, or
/// (`Err`) the answer the client gets instead when no task was made.
async fn upstream_task_result(
    call: Call,
    id: &Id,
    timeout: std::time::Duration,
) -> Result<(Call, String), Result<Response, UpstreamError>> {
    let session = call.session().clone();
    let response = match tokio::time::timeout(timeout, call.response()).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Err(Err(error)),
        Err(_) => {
            let upstream = session.upstream_name().to_owned();
            let after_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            return Err(Err(UpstreamError::Timeout { upstream, after_ms }));
        }
    };
    let task_id = match &response.outcome {
        Outcome::Result(result) => result
            .get("task")
            .and_then(|t| t.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        Outcome::Error(_) => None,
    };
    // An upstream may answer at once instead: that answer is the client's.
    let Some(task_id) = task_id else {
        return Err(Ok(response));
    };
    let params = serde_json::json!({ "taskId": task_id });
    match session
        .call("tasks/result", Some(params.into()), id.clone(), OnDrop::CancelUpstream)
        .await
    {
        Ok(result) => Ok((result, task_id)),
        Err(error) => {
            cancel_upstream_task(&session, &task_id);
            Err(Err(error))
        }
    }
}

/// How the upstream's own task ended, once its `tasks/result` answered.
enum UpstreamEnd {
    /// It was cancelled (by someone else: eragate's cancellation ends the runner first).
    Cancelled,
    /// With this outcome: the `tasks/result` answer, or the error of a `failed` task.
    Outcome(Outcome),
}

/// Reads the status of the upstream's task `task_id` after its `tasks/result`
/// answered `outcome`: a 2025-11-25 `tasks/result` answers a `failed` task with
/// its stored result, which the extension shows as an error instead.
async fn upstream_task_end(session: &Arc<UpstreamSession>, task_id: &str, outcome: Outcome) -> UpstreamEnd {
    let Outcome::Result(result) = outcome else {
        return UpstreamEnd::Outcome(outcome);
    };
    let params = serde_json::json!({ "taskId": task_id });
    let id = Id::text("eragate-task-status".to_owned());
    let status = match session
        .call("tasks/get", Some(params.into()), id, OnDrop::CancelUpstream)
        .await
    {
        Ok(call) => match tokio::time::timeout(std::time::Duration::from_secs(10), call.response()).await {
            Ok(Ok(Response {
                outcome: Outcome::Result(task),
                ..
            })) => Some(task.into_value()),
            _ => None,
        },
        Err(_) => None,
    };
    match status.as_ref().and_then(|t| t.get("status")).and_then(Value::as_str) {
        Some("cancelled") => UpstreamEnd::Cancelled,
        Some("failed") => {
            let result = result.into_value();
            let text = result
                .get("content")
                .and_then(|c| c.get(0))
                .and_then(|c| c.get("text"))
                .and_then(Value::as_str);
            let message = status
                .as_ref()
                .and_then(|t| t.get("statusMessage"))
                .and_then(Value::as_str)
                .or(text)
                .unwrap_or("the upstream's task failed")
                .to_owned();
            let error = ErrorObject::internal(message).with_data(serde_json::json!({ "result": result }));
            UpstreamEnd::Outcome(Outcome::Error(error))
        }
        _ => UpstreamEnd::Outcome(Outcome::Result(result)),
    }
}

/// A 2026-07-28 client's `task` hint on `tools/call` means nothing in its
/// revision (the server decides): it is not passed to a legacy upstream, which
/// would take it as a 2025-11-25 request for a task.
pub(crate) fn without_task_hint(mut request: Request) -> Request {
    let hinted = request
        .params
        .as_ref()
        .is_some_and(|p| p.has_member("task").unwrap_or_else(|| p.get("task").is_some()));
    if hinted && let Some(params) = request.params.take() {
        let mut params = params.into_value();
        if let Some(object) = params.as_object_mut() {
            object.remove("task");
        }
        request.params = Some(params.into());
    }
    request
}

/// Asks the upstream to cancel its own task `task_id`, without waiting.
fn cancel_upstream_task(session: &Arc<UpstreamSession>, task_id: &str) {
    let session = session.clone();
    let params = serde_json::json!({ "taskId": task_id });
    tokio::spawn(async move {
        let id = Id::text("eragate-task-cancel".to_owned());
        if let Ok(call) = session
            .call("tasks/cancel", Some(params.into()), id, OnDrop::Detach)
            .await
        {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), call.response()).await;
        }
    });
}

/// Makes a task of a call whose input was answered (`input = "before_task"`)
/// and answers its `CreateTaskResult`; the call runs on in the task.
pub(crate) async fn adopt(
    gateway: &Gateway,
    call: Call,
    side: ModernSide,
    modern: &ModernRequest,
    principal: &Principal,
    id: Id,
    permit: Admission,
) -> Reply {
    let store = gateway.tasks();
    let (record, control) = match store.create(principal.as_str()) {
        Ok(created) => created,
        Err(full) => {
            call.cancel("the task quota is reached");
            let (what, limit) = full.what();
            return Reply::rejected(Some(id), Rejection::QuotaExceeded { what, limit });
        }
    };
    let capabilities = modern.envelope.client_capabilities.clone();
    let runner = Runner::new(store, record.id.clone(), side, capabilities);
    launch(runner, &record, call, control, permit, id).await
}

/// Whether eragate answers the tasks methods on this path: always, except
/// in front of one 2026-07-28 upstream given no tasks of eragate's, whose own
/// tasks they are.
pub(crate) fn served_here(backend: &Backend) -> bool {
    match backend {
        Backend::Pool(pool) => pool.era_if_known() != Some(Era::Modern) || pool.config().tasks.any(),
        Backend::Federated(_) => true,
    }
}

/// Answers `tasks/get`, `tasks/update` or `tasks/cancel` from the caller's tasks.
pub(crate) async fn serve_method(
    gateway: &Gateway,
    request: Request,
    modern: &ModernRequest,
    principal: &Principal,
) -> Reply {
    let id = request.id.clone();
    match method_result(gateway.tasks(), &request, modern, principal.as_str()).await {
        Ok(result) => Reply::result(id, result),
        Err(error) => Reply::Message(reply::Status::Ok, Response::error(Some(id), error).into_message()),
    }
}

async fn method_result(
    store: &TaskStore,
    request: &Request,
    modern: &ModernRequest,
    owner: &str,
) -> Result<Value, ErrorObject> {
    if !tasks::declares_extension(&modern.envelope.client_capabilities) {
        return Err(tasks::extension_required(modern.method.as_str()));
    }
    let params = request.params.as_deref();
    let task_id = tasks::task_id_of(params)?;
    let order = match modern.method {
        ModernMethod::TasksGet => {
            return store
                .detailed(task_id, owner)
                .await
                .ok_or_else(|| tasks::unknown_task(task_id));
        }
        ModernMethod::TasksUpdate => Order::Answers(tasks::input_responses_of(params)?),
        ModernMethod::TasksCancel => Order::Cancel,
        _ => {
            return Err(ErrorObject::new(
                crate::protocol::ErrorCode::METHOD_NOT_FOUND,
                format!("Method not found: {}", modern.method.as_str()),
            ));
        }
    };
    match store.route(task_id, owner).await {
        Err(()) => Err(tasks::unknown_task(task_id)),
        // Nothing is left to answer or cancel.
        Ok(Route::Here(None) | Route::Ended) => Ok(tasks::ack()),
        Ok(Route::Here(Some(runner))) => {
            let (done, told) = oneshot::channel();
            let control = match order {
                Order::Answers(responses) => Control::Answers { responses, done },
                Order::Cancel => Control::Cancel { done },
            };
            // A runner that ended meanwhile has nothing left to answer.
            if runner.send(control).await.is_ok() {
                let _ = told.await;
            }
            Ok(tasks::ack())
        }
        Ok(Route::Elsewhere) => {
            let control = match order {
                Order::Answers(responses) => RemoteControl::Answers(responses),
                Order::Cancel => RemoteControl::Cancel,
            };
            store.send_elsewhere(task_id, control).await.map_err(|error| {
                tracing::warn!(%error, "tasks in redis: a request for another replica's task was not sent");
                ErrorObject::internal("the task runs on another replica, which could not be reached; retry")
            })?;
            Ok(tasks::ack())
        }
    }
}

/// What `tasks/update` or `tasks/cancel` asks of a task.
enum Order {
    Answers(Map<String, Value>),
    Cancel,
}

/// Drives the upstream call behind one task.
struct Runner {
    store: Arc<TaskStore>,
    task_id: String,
    side: ModernSide,
    /// The creating request's `clientCapabilities`: what the client may be asked.
    capabilities: Value,
    /// The questions awaiting the client's answer, by key.
    pending: HashMap<String, Request>,
    /// The upstream's own task the call is the `tasks/result` of (2025-11-25):
    /// cancelled with the call.
    upstream_task: Option<String>,
}

impl Runner {
    fn new(store: &Arc<TaskStore>, task_id: String, side: ModernSide, capabilities: Value) -> Runner {
        Runner {
            store: store.clone(),
            task_id,
            side,
            capabilities,
            pending: HashMap::new(),
            upstream_task: None,
        }
    }

    /// Runs the call to its end, the client's cancellation, or the task's
    /// bounds; `held` (the admission slot) is held until then.
    async fn run(mut self, mut call: Call, mut control: ControlReceiver, held: Admission) {
        let config = self.store.config().clone();
        let expires = Instant::now() + config.ttl.0;
        let mut input_due: Option<Instant> = None;
        loop {
            let deadline = input_due.map_or(expires, |due| due.min(expires));
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(deadline) => {
                    let message = if input_due.is_some_and(|due| due <= expires) {
                        "the client did not answer the task's input within tasks.input_timeout"
                    } else {
                        "the task outlived its ttl"
                    };
                    self.cancel_upstream_task(&call);
                    call.cancel(message);
                    self.fail(ErrorObject::internal(message));
                    break;
                }
                order = control.recv() => match order {
                    Some(Control::Answers { responses, done }) => {
                        self.answer(&call, responses).await;
                        if self.pending.is_empty() {
                            input_due = None;
                        }
                        let _ = done.send(());
                    }
                    Some(Control::Cancel { done }) => {
                        self.cancel_upstream_task(&call);
                        call.cancel("the client cancelled the task");
                        self.store.finish(&self.task_id, Status::Cancelled, |task| {
                            task.status_message = Some("cancelled by the client".into());
                        });
                        let _ = done.send(());
                        break;
                    }
                    // Forgotten (its ttl passed): nobody can see it any more.
                    None => {
                        self.cancel_upstream_task(&call);
                        call.cancel("the task outlived its ttl");
                        break;
                    }
                },
                step = call.next() => match step {
                    CallStep::Event(CallEvent::ServerRequest(request)) => {
                        if self.ask(&call, request) {
                            input_due.get_or_insert_with(|| Instant::now() + config.input_wait());
                        }
                    }
                    CallStep::Event(CallEvent::Notification(notification)) => self.progress(&notification),
                    CallStep::Done(result) => {
                        let mut outcome = self.side.translate_done(&Id::number(0), result).outcome;
                        if let Some(task_id) = &self.upstream_task {
                            match upstream_task_end(call.session(), task_id, outcome).await {
                                UpstreamEnd::Cancelled => {
                                    self.store.finish(&self.task_id, Status::Cancelled, |_| {});
                                    break;
                                }
                                UpstreamEnd::Outcome(ended) => outcome = ended,
                            }
                        }
                        self.settle(outcome, config.max_result_bytes);
                        break;
                    }
                },
            }
        }
        drop(held);
    }

    fn cancel_upstream_task(&self, call: &Call) {
        if let Some(task_id) = &self.upstream_task {
            cancel_upstream_task(call.session(), task_id);
        }
    }

    /// Makes an upstream's question the task's, when the client may be asked
    /// it; refuses it upstream otherwise. Whether it was kept.
    fn ask(&mut self, call: &Call, request: Request) -> bool {
        let askable = InputKind::of(&request)
            .is_some_and(|kind| kind != InputKind::UrlElicitation && kind.declared_by(&self.capabilities));
        if !askable {
            refuse_later(call.session(), request);
            return false;
        }
        let mut key = input_key(&request);
        while self.pending.contains_key(&key) {
            key.push('_');
        }
        let shown = input_request(&request);
        self.pending.insert(key.clone(), request);
        self.store.update(&self.task_id, |task| {
            task.input_requests.insert(key, shown);
            task.status = Status::InputRequired;
        });
        true
    }

    /// Relays the client's answers to the questions they key; answers to
    /// anything else are ignored (SEP-2663), and an answer without the shape of
    /// its question's result leaves the question asked.
    async fn answer(&mut self, call: &Call, mut responses: Map<String, Value>) {
        let mut answers = Vec::new();
        self.pending.retain(|key, request| {
            let answer = responses
                .remove(key)
                .filter(|answer| InputKind::of(request).is_none_or(|kind| kind.accepts_answer(answer)));
            match answer {
                Some(answer) => {
                    answers.push(Response::result(request.id.clone(), answer));
                    false
                }
                None => true,
            }
        });
        if answers.is_empty() {
            return;
        }
        answer_upstream(call.session(), answers).await;
        let pending = &self.pending;
        self.store.update(&self.task_id, |task| {
            task.input_requests.retain(|key, _| pending.contains_key(key));
            if pending.is_empty() {
                task.status = Status::Working;
            }
        });
    }

    /// A progress notification's message becomes the task's `statusMessage`.
    fn progress(&self, notification: &Notification) {
        if notification.method != "notifications/progress" {
            return;
        }
        let message = notification
            .params
            .as_deref()
            .and_then(|p| p.get("message"))
            .and_then(Value::as_str);
        if let Some(message) = message {
            let message = message.to_owned();
            self.store
                .update(&self.task_id, |task| task.status_message = Some(message));
        }
    }

    /// The call's outcome becomes the task's: `completed` with its result (a
    /// tool error too), `failed` with its JSON-RPC error or past the size bound.
    fn settle(&self, outcome: Outcome, max_result_bytes: usize) {
        match outcome {
            Outcome::Result(result) => {
                let size = serde_json::to_vec(&result).map_or(usize::MAX, |text| text.len());
                if size > max_result_bytes {
                    self.fail(ErrorObject::internal(format!(
                        "the tool's result ({size} bytes) is larger than tasks.max_result_bytes ({max_result_bytes})"
                    )));
                    return;
                }
                let mut result = result.into_value();
                // The upstream's own task (2025-11-25) tags its result; the extension's is not tagged.
                if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
                    meta.remove(RELATED_TASK_META);
                }
                self.store.finish(&self.task_id, Status::Completed, |task| {
                    task.result = Some(result);
                });
            }
            Outcome::Error(error) => self.fail(error),
        }
    }

    fn fail(&self, error: ErrorObject) {
        let message = error.message.clone();
        self.store.finish(&self.task_id, Status::Failed, |task| {
            task.error = Some(error.to_value());
            task.status_message = Some(message);
        });
    }
}
