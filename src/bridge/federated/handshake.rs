//! The federation's handshake: every member's `server/discover` merged into
//! one ([`crate::federate::merge`]), for a 2026-07-28 client's
//! `server/discover` and a handshake-era client's `initialize`, which also
//! opens its sealed session (holding no upstream session: the members serve
//! each of its requests on sessions of their own).

use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{Value, json};

use super::Asking;
use crate::auth::Principal;
use crate::bridge::param_headers::SentParams;
use crate::bridge::reply::Reply;
use crate::bridge::sessions::{ClientSession, SessionClaims, stateless_envelope};
use crate::federate::merge::{self, MEMBERS_META, MemberResult};
use crate::gateway::Gateway;
use crate::protocol::{Id, ModernMethod, Request, Response, Revision};
use crate::router::Backend;
use crate::router::federation::Federation;
use crate::router::gateway_client_info;
use crate::translate::up;

impl Asking<'_> {
    /// The federation's `server/discover` result: every member's, merged.
    pub(super) async fn discover(&self, id: &Id) -> Value {
        let members = self.federation.members();
        let answers =
            join_all((0..members.len()).map(|member| self.answer(member, id, ModernMethod::Discover, None))).await;
        let results: Vec<Option<Value>> = answers
            .into_iter()
            .zip(members)
            .map(|(answer, member)| match answer {
                Ok(result) => Some(result),
                Err(error) => {
                    self.left_out(member.pool.name(), &error);
                    None
                }
            })
            .collect();
        let member_results: Vec<MemberResult<'_>> = members
            .iter()
            .zip(&results)
            .map(|(member, result)| MemberResult {
                name: member.pool.name(),
                result: result.as_ref(),
            })
            .collect();
        let mut result = merge::discover(&member_results, &gateway_client_info());
        if let Some(object) = result.as_object_mut() {
            // What the federation offers changes as members come and go.
            object.insert("resultType".into(), Value::from("complete"));
            object.insert("ttlMs".into(), Value::from(0));
            object.insert("cacheScope".into(), Value::from("private"));
        }
        result
    }

    /// A legacy `initialize` result: the merged handshake in the `negotiated` revision.
    async fn initialize(&self, id: &Id, negotiated: Revision) -> Value {
        let discover = self.discover(id).await;
        let mut result = up::initialize_from_discover(&discover, negotiated, &gateway_client_info());
        let members = discover.get("_meta").and_then(|m| m.get(MEMBERS_META)).cloned();
        if let Some(object) = result.as_object_mut() {
            if let Some(members) = members {
                object.insert("_meta".into(), json!({ MEMBERS_META: members }));
            }
            if let Some(capabilities) = object.get_mut("capabilities").and_then(Value::as_object_mut) {
                // The session's GET stream carries the list changes any member announces.
                for kind in ["tools", "prompts", "resources"] {
                    let announced = discover["capabilities"][kind]["listChanged"] == Value::Bool(true);
                    if let (true, Some(flags)) = (announced, capabilities.get_mut(kind).and_then(Value::as_object_mut))
                    {
                        flags.insert("listChanged".into(), Value::Bool(true));
                    }
                }
                // `resources/subscribe` is kept as a listen joined across the owners
                // (`subscriptions`): offered when any member can honour one.
                let subscribable = discover["capabilities"]["resources"]["subscribe"] == Value::Bool(true);
                if let Some(resources) = capabilities.get_mut("resources").and_then(Value::as_object_mut) {
                    match subscribable {
                        true => resources.insert("subscribe".into(), Value::Bool(true)),
                        false => resources.remove("subscribe"),
                    };
                }
            }
        }
        result
    }
}

/// A legacy client's `initialize` on a federated path: the merged handshake,
/// and a sealed session naming the federation (no upstream session of its own).
pub(super) async fn initialize_session(
    gateway: &Gateway,
    federation: &Arc<Federation>,
    request: Request,
    principal: &Principal,
) -> Reply {
    if let Some(refusal) = crate::bridge::legacy::oversized_claims(gateway, &request) {
        return refusal;
    }
    let params = request.params.as_ref();
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    let negotiated = Revision::negotiate_legacy(requested);
    // The members never ask this client anything: their requests carry no capabilities.
    let envelope = stateless_envelope(&json!({}), &Value::Null);
    let asking = Asking {
        gateway,
        federation,
        prefixes: federation.prefixes(),
        envelope: &envelope,
        client: None,
        principal,
        session: None,
        sent: SentParams::NoHeaders,
    };
    let result = asking.initialize(&request.id, negotiated).await;
    let capabilities = params.and_then(|p| p.get("capabilities")).cloned().unwrap_or_default();
    let client_info = params.and_then(|p| p.get("clientInfo")).cloned().unwrap_or_default();
    let claims = SessionClaims {
        rev: negotiated.as_str().to_owned(),
        caps: capabilities.clone(),
        info: client_info.clone(),
        prn: principal.as_str().to_owned(),
        ups: federation.name().to_owned(),
        usid: None,
        mem: None,
        own: None,
        exp: 0,
    };
    let id = gateway.sessions().mint(claims, false);
    let session = ClientSession::open_federated(
        id,
        negotiated,
        Backend::Federated(federation.clone()),
        stateless_envelope(&capabilities, &client_info),
    );
    tracing::info!(federation = %federation.name(), revision = %negotiated, "legacy client session opened on a federation");
    Reply::Initialized(Response::result(request.id, result).into_message(), session)
}
