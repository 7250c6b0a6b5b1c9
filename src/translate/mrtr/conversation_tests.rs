//! Tables and properties for the multi round-trip conversation.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{ErrorCode, Id};

// === Scenario harness ===

fn request(id: u64, method: &str, params: Value) -> Request {
    Request {
        id: Id::number(id),
        method: method.into(),
        params: Some(params.into()),
    }
}

fn sampling(id: u64) -> Request {
    request(id, "sampling/createMessage", json!({"messages": []}))
}

fn roots(id: u64) -> Request {
    request(id, "roots/list", json!({}))
}

fn form(id: u64) -> Request {
    request(id, "elicitation/create", json!({"message": "m", "requestedSchema": {}}))
}

fn named_form(id: u64, key: &str) -> Request {
    request(
        id,
        "elicitation/create",
        json!({"message": "m", "_meta": {crate::translate::mrtr::INPUT_KEY_META: key}}),
    )
}

fn ping(id: u64) -> Request {
    request(id, "ping", json!({}))
}

fn binding() -> Binding {
    Binding::of("tools/call", Some(&json!({"name": "t"})), "alice")
}

fn expiry(now: Instant) -> Expiry {
    Expiry::after(now, 1_000, Duration::from_secs(60))
}

fn presented(keys: &[&str]) -> Map<String, Value> {
    keys.iter().map(|k| ((*k).to_owned(), answer_for(k))).collect()
}

/// A well-formed answer for the input key `key` (its kind read from the key's
/// noun; named keys are elicitations), marked with the key.
fn answer_for(key: &str) -> Value {
    if key.starts_with("sampling") {
        json!({"role": "assistant", "content": {"type": "text", "text": key}, "model": "m", "answer": key})
    } else if key.starts_with("roots") {
        json!({"roots": [], "answer": key})
    } else {
        json!({"action": "accept", "answer": key})
    }
}

/// Where a conversation driven by [`run`] ended, by upstream request id.
#[derive(Debug, Default, PartialEq)]
struct Ran {
    answered: Vec<u64>,
    refused: Vec<u64>,
    /// Keys and ids of what the client was asked.
    asked: Vec<(String, u64)>,
    /// The `requiredCapabilities` of a `-32021`, and the ids it failed on.
    failed: Option<(Value, Vec<u64>)>,
}

fn number(id: &Id) -> u64 {
    id.to_value().as_u64().unwrap_or(u64::MAX)
}

/// Feeds `requests` to a conversation of a `tools/call` whose client declared
/// `capabilities` and sent `sent` beforehand, then lets it decide.
fn run(capabilities: &Value, sent: Map<String, Value>, requests: Vec<Request>) -> (Ran, Option<AwaitingRetry<()>>) {
    let now = Instant::now();
    let mut ran = Ran::default();
    let mut policy = InputPolicy::for_request(true, capabilities, binding).with_presented(sent);
    let mut gathering: Option<GatheringInput> = None;
    for request in requests {
        let id = number(&request.id);
        if let Some(gathering) = gathering.as_mut() {
            match gathering.handle_server_request(request, now) {
                Gathered::Kept => {}
                Gathered::Answered(answer) => {
                    assert_eq!(answer.id, Some(Id::number(id)));
                    ran.answered.push(id);
                }
                Gathered::Refuse(_) => ran.refused.push(id),
            }
            continue;
        }
        match policy.fate(&request) {
            Fate::Refuse => ran.refused.push(id),
            Fate::Fail(error) => {
                ran.failed = Some((error.data.unwrap_or_default()["requiredCapabilities"].clone(), vec![id]));
                return (ran, None);
            }
            Fate::Input => {
                let InputPolicy::Asks(expect) = policy else {
                    panic!("input without a client to ask")
                };
                match expect.handle_input_request(request, now) {
                    OnInputRequest::Answered(expect, answer) => {
                        assert_eq!(answer.id, Some(Id::number(id)));
                        ran.answered.push(id);
                        policy = InputPolicy::Asks(expect);
                    }
                    OnInputRequest::Gathering(started) => {
                        gathering = Some(started);
                        policy = InputPolicy::NotAllowed;
                    }
                }
            }
        }
    }
    let Some(gathering) = gathering else {
        return (ran, None);
    };
    let kept: Vec<u64> = gathering.gathered.iter().map(|r| number(&r.id)).collect();
    match gathering.decide((), expiry(now)) {
        Decision::Fail { error, call: () } => {
            assert_eq!(error.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
            ran.failed = Some((error.data.unwrap_or_default()["requiredCapabilities"].clone(), kept));
            (ran, None)
        }
        Decision::Ask { refuse, awaiting } => {
            ran.refused.extend(refuse.iter().map(|r| number(&r.id)));
            ran.asked = awaiting.asked.iter().map(|(k, r)| (k.clone(), number(&r.id))).collect();
            (ran, Some(awaiting))
        }
    }
}

fn asked(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, id)| ((*k).to_owned(), *id)).collect()
}

// === Tables ===

/// A scenario: its name, what the client declared and sent beforehand, what the upstream asks, where it ends.
type Case = (&'static str, Value, Map<String, Value>, Vec<Request>, Ran);

#[test]
// A table of scenarios (105 lines), one row each.
fn gathered_questions_are_asked_refused_answered_or_fail_the_request() {
    let all = json!({"sampling": {}, "roots": {}, "elicitation": {}});
    let cases: Vec<Case> = vec![
        (
            "one request declared",
            json!({"sampling": {}}),
            Map::new(),
            vec![sampling(1)],
            Ran {
                asked: asked(&[("sampling-1", 1)]),
                ..Ran::default()
            },
        ),
        (
            "two asked together",
            all.clone(),
            Map::new(),
            vec![sampling(1), roots(2)],
            Ran {
                asked: asked(&[("sampling-1", 1), ("roots-2", 2)]),
                ..Ran::default()
            },
        ),
        (
            "one undeclared alone: -32021",
            json!({"roots": {}}),
            Map::new(),
            vec![sampling(1)],
            Ran {
                failed: Some((json!({"sampling": {}}), vec![1])),
                ..Ran::default()
            },
        ),
        (
            "a client that declared nothing: -32021 at once",
            json!({}),
            Map::new(),
            vec![form(1), sampling(2)],
            Ran {
                failed: Some((json!({"elicitation": {"form": {}}}), vec![1])),
                ..Ran::default()
            },
        ),
        (
            "undeclared questions together: every capability named",
            json!({"elicitation": {"url": {}}}),
            Map::new(),
            vec![sampling(1), roots(2), form(3)],
            Ran {
                failed: Some((
                    json!({"sampling": {}, "roots": {}, "elicitation": {"form": {}}}),
                    vec![1, 2, 3],
                )),
                ..Ran::default()
            },
        ),
        (
            "mixed: the undeclared one is refused toward the upstream",
            json!({"sampling": {}}),
            Map::new(),
            vec![roots(1), sampling(2)],
            Ran {
                refused: vec![1],
                asked: asked(&[("sampling-2", 2)]),
                ..Ran::default()
            },
        ),
        (
            "a named answer sent before it was asked: no round trip",
            all.clone(),
            presented(&["user_name"]),
            vec![named_form(1, "user_name")],
            Ran {
                answered: vec![1],
                ..Ran::default()
            },
        ),
        (
            "a pre-sent answer is used once; the next asks",
            all.clone(),
            presented(&["k"]),
            vec![named_form(1, "k"), named_form(2, "k"), named_form(3, "k")],
            Ran {
                answered: vec![1],
                asked: asked(&[("k", 2), ("elicitation-3", 3)]),
                ..Ran::default()
            },
        ),
        (
            "not input at all (ping): refused, while gathering too",
            all,
            Map::new(),
            vec![ping(1), sampling(2), ping(3)],
            Ran {
                refused: vec![1, 3],
                asked: asked(&[("sampling-2", 2)]),
                ..Ran::default()
            },
        ),
    ];
    for (name, capabilities, sent, requests, expected) in cases {
        let (ran, _) = run(&capabilities, sent, requests);
        assert_eq!(ran, expected, "{name}");
    }
}

#[test]
fn a_method_without_input_refuses_every_question() {
    let policy = InputPolicy::for_request(false, &json!({"sampling": {}}), binding);
    for question in [sampling(1), roots(2), form(3), ping(4)] {
        assert_eq!(policy.fate(&question), Fate::Refuse, "{}", question.method);
    }
}

#[test]
fn gathering_waits_for_quiet_but_never_past_a_second() {
    let t0 = Instant::now();
    let InputPolicy::Asks(expect) = InputPolicy::for_request(true, &json!({"sampling": {}}), binding) else {
        panic!("a declaring client may be asked");
    };
    let OnInputRequest::Gathering(mut gathering) = expect.handle_input_request(sampling(1), t0) else {
        panic!("nothing was presented");
    };
    assert_eq!(gathering.poll_timeout(), t0 + GATHER_QUIET);
    gathering.handle_event(t0 + Duration::from_millis(60));
    assert_eq!(gathering.poll_timeout(), t0 + Duration::from_millis(160));
    let _ = gathering.handle_server_request(sampling(2), t0 + Duration::from_millis(950));
    assert_eq!(gathering.poll_timeout(), t0 + GATHER_AT_MOST);
}

#[test]
fn retries_answer_what_came_and_ask_again_for_the_rest() {
    let (_, awaiting) = run(
        &json!({"sampling": {}, "roots": {}}),
        Map::new(),
        vec![sampling(1), roots(2)],
    );
    let awaiting = awaiting.expect("asked");
    let later = expiry(Instant::now() + Duration::from_secs(5));
    let first = presented(&["sampling-1", "unasked"]);
    let Retry::AskAgain { answers, awaiting } = awaiting.handle_retry(first, later) else {
        panic!("roots is missing");
    };
    assert_eq!(answers, vec![Response::result(Id::number(1), answer_for("sampling-1"))]);
    assert_eq!(awaiting.asked.len(), 1);
    assert_eq!(awaiting.expiry, later);
    assert_eq!(
        awaiting.input_required("s")["inputRequests"]["roots-2"]["method"],
        "roots/list"
    );
    let Retry::Resume {
        call: (),
        answers,
        input,
    } = awaiting.handle_retry(presented(&["roots-2"]), later)
    else {
        panic!("everything is answered");
    };
    assert_eq!(answers.len(), 1);
    assert!(matches!(&answers[0].outcome, Outcome::Result(r) if r["answer"] == "roots-2"));
    // Each retry's unused answers replace the last one's ("unasked" came with the first).
    assert!(input.presented.is_empty());
}

#[test]
fn a_retry_without_answers_asks_everything_again() {
    let (_, awaiting) = run(&json!({"sampling": {}}), Map::new(), vec![sampling(1)]);
    let awaiting = awaiting.expect("asked");
    let Retry::AskAgain { answers, awaiting } = awaiting.handle_retry(presented(&["other"]), expiry(Instant::now()))
    else {
        panic!("nothing answered");
    };
    assert!(answers.is_empty());
    assert_eq!(awaiting.asked[0].0, "sampling-1");
    assert_eq!(awaiting.expect.presented, presented(&["other"]));
}

#[test]
fn suspensions_expire_and_hand_back_their_call() {
    let (_, awaiting) = run(&json!({"sampling": {}}), Map::new(), vec![sampling(1)]);
    let awaiting = awaiting.expect("asked");
    let at = awaiting.expiry.at;
    assert!(!awaiting.is_expired(at - Duration::from_millis(1)));
    assert!(awaiting.is_expired(at));
    assert_eq!(awaiting.handle_expiry(), Some(()));
}

#[test]
fn url_elicitations_ask_then_reissue() {
    let error = ErrorObject::new(ErrorCode::URL_ELICITATION_REQUIRED, "go there").with_data(json!({"elicitations": [
        {"elicitationId": "e1", "url": "https://a", "message": "a"},
        {"elicitationId": "e2", "url": "https://b", "message": "b"},
    ]}));
    let form_only = InputPolicy::for_request(true, &json!({"elicitation": {"form": {}}}), binding);
    assert!(!form_only.takes_url_elicitation(&error));
    let url = InputPolicy::for_request(true, &json!({"elicitation": {"url": {}}}), binding);
    assert!(url.takes_url_elicitation(&error));
    let plain = ErrorObject::new(ErrorCode::URL_ELICITATION_REQUIRED, "no list");
    assert!(!url.takes_url_elicitation(&plain));
    let InputPolicy::Asks(expect) = url else {
        panic!("declared")
    };
    let now = Instant::now();
    let awaiting: AwaitingRetry<()> = expect.handle_url_elicitation(&error, expiry(now));
    let result = awaiting.input_required("state");
    assert_eq!(
        result["inputRequests"]["elicitation-url-2"],
        json!({"method": "elicitation/create", "params": {"url": "https://b", "message": "b", "mode": "url"}})
    );
    assert_eq!(awaiting.call(), None);
    assert!(matches!(
        awaiting.handle_retry(presented(&["elicitation-url-1"]), expiry(now)),
        Retry::Reissue
    ));
}

#[test]
fn claims_bind_the_request_and_expire() {
    let (_, awaiting) = run(&json!({"sampling": {}}), Map::new(), vec![sampling(1)]);
    let claims = awaiting.expect("asked").claims("h".into());
    assert_eq!((claims.handle.as_str(), claims.exp), ("h", 1_060));
    let other_params = Binding::of("tools/call", Some(&json!({"name": "u"})), "alice");
    let other_principal = Binding {
        principal: "bob".into(),
        ..binding()
    };
    let cases = [
        (binding(), 1_059, Ok(())),
        (binding(), 1_060, Err(StateError::Expired)),
        (other_params, 1_000, Err(StateError::OtherRequest)),
        (other_principal, 1_000, Err(StateError::OtherRequest)),
    ];
    for (bound, now, expected) in cases {
        assert_eq!(claims.check(&bound, now), expected, "{bound:?} at {now}");
    }
    assert_eq!(
        StateError::Expired.to_error_object().message,
        "requestState has expired; send the request again without it"
    );
}

// === Properties ===

/// A question: its kind (0 sampling, 1 form, 2 url, 3 roots, 4 ping) and an input key it may name.
fn question(id: u64, kind: u8, name: Option<u8>) -> Request {
    let mut params = match kind {
        0 => json!({"messages": []}),
        2 => json!({"mode": "url", "url": "https://x", "elicitationId": "e", "message": "m"}),
        _ => json!({"message": "m"}),
    };
    if let Some(name) = name {
        params["_meta"] = json!({crate::translate::mrtr::INPUT_KEY_META: format!("k{name}")});
    }
    let method = [
        "sampling/createMessage",
        "elicitation/create",
        "elicitation/create",
        "roots/list",
        "ping",
    ];
    request(id, method[usize::from(kind % 5)], params)
}

fn capabilities(declared: [bool; 4]) -> Value {
    let mut caps = Map::new();
    let mut elicitation = Map::new();
    if declared[0] {
        caps.insert("sampling".into(), json!({}));
    }
    if declared[1] {
        elicitation.insert("form".into(), json!({}));
    }
    if declared[2] {
        elicitation.insert("url".into(), json!({}));
    }
    if declared[3] {
        caps.insert("roots".into(), json!({}));
    }
    if !elicitation.is_empty() {
        caps.insert("elicitation".into(), Value::Object(elicitation));
    }
    Value::Object(caps)
}

proptest! {
    #[test]
    fn every_gathered_request_is_asked_refused_or_answered_exactly_once(
        declared in any::<[bool; 4]>(),
        sent in proptest::collection::vec(0u8..4, 0..4),
        questions in proptest::collection::vec((0u8..5, proptest::option::of(0u8..4)), 1..8),
    ) {
        let caps = capabilities(declared);
        let sent: Map<String, Value> = sent.iter().map(|k| (format!("k{k}"), json!({}))).collect();
        let requests: Vec<Request> =
            questions.iter().enumerate().map(|(i, (kind, name))| question(i as u64 + 1, *kind, *name)).collect();
        let by_id = |id: u64| &requests[(id - 1) as usize];
        let (ran, _) = run(&caps, sent, requests.clone());
        let failed: Vec<u64> = ran.failed.as_ref().map(|(_, ids)| ids.clone()).unwrap_or_default();
        let mut seen: Vec<u64> = ran.answered.iter().chain(&ran.refused).chain(&failed).copied().collect();
        seen.extend(ran.asked.iter().map(|(_, id)| *id));
        seen.sort_unstable();
        // Every request up to a failure is accounted for, each exactly once.
        let last = if ran.failed.is_some() { seen.last().copied().unwrap_or(0) } else { requests.len() as u64 };
        prop_assert_eq!(seen, (1..=last).collect::<Vec<u64>>());
        // The client is asked only what it declared, under keys unique in one input_required.
        for (_, id) in &ran.asked {
            prop_assert!(InputKind::of(by_id(*id)).is_some_and(|k| k.declared_by(&caps)));
        }
        let mut keys: Vec<&String> = ran.asked.iter().map(|(k, _)| k).collect();
        keys.sort();
        keys.dedup();
        prop_assert_eq!(keys.len(), ran.asked.len());
        // What is refused is not input, or input the client did not declare.
        for id in &ran.refused {
            prop_assert!(!InputKind::of(by_id(*id)).is_some_and(|k| k.declared_by(&caps)));
        }
        // A request fails only when nothing gathered with it could be asked.
        if ran.failed.is_some() {
            prop_assert!(ran.asked.is_empty());
        }
    }

    #[test]
    fn a_retry_answers_each_asked_question_at_most_once(
        answered in proptest::collection::vec(any::<bool>(), 4),
    ) {
        let caps = capabilities([true; 4]);
        let requests = vec![sampling(1), form(2), roots(3), named_form(4, "n")];
        let (ran, awaiting) = run(&caps, Map::new(), requests);
        let awaiting = awaiting.expect("everything declared is asked");
        let responses: Map<String, Value> = ran.asked.iter().zip(&answered)
            .filter(|(_, answered)| **answered)
            .map(|((key, _), _)| (key.clone(), answer_for(key)))
            .collect();
        let expected = responses.len();
        match awaiting.handle_retry(responses, expiry(Instant::now())) {
            Retry::Resume { answers, .. } => prop_assert_eq!(answers.len(), 4),
            Retry::AskAgain { answers, awaiting } => {
                prop_assert_eq!(answers.len(), expected);
                prop_assert_eq!(awaiting.asked.len(), 4 - expected);
            }
            Retry::Reissue => prop_assert!(false, "the call was live"),
        }
    }
}

#[test]
fn an_expiry_never_passes_the_calls_absolute_deadline() {
    let now = Instant::now();
    let s = Duration::from_secs;
    // (what, expiry after, deadline from now, expected at from now, expected unix offset)
    let table = [
        ("far from the deadline: the full expiry", s(120), s(600), s(120), 120),
        ("near it: cut to the deadline", s(120), s(30), s(30), 30),
        (
            "at it: expired now (sealed at least a second on)",
            s(120),
            s(0),
            s(0),
            1,
        ),
    ];
    for (what, after, until, at, unix) in table {
        let expiry = Expiry::bounded(now, 1000, after, now + until);
        assert_eq!((expiry.at - now, expiry.unix), (at, 1000 + unix), "{what}");
    }
    let past = Expiry::bounded(now + s(10), 1000, s(5), now);
    assert_eq!(past.at, now + s(10), "a deadline already past: expired at once");
}
