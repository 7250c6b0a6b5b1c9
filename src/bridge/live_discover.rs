//! The live self-test (`[telemetry] live_discover`): a `server/discover`
//! answer carries, in its `_meta`, what eragate knows right now of the
//! upstream behind it, so one call tells a client or a probe whether the whole
//! path works. Only the result's `_meta` gains a key; nothing else changes.

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::reply::Reply;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Message, Response};
use crate::router::Pool;

/// The `_meta` key of the summary.
pub(crate) const SUMMARY_KEY: &str = "io.eragate/upstream";

/// Bound of messages queued between the call's pump and the client.
const RELAY_QUEUE: usize = 32;

/// `reply` to a `server/discover`, its result's `_meta` carrying `pool`'s live summary.
pub(crate) fn with_summary(reply: Reply, pool: &Pool) -> Reply {
    let summary = summary(&pool.snapshot());
    match reply {
        Reply::Message(status, message) => Reply::Message(status, summarized(message, &summary)),
        Reply::Stream(mut from_call, era) => {
            let (to_client, rx) = mpsc::channel(RELAY_QUEUE);
            tokio::spawn(async move {
                while let Some(message) = from_call.recv().await {
                    if to_client.send(summarized(message, &summary)).await.is_err() {
                        break; // the client left; dropping `from_call` stops the pump
                    }
                }
            });
            Reply::Stream(rx.into(), era)
        }
        other => other,
    }
}

/// The summary of an upstream from its admin view.
pub(crate) fn summary(snapshot: &Value) -> Value {
    let members = snapshot["members"].as_array().map(Vec::as_slice).unwrap_or_default();
    let healthy = members.iter().filter(|m| m["healthy"] == true).count();
    json!({
        "upstream": snapshot["upstream"],
        "era": snapshot["era"],
        "members": {"healthy": healthy, "total": members.len()},
        "lastSuccessUnixMs": snapshot["last_success_ms"],
    })
}

fn summarized(message: Message, summary: &Value) -> Message {
    match message {
        Message::Response(Response {
            id,
            outcome: Outcome::Result(mut result),
        }) => {
            if let Some(object) = result.as_object_mut() {
                let meta = object.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(SUMMARY_KEY.into(), summary.clone());
                }
            }
            Message::Response(Response {
                id,
                outcome: Outcome::Result(result),
            })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Id;

    #[test]
    fn summary_counts_healthy_members() {
        let snapshot = json!({
            "upstream": "files", "era": "legacy", "last_success_ms": 42,
            "members": [{"healthy": true}, {"healthy": false}, {"healthy": true}],
        });
        assert_eq!(
            summary(&snapshot),
            json!({"upstream": "files", "era": "legacy", "members": {"healthy": 2, "total": 3}, "lastSuccessUnixMs": 42})
        );
    }

    #[test]
    fn only_results_gain_the_key_and_other_meta_stays() {
        let summary = json!({"era": "legacy"});
        let table = [
            (
                json!({"a": 1}),
                json!({"a": 1, "_meta": {SUMMARY_KEY: {"era": "legacy"}}}),
            ),
            (
                json!({"_meta": {"x/y": 2}}),
                json!({"_meta": {"x/y": 2, SUMMARY_KEY: {"era": "legacy"}}}),
            ),
            // A `_meta` that is not an object is left as the upstream sent it.
            (json!({"_meta": 3}), json!({"_meta": 3})),
        ];
        for (result, expected) in table {
            let message = Response::result(Id::number(1), result).into_message();
            let Message::Response(Response {
                outcome: Outcome::Result(out),
                ..
            }) = summarized(message, &summary)
            else {
                panic!("not a result");
            };
            assert_eq!(out, expected);
        }
    }
}
