//! Consumer ids as small integers, their tie-break order and capacities, and the pool that hands out new
//! ones: h(j,k) of Eq. 14 with f(k) of Eq. 12, as `app.core.bins.ConsumerPool`.

use crate::bins::F;
use crate::intern::{Interner, NONE};
use crate::natural;
use crate::zones::{Zones, NO_RACK};

/// Every consumer id of one request: the known ones (previous consumers, members) first, then the ids the
/// pool mints (c<n>, surplus-<n>). `tie[c]` orders ids as the natural order does.
pub struct Consumers {
    pub ids: Interner,
    pub tie: Vec<u64>,
    pub cap: Vec<f64>,
    pub is_member: Vec<bool>,
    pub capacity: f64,
    known: usize,
    /// The known ids in natural order: a minted id's tie is its place among them, then its number.
    sorted_known: Vec<u32>,
}

impl Consumers {
    /// `ids`: the known ids; `own`: each one's capacity (C when it has none of its own).
    pub fn new(ids: Interner, own: Vec<f64>, members: &[u32], capacity: f64) -> Self {
        let known = ids.len();
        let mut sorted_known: Vec<u32> = (0..known as u32).collect();
        sorted_known.sort_by(|&a, &b| natural::compare(ids.name(a), ids.name(b)));
        let mut tie = vec![0u64; known];
        for (i, &c) in sorted_known.iter().enumerate() {
            tie[c as usize] = ((2 * i as u64) + 1) << 32;
        }
        let mut is_member = vec![false; known];
        for &m in members {
            is_member[m as usize] = true;
        }
        Consumers {
            ids,
            tie,
            cap: own,
            is_member,
            capacity,
            known,
            sorted_known,
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn known(&self) -> usize {
        self.known
    }

    /// The id `prefix<n>`: a known one if it is known, else a new entry of capacity C.
    pub fn minted(&mut self, prefix: &str, n: u64) -> u32 {
        let name = format!("{prefix}{n}");
        if let Some(c) = self.ids.get(&name) {
            return c;
        }
        self.tie.push(self.minted_tie_of(&name, n));
        self.cap.push(self.capacity);
        self.is_member.push(false);
        self.ids.id(&name)
    }

    /// The tie of `prefix<n>` without adding it (First Fit's universe).
    pub fn minted_tie(&self, prefix: &str, n: u64) -> u64 {
        let name = format!("{prefix}{n}");
        match self.ids.get(&name) {
            Some(c) => self.tie[c as usize],
            None => self.minted_tie_of(&name, n),
        }
    }

    /// A new id's tie: after the known ids below it, then by its number (ids of one prefix, in natural order).
    fn minted_tie_of(&self, name: &str, n: u64) -> u64 {
        let below = self.sorted_known.partition_point(|&k| {
            natural::compare(self.ids.name(k), name) == std::cmp::Ordering::Less
        });
        ((2 * below as u64) << 32) | n
    }

    pub fn sort(&self, ids: &mut [u32]) {
        ids.sort_unstable_by_key(|&c| self.tie[c as usize]);
    }
}

pub const MINTED_PREFIX: &str = "c";
pub const SURPLUS_PREFIX: &str = "surplus-";

pub struct Pool {
    /// Members by capacity, largest first, then natural order; None: any id (autoscale).
    pub members: Option<Vec<u32>>,
    opened: Vec<bool>,
    next: usize,
    minted: u64,
    /// The zone mode's book (a zone-aware request, the Best and Worst Fit rules), `app.core.bins.ZonePool`.
    zone: Option<ZoneBook>,
}

/// Where the pool's consumers run: each one's rack (known, or chosen when opened in one), the open consumers
/// per rack, and the known consumers of each rack not opened yet (in the pool's order).
struct ZoneBook {
    racks: Vec<i32>,
    in_rack: Vec<u32>,
    known_in_rack: Vec<Vec<u32>>,
    rack_next: Vec<usize>,
    fresh: u64,
}

impl Pool {
    pub fn new(consumers: &Consumers, members: Option<&[u32]>) -> Self {
        let members = members.map(|m| {
            let mut m = m.to_vec();
            consumers.sort(&mut m);
            m.sort_by_key(|&c| std::cmp::Reverse(F(consumers.cap[c as usize])));
            m
        });
        Pool {
            members,
            opened: vec![false; consumers.len()],
            next: 0,
            minted: 0,
            zone: None,
        }
    }

    /// The zone mode of the pool: it also opens a consumer in a given rack (`open_in`) or in one of a
    /// partition's racks (`open_for`). `previous`: the previous consumers.
    pub fn zoned(mut self, consumers: &Consumers, zones: &Zones, previous: &[u32]) -> Self {
        let known = match &self.members {
            Some(members) => members.clone(),
            None => {
                let mut previous = previous.to_vec();
                consumers.sort(&mut previous);
                previous
            }
        };
        let mut known_in_rack = vec![vec![]; zones.names.len()];
        let mut racks = vec![NO_RACK; consumers.len()];
        for c in known {
            let rack = zones.rack_of(c);
            if rack != NO_RACK {
                known_in_rack[rack as usize].push(c);
            }
        }
        for (c, rack) in racks.iter_mut().enumerate() {
            *rack = zones.rack_of(c as u32);
        }
        self.zone = Some(ZoneBook {
            racks,
            in_rack: vec![0; zones.names.len()],
            rack_next: vec![0; zones.names.len()],
            known_in_rack,
            fresh: 0,
        });
        self
    }

    fn book(&mut self) -> &mut ZoneBook {
        self.zone.as_mut().expect("the pool's zone mode")
    }

    /// A consumer's rack in zone mode: known, or chosen when it was opened (NO_RACK: none).
    pub fn rack_of(&self, c: u32) -> i32 {
        self.zone
            .as_ref()
            .and_then(|z| z.racks.get(c as usize).copied())
            .unwrap_or(NO_RACK)
    }

    fn set_rack(&mut self, c: u32, rack: i32) {
        let book = self.book();
        if book.racks.len() <= c as usize {
            book.racks.resize(c as usize + 1, NO_RACK);
        }
        book.racks[c as usize] = rack;
    }

    /// A new consumer's rack, chosen again (`SearchState.rerack`).
    pub fn move_rack(&mut self, c: u32, rack: i32) {
        let old = self.rack_of(c);
        let book = self.book();
        if old != NO_RACK {
            book.in_rack[old as usize] -= 1;
        }
        book.in_rack[rack as usize] += 1;
        self.set_rack(c, rack);
    }

    /// The next known consumer of `rack` not open yet (members: the largest first).
    fn free_in(&mut self, rack: u32) -> Option<u32> {
        let opened = std::mem::take(&mut self.opened);
        let book = self.book();
        let queue = &book.known_in_rack[rack as usize];
        let mut i = book.rack_next[rack as usize];
        while i < queue.len() && opened.get(queue[i] as usize) == Some(&true) {
            i += 1;
        }
        book.rack_next[rack as usize] = i;
        let found = queue.get(i).copied();
        self.opened = opened;
        found
    }

    fn can_open(&self, consumers: &Consumers, c: u32) -> bool {
        !self.is_open(c) && self.allowed(consumers, c)
    }

    /// Whether a consumer can be opened in one of `racks`.
    pub fn can_open_for(&mut self, racks: &[u32]) -> bool {
        if self.members.is_none() {
            return !racks.is_empty();
        }
        racks.iter().any(|&r| self.free_in(r).is_some())
    }

    /// A consumer opened in one of `racks`, or None: `preferred` if it runs there and is not open; else with
    /// members the largest free member of those racks (ties: the lowest id), without members one in the rack
    /// with the fewest open consumers (ties: the first by name).
    pub fn open_for(
        &mut self,
        consumers: &mut Consumers,
        racks: &[u32],
        preferred: u32,
    ) -> Option<u32> {
        if racks.is_empty() {
            return None;
        }
        let known = if preferred == NONE {
            NO_RACK
        } else {
            self.rack_of(preferred)
        };
        let rack = if known >= 0
            && racks.contains(&(known as u32))
            && self.can_open(consumers, preferred)
        {
            known as u32
        } else if self.members.is_some() {
            let mut best: Option<(u32, u32)> = None;
            for &r in racks {
                if let Some(c) = self.free_in(r) {
                    let better = best.is_none_or(|(b, _)| {
                        let (cc, cb) = (consumers.cap[c as usize], consumers.cap[b as usize]);
                        F(cc) > F(cb)
                            || (cc == cb && consumers.tie[c as usize] < consumers.tie[b as usize])
                    });
                    if better {
                        best = Some((c, r));
                    }
                }
            }
            best?.1
        } else {
            let in_rack = &self.zone.as_ref().expect("the pool's zone mode").in_rack;
            *racks
                .iter()
                .min_by_key(|&&r| (in_rack[r as usize], r))
                .expect("racks are not empty")
        };
        self.open_in(consumers, rack, preferred)
    }

    /// A consumer opened in `rack`: `preferred` (a previous consumer there) if it may, else the known one of
    /// that rack not open yet or (without members) a new id, the lower of the two; None when no member is free
    /// there.
    pub fn open_in(&mut self, consumers: &mut Consumers, rack: u32, preferred: u32) -> Option<u32> {
        let chosen = if preferred != NONE
            && self.rack_of(preferred) == rack as i32
            && self.can_open(consumers, preferred)
        {
            preferred
        } else {
            let mut known = self.free_in(rack);
            if self.members.is_none() {
                let fresh = self.fresh_id(consumers);
                if known.is_none_or(|k| consumers.tie[fresh as usize] < consumers.tie[k as usize]) {
                    known = Some(fresh);
                }
            }
            known?
        };
        self.mark_open(consumers, chosen);
        self.set_rack(chosen, rack as i32);
        self.book().in_rack[rack as usize] += 1;
        Some(chosen)
    }

    /// The lowest c<n> that is neither open nor a known consumer.
    fn fresh_id(&mut self, consumers: &mut Consumers) -> u32 {
        loop {
            let n = self.book().fresh;
            let c = consumers.minted(MINTED_PREFIX, n);
            if !self.is_open(c) && (c as usize) >= consumers.known() {
                return c;
            }
            self.book().fresh += 1;
        }
    }

    fn mark_open(&mut self, consumers: &Consumers, c: u32) {
        if self.opened.len() < consumers.len() {
            self.opened.resize(consumers.len(), false);
        }
        self.opened[c as usize] = true;
    }

    pub fn allowed(&self, consumers: &Consumers, c: u32) -> bool {
        self.members.is_none() || consumers.is_member[c as usize]
    }

    fn is_open(&self, c: u32) -> bool {
        (c as usize) < self.opened.len() && self.opened[c as usize]
    }

    /// h(j,k): the preferred (previous) consumer if allowed and not open yet, else f(k).
    pub fn open(&mut self, consumers: &mut Consumers, preferred: u32) -> u32 {
        let c = if preferred == NONE
            || self.is_open(preferred)
            || !self.allowed(consumers, preferred)
        {
            self.lowest_unused(consumers)
        } else {
            preferred
        };
        self.mark_open(consumers, c);
        if self.zone.is_some() {
            let rack = self.rack_of(c);
            if rack != NO_RACK {
                self.book().in_rack[rack as usize] += 1;
            }
        }
        c
    }

    /// f(k), Eq. 12.
    fn lowest_unused(&mut self, consumers: &mut Consumers) -> u32 {
        let prefix = if let Some(members) = &self.members {
            while self.next < members.len() && self.is_open(members[self.next]) {
                self.next += 1;
            }
            if self.next < members.len() {
                return members[self.next];
            }
            SURPLUS_PREFIX
        } else {
            MINTED_PREFIX
        };
        loop {
            let c = consumers.minted(prefix, self.minted);
            if !self.is_open(c) && !consumers.is_member[c as usize] {
                return c;
            }
            self.minted += 1;
        }
    }
}
