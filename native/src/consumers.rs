//! Consumer ids as small integers, their tie-break order and capacities, and the pool that hands out new
//! ones: h(j,k) of Eq. 14 with f(k) of Eq. 12, as `app.core.bins.ConsumerPool`.

use crate::bins::F;
use crate::intern::{Interner, NONE};
use crate::natural;

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
        }
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
        if self.opened.len() < consumers.len() {
            self.opened.resize(consumers.len(), false);
        }
        self.opened[c as usize] = true;
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
