//! The policy stage applied to a request and its [`Reply`]: `[[policies]]`
//! check the names a request uses and narrow the lists it gets
//! ([`crate::policy::catalog`]); a `tools/list` answer reaches a caller whose
//! token may not call every tool without those tools ([`crate::policy::tools`]).
//! A streamed answer's final response is rewritten as the client takes it;
//! dropping the client's end still cancels the call. Long-lived streams (a
//! listen, a legacy session's GET stream) skip the `notifications/resources/updated`
//! the caller's policies hide as a reload leaves them (`live_narrowing`).

use std::sync::Arc;

use serde_json::Value;

use super::live_narrowing::LiveNarrowing;
use super::reply::{Reply, Status};
use crate::auth::{Admitted, ToolView};
use crate::config::Config;
use crate::gateway::Gateway;
use crate::policy::catalog::{self, Caller, Catalog, ListShape, Selection};
use crate::policy::tools::restrict_tools_list;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Era, Message, Response};
use crate::router::Backend;

/// The `[[policies]]` one caller is served under on one path: the
/// configuration applied when its request came (a reload serves the next one
/// under the new) and the entry that names the caller, if any.
pub(crate) struct Narrowing {
    config: Arc<Config>,
    entry: Option<usize>,
    /// The same caller under the policies a reload leaves, for its answer's stream.
    live: LiveNarrowing,
}

impl Narrowing {
    /// The narrowing of `caller` on `backend`'s path; `None` when the path has no policies.
    pub(crate) fn of(gateway: &Gateway, backend: &Backend, caller: &Admitted) -> Option<Narrowing> {
        let config = gateway.limits();
        if config.policies.is_empty() {
            return None;
        }
        let caller_view = Caller {
            subject: caller.principal.as_str(),
            scopes: caller.scopes.as_deref(),
        };
        match catalog::select(&config.policies, &config.groups, &backend.config().path, caller_view) {
            Selection::Unrestricted => None,
            Selection::Narrowed(entry) => Some(Narrowing {
                config: Arc::clone(&config),
                entry,
                live: LiveNarrowing::of(gateway.applied(), backend, caller),
            }),
        }
    }

    fn catalog(&self) -> Catalog<'_> {
        Catalog::new(self.entry.and_then(|i| self.config.policies.get(i)))
    }

    /// Checks the request in `message` and gives what it names its path name
    /// back. `Err` is the answer (a reply to send as it is) to a name the
    /// caller may not use; `Ok(Some)` for a request, whose answer must then be
    /// narrowed.
    pub(crate) fn admit(self, message: &mut Message) -> Result<Option<NarrowedAnswer>, Box<Reply>> {
        let Message::Request(request) = message else {
            return Ok(None);
        };
        match self.catalog().admit(&request.method, request.params.as_deref_mut()) {
            Ok(()) => Ok(Some(NarrowedAnswer {
                list: ListShape::of(&request.method),
                narrowing: Arc::new(self),
            })),
            Err(error) => {
                tracing::debug!(method = %request.method, "a name this caller may not use");
                let answer = Response::error(Some(request.id.clone()), error).into_message();
                Err(Box::new(Reply::Message(Status::Ok, answer)))
            }
        }
    }
}

/// A request admitted under `[[policies]]`: its answer is yet to be narrowed.
pub(crate) struct NarrowedAnswer {
    narrowing: Arc<Narrowing>,
    /// The request is a list of this shape.
    list: Option<ListShape>,
}

impl NarrowedAnswer {
    /// The answer `reply`, for a client of `era`, as the caller may see it: a
    /// list narrowed, and a stream (a listen's, a call's) without the
    /// notifications the caller's policy hides (as a reload leaves it).
    pub(crate) fn reply(self, reply: Reply, era: Era) -> Reply {
        let NarrowedAnswer { narrowing, list } = self;
        let reply = match list {
            Some(shape) => {
                let narrowing = Arc::clone(&narrowing);
                rewrite_results(reply, move |result| {
                    let hidden = narrowing.catalog().restrict(shape, result, era);
                    if hidden > 0 {
                        tracing::debug!(hidden, "a list narrowed by [[policies]]");
                    }
                })
            }
            None => reply,
        };
        match reply {
            Reply::Stream(responses, era) => {
                Reply::Stream(responses.filtered_by(move |message| narrowing.live.shows(message)), era)
            }
            other => other,
        }
    }
}

/// A listen's `reply` opened while no `[[policies]]` entry narrowed its caller:
/// it lives across reloads, so each notification is checked against the
/// policies a reload leaves (`live`), as a narrowed one's is.
pub(crate) fn follows_reloads(reply: Reply, live: LiveNarrowing) -> Reply {
    match reply {
        Reply::Stream(responses, era) => Reply::Stream(responses.filtered_by(move |message| live.shows(message)), era),
        other => other,
    }
}

/// `reply` with `rewrite` applied to its result (the final response of a
/// stream, as the client takes it: no relay task).
fn rewrite_results(reply: Reply, rewrite: impl Fn(&mut Value) + Send + Sync + 'static) -> Reply {
    let rewritten = move |message: Message| match message {
        Message::Response(Response {
            id,
            outcome: Outcome::Result(mut result),
        }) => {
            rewrite(&mut result);
            Message::Response(Response {
                id,
                outcome: Outcome::Result(result),
            })
        }
        other => other,
    };
    match reply {
        Reply::Message(status, message) => Reply::Message(status, rewritten(message)),
        Reply::Stream(from_call, era) => Reply::Stream(from_call.reshaped_by(rewritten), era),
        other => other,
    }
}

/// `reply` to a `tools/list` from a client of `era`, as `view` may see it.
pub(crate) fn tools_list(reply: Reply, era: Era, view: ToolView) -> Reply {
    rewrite_results(reply, move |result| {
        let hidden = restrict_tools_list(result, era, |name| view.may_call(name));
        if hidden > 0 {
            tracing::debug!(hidden, "tools/list: hid tools the caller's token may not call");
        }
    })
}
