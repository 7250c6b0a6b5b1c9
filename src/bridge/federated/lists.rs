//! A federated list: one page of every member still listing, merged under
//! one sealed cursor ([`crate::federate::cursor`], [`crate::federate::page`]),
//! and the exposed names of tools and prompts, learned from complete listings
//! of every member and kept by the federation until a member's list changes.
//! Learning them is single-flight, and a name they lack makes them learned
//! again at most once per interval ([`crate::router::relist`]), as for a
//! single upstream's tool annotations.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use serde_json::{Value, json};

use super::Asking;
use crate::federate::cursor::{Opened, Positions};
use crate::federate::names::{Names, PrefixMode};
use crate::federate::page::MergedPage;
use crate::federate::route::{self, ListShape, NameKind, StaleNames};
use crate::protocol::{ErrorObject, Id, ModernMethod, Request};
use crate::router::relist::Turn;
use crate::translate::cache::{Audience, Watch};

/// Most pages of one member read to learn its names.
const MAX_NAME_PAGES: usize = 64;

impl Asking<'_> {
    /// One page of a federated list: a page of every member still listing.
    pub(super) async fn list(&self, shape: ListShape, request: &Request) -> Result<Value, ErrorObject> {
        let members = self.federation.members();
        let sealer = self.gateway.sessions().sealer();
        let cursor = request.params.as_ref().and_then(|p| p.get("cursor"));
        let cursor = match cursor {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(_) => return Err(ErrorObject::invalid_params("Invalid params: cursor must be a string")),
        };
        let mut positions = match Positions::open(sealer, cursor, members.len(), Instant::now()) {
            Opened::First(positions) | Opened::Resumed(positions) => positions,
            Opened::Invalid => return Err(ErrorObject::invalid_params("Invalid params: unknown cursor")),
        };
        let fetch: Vec<(usize, Option<String>)> = positions
            .to_fetch()
            .into_iter()
            .map(|(member, at)| (member, at.map(str::to_owned)))
            .collect();
        let pages = join_all(
            fetch
                .iter()
                .map(|(member, at)| self.page(*member, shape, at.as_deref(), &request.id)),
        )
        .await;
        let mut names = self.names_for(shape, Need::Kept).await?;
        let stale = pages.iter().zip(&fetch).any(|(page, (member, _))| {
            page.as_ref().is_ok_and(|page| {
                self.naming(names.as_deref())
                    .expose_items(shape, *member, page)
                    .is_err()
            })
        });
        if stale {
            names = self.names_for(shape, Need::Fresh).await?;
        }
        let naming = self.naming(names.as_deref());
        let mut merged = MergedPage::default();
        for ((member, _), page) in fetch.iter().zip(pages) {
            let name = members.get(*member).map_or("", |m| m.pool.name());
            let exposed = page.and_then(|page| {
                let items = naming.expose_items(shape, *member, &page).map_err(|StaleNames| {
                    ErrorObject::internal("its names changed while the federation listed them")
                })?;
                Ok((page, items))
            });
            match exposed {
                Ok((page, items)) => {
                    merged.add(&page, items);
                    positions.answered(*member, next_cursor(&page));
                }
                Err(error) => {
                    self.left_out(name, &error);
                    merged.leave_out(name, error);
                    positions.failed(*member);
                }
            }
        }
        let mut result = merged.into_result(shape, positions.next_cursor(sealer))?;
        // Members' hints merged, then bounded by the federation's own rule: a list
        // filtered per caller, or fetched with callers' own credentials, is private.
        let audience = match self.federation.per_principal() || self.gateway.auth().filters_lists() {
            true => Audience::PerCaller,
            false => Audience::Unproven,
        };
        let policy = self.federation.cache_policy().with_facts(Watch::Blind, audience);
        if let Some(object) = result.as_object_mut() {
            policy.apply(object);
        }
        Ok(result)
    }

    /// One page of member `member`'s list `shape` at its own cursor `at`.
    async fn page(&self, member: usize, shape: ListShape, at: Option<&str>, id: &Id) -> Result<Value, ErrorObject> {
        let params = at.map(|cursor| json!({ "cursor": cursor }));
        let page = self.answer(member, id, list_method(shape), params).await?;
        // The one place a member's list comes back: compared with its pins under its own names.
        let name = self.federation.members().get(member).map_or("", |m| m.pool.name());
        super::super::pins::member_page(self.gateway, name, shape, at.is_some(), page)
    }

    /// The exposed names a list of `shape` needs: none for resources or under
    /// `always`; else as [`Asking::names`] gives them for `need`.
    async fn names_for(&self, shape: ListShape, need: Need) -> Result<Option<Arc<Names>>, ErrorObject> {
        match shape {
            ListShape::Named(kind) if self.federation.mode() != PrefixMode::Always => {
                self.names(kind, need).await.map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The exposed names of `kind`, for a request that needs them as `need`
    /// says: the names kept, or names learned anew from complete listings of
    /// every member. One request learns them at a time; those arriving
    /// meanwhile wait and take what it learned.
    pub(super) async fn names(&self, kind: NameKind, mut need: Need) -> Result<Arc<Names>, ErrorObject> {
        let relists = self.federation.relists(kind);
        loop {
            match (need, self.federation.names(kind)) {
                (Need::Kept, Some(Ok(names))) => return Ok(names),
                (Need::Kept | Need::Unknown, Some(kept)) if relists.relisted_recently() => {
                    return kept.map_err(ErrorObject::internal);
                }
                _ => {}
            }
            match relists.turn().await {
                // Learned while this request waited: as fresh as they can be.
                Turn::Relisted => need = Need::Kept,
                Turn::Relist(relisting) => {
                    let learned = self.learn_names(kind).await;
                    relisting.finished();
                    return learned;
                }
            }
        }
    }

    /// The exposed names of `kind` learned from complete listings of every
    /// member, and kept (or why they could not be).
    async fn learn_names(&self, kind: NameKind) -> Result<Arc<Names>, ErrorObject> {
        let members = self.federation.members();
        let listed = join_all((0..members.len()).map(|member| self.every_name(member, kind))).await;
        let unlisted: Vec<String> = listed
            .iter()
            .zip(members)
            .filter(|((_, complete), _)| matches!(complete, Listing::Partial))
            .map(|(_, member)| member.pool.name().to_owned())
            .collect();
        let lists: Vec<Vec<String>> = listed.into_iter().map(|(names, _)| names).collect();
        let names = route::build_names(self.federation.mode(), self.prefixes(), &lists)
            .map(Arc::new)
            .inspect_err(|collision| {
                tracing::error!(federation = %self.federation.name(), %collision, "members' names collide");
            });
        self.federation.keep_names(kind, names.clone(), unlisted);
        names.map_err(ErrorObject::internal)
    }

    /// Every name member `member` lists of `kind`; what it listed before
    /// failing (nothing, if it is down), then said [`Listing::Partial`].
    async fn every_name(&self, member: usize, kind: NameKind) -> (Vec<String>, Listing) {
        let shape = ListShape::Named(kind);
        let id = Id::number(0);
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_NAME_PAGES {
            let Ok(page) = self.page(member, shape, cursor.as_deref(), &id).await else {
                return (names, Listing::Partial);
            };
            names.extend(route::item_names(shape, &page));
            cursor = next_cursor(&page);
            if cursor.is_none() {
                return (names, Listing::Complete);
            }
        }
        (names, Listing::Complete) // as many pages as a listing may take
    }
}

/// Why a request needs a federation's exposed names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Need {
    /// The names kept; learned when none are, or when they could not be built
    /// and the pace allows another try.
    Kept,
    /// A request named something the kept names lack (it may be new): learned
    /// again, at most once per [`crate::router::relist::MIN_RELIST_INTERVAL`];
    /// until then the kept names answer.
    Unknown,
    /// A member listed a name the kept names lack (they are stale), or a check
    /// wants them as the members have them now: learned again.
    Fresh,
}

/// Whether a member's names were all listed.
enum Listing {
    /// To its last page.
    Complete,
    /// It failed before its last page.
    Partial,
}

fn list_method(shape: ListShape) -> ModernMethod {
    match shape {
        ListShape::Named(kind) => kind.list_method(),
        ListShape::Resources => ModernMethod::ResourcesList,
        ListShape::Templates => ModernMethod::ResourceTemplatesList,
    }
}

fn next_cursor(page: &Value) -> Option<String> {
    page.get("nextCursor").and_then(Value::as_str).map(str::to_owned)
}
