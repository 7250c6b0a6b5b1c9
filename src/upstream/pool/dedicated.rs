//! Dedicated sessions: one upstream session of its own per legacy client,
//! opened on a member in turn, or resumed from another replica (HTTP only).
//! They are never pooled: the client session that asked owns them.

use std::sync::Arc;

use serde_json::Value;

use super::Upstream;
use crate::auth::Principal;
use crate::protocol::Revision;
use crate::upstream::credentials::Subject;
use crate::upstream::error::UpstreamError;
use crate::upstream::member::Target;
use crate::upstream::session::{UnsolicitedRequests, UpstreamSession};
use crate::upstream::transport::Link;
use crate::upstream::transport::streamable_http::HttpLink;

impl Upstream {
    /// A session of its own for one legacy client of `principal`, initialized with
    /// that client's params.
    pub(crate) async fn open_dedicated(
        self: &Arc<Self>,
        initialize_params: Value,
        principal: &Principal,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let share = self.share_for(principal.as_str())?;
        let member = self.choose_member();
        let subject = Subject::of(principal);
        let session = self
            .open(member, initialize_params, UnsolicitedRequests::Forward, subject)
            .await?;
        session.hold_share(share);
        Ok(session)
    }

    /// Resumes a dedicated HTTP upstream session that another replica opened on
    /// the member `endpoint`. `None` for stdio upstreams, whose sessions cannot
    /// move between processes.
    pub(crate) fn resume_dedicated(
        &self,
        endpoint: Option<&str>,
        upstream_session_id: &str,
        revision: Revision,
    ) -> Option<Arc<UpstreamSession>> {
        let member = self
            .members
            .iter()
            .find(|m| endpoint.is_none_or(|e| m.label == e))
            .or_else(|| self.members.first())?;
        let Target::Http(endpoint) = &member.target else {
            return None;
        };
        let link = HttpLink::resumed(endpoint.clone(), self.name.clone(), upstream_session_id)?;
        let health = Some(member.health.clone());
        let session = UpstreamSession::new(
            self.name.clone(),
            Link::Http(Box::new(link)),
            UnsolicitedRequests::Forward,
            health,
        );
        session.resume(revision);
        Some(session)
    }
}
