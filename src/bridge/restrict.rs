//! The policy stage applied to a [`Reply`]: a `tools/list` answer reaches a caller
//! whose token may not call every tool without those tools ([`crate::policy::tools`]).
//! A streamed answer is relayed through a bounded channel so that only its final
//! response is rewritten; dropping the client's end still cancels the call.

use tokio::sync::mpsc;

use super::reply::Reply;
use crate::auth::ToolView;
use crate::policy::tools::restrict_tools_list;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Era, Message, Response};

/// Bound of messages queued between the call's pump and the client.
const RELAY_QUEUE: usize = 32;

/// `reply` to a `tools/list` from a client of `era`, as `view` may see it.
pub fn tools_list(reply: Reply, era: Era, view: ToolView) -> Reply {
    match reply {
        Reply::Message(status, message) => Reply::Message(status, restricted(message, era, &view)),
        Reply::Stream(mut from_call, era) => {
            let (to_client, rx) = mpsc::channel(RELAY_QUEUE);
            tokio::spawn(async move {
                while let Some(message) = from_call.recv().await {
                    if to_client.send(restricted(message, era, &view)).await.is_err() {
                        break; // the client left; dropping `from_call` stops the pump
                    }
                }
            });
            Reply::Stream(rx.into(), era)
        }
        other => other,
    }
}

fn restricted(message: Message, era: Era, view: &ToolView) -> Message {
    match message {
        Message::Response(Response {
            id,
            outcome: Outcome::Result(mut result),
        }) => {
            let hidden = restrict_tools_list(&mut result, era, |name| view.may_call(name));
            if hidden > 0 {
                tracing::debug!(hidden, "tools/list: hid tools the caller's token may not call");
            }
            Message::Response(Response {
                id,
                outcome: Outcome::Result(result),
            })
        }
        other => other,
    }
}
