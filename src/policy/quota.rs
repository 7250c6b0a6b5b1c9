//! Quotas between principals: when a table of things held by principals
//! (legacy client sessions, pooled partitions, ...) is asked for one more,
//! which one goes so that the asker stays within its own quota and no
//! principal takes the whole table from the others. Pure: the caller lists
//! what is held and closes what is chosen.

/// One thing held, as the quota sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held<'a> {
    /// Whose it is.
    pub(crate) principal: &'a str,
    /// Whether it may be closed now (nothing in flight on it).
    pub(crate) idle: bool,
    /// When it was last used (any monotonic unit); the least recent goes first.
    pub(crate) last_used: u64,
}

/// What to do before `asking` may hold one more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// There is room.
    Free,
    /// Close the thing at this index, then ask again.
    Evict(usize),
    /// Nothing may be closed: refuse the new one.
    Full,
}

/// The room for one more thing held by `asking`, among `held`: at most
/// `per_principal` each and `total` in all.
///
/// At its own quota, the asker's least recently used idle thing goes (never
/// another principal's). When the table is full, the least recently used idle
/// thing of the principal holding the most goes (the asker's own when it
/// holds the most), so one principal filling the table gives way first.
pub(crate) fn make_room(held: &[Held<'_>], asking: &str, per_principal: usize, total: usize) -> Room {
    let own = held.iter().filter(|h| h.principal == asking).count();
    if own >= per_principal {
        return least_recent_idle(held, |h| h.principal == asking).map_or(Room::Full, Room::Evict);
    }
    if held.len() < total {
        return Room::Free;
    }
    // Principals by what they hold, most first; the first with something idle gives way.
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for h in held {
        match counts.iter_mut().find(|(p, _)| *p == h.principal) {
            Some((_, n)) => *n += 1,
            None => counts.push((h.principal, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    counts
        .iter()
        .find_map(|(principal, _)| least_recent_idle(held, |h| h.principal == *principal))
        .map_or(Room::Full, Room::Evict)
}

fn least_recent_idle(held: &[Held<'_>], mine: impl Fn(&Held<'_>) -> bool) -> Option<usize> {
    held.iter()
        .enumerate()
        .filter(|(_, h)| h.idle && mine(h))
        .min_by_key(|(_, h)| h.last_used)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(spec: &[(&'static str, bool, u64)]) -> Vec<Held<'static>> {
        spec.iter()
            .map(|&(principal, idle, last_used)| Held {
                principal,
                idle,
                last_used,
            })
            .collect()
    }

    #[test]
    fn room_is_made_inside_the_principal_that_fills_up() {
        // (what, held, asking, per principal, total, expected)
        type Case = (&'static str, Vec<Held<'static>>, &'static str, usize, usize, Room);
        let table: Vec<Case> = vec![
            ("an empty table", held(&[]), "a", 2, 4, Room::Free),
            (
                "under both quotas",
                held(&[("a", true, 1), ("b", true, 2)]),
                "a",
                2,
                4,
                Room::Free,
            ),
            (
                "at its own quota: its least recently used idle one, not b's older one",
                held(&[("b", true, 0), ("a", true, 5), ("a", true, 3)]),
                "a",
                2,
                4,
                Room::Evict(2),
            ),
            (
                "at its own quota with nothing idle: refused, b untouched",
                held(&[("b", true, 0), ("a", false, 5), ("a", false, 3)]),
                "a",
                2,
                4,
                Room::Full,
            ),
            (
                "the table full: the principal holding the most gives way",
                held(&[("a", true, 0), ("b", true, 7), ("b", true, 4), ("b", true, 9)]),
                "c",
                3,
                4,
                Room::Evict(2),
            ),
            (
                "the table full and the biggest holder busy: the next one gives way",
                held(&[("a", true, 0), ("b", false, 7), ("b", false, 4), ("b", false, 9)]),
                "c",
                3,
                4,
                Room::Evict(0),
            ),
            (
                "the table full and everything busy",
                held(&[("a", false, 0), ("b", false, 7)]),
                "c",
                3,
                2,
                Room::Full,
            ),
            (
                "a tie on counts: the name decides, so the choice is stable",
                held(&[("b", true, 1), ("a", true, 2)]),
                "c",
                3,
                2,
                Room::Evict(1),
            ),
        ];
        for (what, held, asking, per_principal, total, expected) in table {
            assert_eq!(make_room(&held, asking, per_principal, total), expected, "{what}");
        }
    }
}
