//! [`FreeSet`]: the free offsets of one CIDR as a set of disjoint intervals.

use std::collections::BTreeMap;

/// The free offsets (address minus network address) of one CIDR, kept as
/// disjoint, non-adjacent inclusive intervals `start → end` in a `BTreeMap`.
///
/// Taking the next free offset, taking a given offset and giving one back are
/// all `O(log n)` in the number of intervals, never a scan of the address
/// space, so a fresh IPv6 `/64` is one interval. A rotating cursor makes
/// [`FreeSet::take_next`] hand out offsets in ascending order and wrap around,
/// so a released address is reused only after the rest of the range has been
/// handed out (stale conntrack or neighbour entries have time to age out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreeSet {
    free: BTreeMap<u128, u128>,
    cursor: u128,
    count: u128,
}

impl FreeSet {
    /// A set holding every offset of `lo..=hi` (empty when `lo > hi`).
    pub fn new(lo: u128, hi: u128) -> Self {
        let mut set = FreeSet::default();
        if lo <= hi {
            set.free.insert(lo, hi);
            set.count = (hi - lo).saturating_add(1);
            set.cursor = lo;
        }
        set
    }

    /// How many offsets are free (saturating at `u128::MAX` for a whole `/0`).
    pub fn free_count(&self) -> u128 {
        self.count
    }

    /// How many disjoint intervals the set is made of.
    pub fn interval_count(&self) -> usize {
        self.free.len()
    }

    /// True when `off` is free.
    pub fn contains(&self, off: u128) -> bool {
        self.free
            .range(..=off)
            .next_back()
            .is_some_and(|(_, &end)| end >= off)
    }

    /// Takes the first free offset at or after the cursor (wrapping around) and
    /// moves the cursor past it. `None` when nothing is free.
    pub fn take_next(&mut self) -> Option<u128> {
        let cursor = self.cursor;
        let pick = match self.free.range(..=cursor).next_back() {
            Some((_, &end)) if end >= cursor => cursor,
            _ => match self.free.range(cursor..).next() {
                Some((&start, _)) => start,
                None => *self.free.keys().next()?,
            },
        };
        self.take(pick);
        self.cursor = pick.wrapping_add(1);
        Some(pick)
    }

    /// Moves the cursor: the next [`FreeSet::take_next`] looks at `off` first.
    pub fn set_cursor(&mut self, off: u128) {
        self.cursor = off;
    }

    /// Takes `off` if it is free; false when it was not.
    pub fn take(&mut self, off: u128) -> bool {
        let Some((&start, &end)) = self.free.range(..=off).next_back() else {
            return false;
        };
        if end < off {
            return false;
        }
        self.free.remove(&start);
        if start < off {
            self.free.insert(start, off - 1);
        }
        if off < end {
            self.free.insert(off + 1, end);
        }
        self.count -= 1;
        true
    }

    /// Gives `off` back, merging it with its neighbours; false when it was already free.
    ///
    /// The caller guarantees `off` belongs to the range the set was built for.
    pub fn put(&mut self, off: u128) -> bool {
        if self.contains(off) {
            return false;
        }
        let mut start = off;
        let mut end = off;
        if let Some(prev) = off.checked_sub(1)
            && let Some((&s, &e)) = self.free.range(..=prev).next_back()
            && e == prev
        {
            self.free.remove(&s);
            start = s;
        }
        if let Some(next) = off.checked_add(1)
            && let Some(e) = self.free.remove(&next)
        {
            end = e;
        }
        self.free.insert(start, end);
        self.count = self.count.saturating_add(1);
        true
    }

    /// Removes every offset of `lo..=hi` from the set; returns how many were free.
    pub fn remove_range(&mut self, lo: u128, hi: u128) -> u128 {
        if lo > hi {
            return 0;
        }
        let mut hits: Vec<(u128, u128)> = Vec::new();
        if let Some((&s, &e)) = self.free.range(..lo).next_back()
            && e >= lo
        {
            hits.push((s, e));
        }
        hits.extend(self.free.range(lo..=hi).map(|(&s, &e)| (s, e)));
        let mut removed = 0u128;
        for (s, e) in hits {
            self.free.remove(&s);
            if s < lo {
                self.free.insert(s, lo - 1);
            }
            if e > hi {
                self.free.insert(hi + 1, e);
            }
            removed = removed.saturating_add((e.min(hi) - s.max(lo)).saturating_add(1));
        }
        self.count = self.count.saturating_sub(removed);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_next_ascends_and_wraps_past_released() {
        let mut set = FreeSet::new(1, 6);
        assert_eq!(set.take_next(), Some(1));
        assert_eq!(set.take_next(), Some(2));
        assert!(set.put(1));
        // The cursor moves on: 1 is reused only after 3..=6.
        let rest: Vec<_> = (0..4).filter_map(|_| set.take_next()).collect();
        assert_eq!(rest, vec![3, 4, 5, 6]);
        assert_eq!(set.take_next(), Some(1));
        assert_eq!(set.take_next(), None);
        assert_eq!(set.free_count(), 0);
    }

    #[test]
    fn put_merges_neighbours_and_rejects_double_free() {
        let mut set = FreeSet::new(0, 9);
        for off in 0..10 {
            assert!(set.take(off));
        }
        assert_eq!(set.interval_count(), 0);
        assert!(set.put(3));
        assert!(set.put(5));
        assert_eq!(set.interval_count(), 2);
        assert!(set.put(4));
        assert_eq!(set.interval_count(), 1);
        assert!(!set.put(4));
        assert_eq!(set.free_count(), 3);
        assert!(!set.take(2));
        assert!(set.take(4));
        assert_eq!(set.interval_count(), 2);
    }

    #[test]
    fn remove_range_splits_and_counts() {
        let mut set = FreeSet::new(0, 99);
        assert!(set.take(50));
        assert_eq!(set.remove_range(40, 60), 20);
        assert_eq!(set.free_count(), 79);
        assert!(set.contains(39) && !set.contains(40) && !set.contains(60) && set.contains(61));
        assert_eq!(set.remove_range(200, 300), 0);
        assert_eq!(set.remove_range(0, 99), 79);
        assert_eq!(set.take_next(), None);
    }

    #[test]
    fn huge_range_is_one_interval() {
        let mut set = FreeSet::new(1, u128::from(u64::MAX));
        assert_eq!(set.take_next(), Some(1));
        assert!(set.take(1 << 40));
        assert_eq!(set.interval_count(), 2);
        assert_eq!(set.free_count(), u128::from(u64::MAX) - 2);
        let mut full = FreeSet::new(0, u128::MAX);
        assert_eq!(full.free_count(), u128::MAX);
        assert!(full.take(u128::MAX));
        assert!(full.put(u128::MAX));
        assert!(full.contains(u128::MAX));
    }
}
