//! Merged pagination: one page of a federated list is one page of every member
//! still listing, and its `nextCursor` is sealed ([`crate::seal`], purpose
//! [`Purpose::ListCursor`]) around each member's position, so a client can
//! neither read nor forge where a member stands. A member that fails is left
//! out from then on (the caller says so in the page's `_meta`); the walk ends
//! when every member is done.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::seal::{Purpose, Sealer};

/// Where one member's listing stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Position {
    /// Not listed yet: its first page is next.
    Start,
    /// Its page at this (the member's own) cursor is next.
    At(String),
    /// Listed to its end, or left out after a failure.
    Done,
}

/// Every member's position in one federated listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Positions(Vec<Position>);

/// What the client's cursor said.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    /// No cursor: the first page.
    First(Positions),
    /// A cursor eragate sealed for this many members.
    Resumed(Positions),
    /// Tampered, foreign, expired with its key, or for another set of members.
    Invalid,
}

impl Positions {
    /// The start of a listing of `members` members.
    pub(crate) fn first(members: usize) -> Positions {
        Positions(vec![Position::Start; members])
    }

    /// The client's `cursor` (if any) for a listing of `members` members.
    pub(crate) fn open(sealer: &Sealer, cursor: Option<&str>, members: usize, now: Instant) -> Opened {
        let Some(cursor) = cursor else {
            return Opened::First(Positions::first(members));
        };
        let positions = sealer
            .open(Purpose::ListCursor, cursor, now)
            .and_then(|plain| serde_json::from_slice::<Positions>(&plain).ok());
        match positions {
            Some(positions) if positions.0.len() == members => Opened::Resumed(positions),
            _ => Opened::Invalid,
        }
    }

    /// The members to ask for this page, each with its own cursor (`None`: its first page).
    pub(crate) fn to_fetch(&self) -> Vec<(usize, Option<&str>)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(member, position)| match position {
                Position::Start => Some((member, None)),
                Position::At(cursor) => Some((member, Some(cursor.as_str()))),
                Position::Done => None,
            })
            .collect()
    }

    /// Member `member` answered with `next` as its `nextCursor`.
    pub(crate) fn answered(&mut self, member: usize, next: Option<String>) {
        if let Some(position) = self.0.get_mut(member) {
            *position = next.map_or(Position::Done, Position::At);
        }
    }

    /// Member `member` failed: it is left out of the rest of the listing.
    pub(crate) fn failed(&mut self, member: usize) {
        self.answered(member, None);
    }

    /// The sealed `nextCursor` of this page; `None` when every member is done.
    pub(crate) fn next_cursor(&self, sealer: &Sealer) -> Option<String> {
        if self.0.iter().all(|p| *p == Position::Done) {
            return None;
        }
        // Serializing a vector of enums of strings cannot fail.
        let plain = serde_json::to_vec(self).unwrap_or_default();
        Some(sealer.seal(Purpose::ListCursor, &plain))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::SealKey;
    use proptest::prelude::*;

    /// A member's listing: its items, `page` per page, its cursor the offset as text.
    fn member_page(items: &[u32], page: usize, cursor: Option<&str>) -> Result<(Vec<u32>, Option<String>), ()> {
        let from: usize = cursor.map_or(Ok(0), |c| c.parse().map_err(|_| ()))?;
        let to = (from + page.max(1)).min(items.len());
        let next = (to < items.len()).then(|| to.to_string());
        Ok((items.get(from..to).ok_or(())?.to_vec(), next))
    }

    /// Walks a whole federated listing as a client would, through sealed cursors;
    /// `failing` members fail every request. Returns the items in the order served.
    fn walk(sealer: &Sealer, members: &[(Vec<u32>, usize)], failing: &[bool]) -> Vec<u32> {
        let now = Instant::now();
        let mut served = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let mut positions = match Positions::open(sealer, cursor.as_deref(), members.len(), now) {
                Opened::First(p) | Opened::Resumed(p) => p,
                Opened::Invalid => panic!("eragate's own cursor did not open"),
            };
            let fetch: Vec<(usize, Option<String>)> = positions
                .to_fetch()
                .into_iter()
                .map(|(m, c)| (m, c.map(str::to_owned)))
                .collect();
            for (member, at) in fetch {
                let (items, page) = &members[member];
                match (failing[member], member_page(items, *page, at.as_deref())) {
                    (false, Ok((items, next))) => {
                        served.extend(items);
                        positions.answered(member, next);
                    }
                    _ => positions.failed(member),
                }
            }
            cursor = positions.next_cursor(sealer);
            if cursor.is_none() {
                return served;
            }
        }
        panic!("the listing never ended");
    }

    proptest! {
        #[test]
        fn every_item_exactly_once(
            members in proptest::collection::vec((0usize..40, 1usize..7), 1..5),
            failing in proptest::collection::vec(any::<bool>(), 5),
        ) {
            let sealer = Sealer::new(&SealKey::random(), None);
            // Member i's items are i*1000 + 0..n: distinct across members.
            let members: Vec<(Vec<u32>, usize)> = members
                .iter()
                .enumerate()
                .map(|(i, (n, page))| ((0..*n as u32).map(|k| i as u32 * 1000 + k).collect(), *page))
                .collect();
            let mut served = walk(&sealer, &members, &failing);
            let mut expected: Vec<u32> = members
                .iter()
                .enumerate()
                .filter(|(i, _)| !failing[*i])
                .flat_map(|(_, (items, _))| items.clone())
                .collect();
            served.sort_unstable();
            expected.sort_unstable();
            prop_assert_eq!(served, expected);
        }
    }

    #[test]
    fn cursors_are_sealed_and_bound_to_the_members() {
        let sealer = Sealer::new(&SealKey::random(), None);
        let other = Sealer::new(&SealKey::random(), None);
        let now = Instant::now();
        let mut positions = Positions::first(2);
        positions.answered(0, Some("member-page-two".into()));
        let cursor = positions.next_cursor(&sealer).unwrap();
        assert!(
            !cursor.contains("member-page-two"),
            "a member's cursor is not readable: {cursor}"
        );
        assert_eq!(
            Positions::open(&sealer, Some(&cursor), 2, now),
            Opened::Resumed(positions.clone())
        );
        let cases = [
            ("another key", Positions::open(&other, Some(&cursor), 2, now)),
            (
                "another number of members",
                Positions::open(&sealer, Some(&cursor), 3, now),
            ),
            ("not a cursor", Positions::open(&sealer, Some("bogus"), 2, now)),
            (
                "sealed for another purpose",
                Positions::open(&sealer, Some(&sealer.seal(Purpose::Session, b"[\"Done\"]")), 1, now),
            ),
        ];
        for (what, opened) in cases {
            assert_eq!(opened, Opened::Invalid, "{what}");
        }
        positions.answered(1, None);
        positions.answered(0, None);
        assert_eq!(positions.next_cursor(&sealer), None, "every member done: the last page");
    }
}
