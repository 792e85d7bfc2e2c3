//! Open consumers (bins) of the assignment being built and the Any Fit rules that pick one, as
//! `app.core.bins`: an empty bin accepts any partition; Best Fit takes the bin with the least remaining
//! capacity that still fits, Worst Fit the one with the most, First Fit the first in id order, Next Fit
//! only the last opened; ties to the lowest id.
//!
//! Zone mode (a zone-aware request; Best and Worst Fit): each bin has a rack and the rule keeps one index per
//! rack, the global one holding only the bins without a rack; the rule's choice among every bin is the best of
//! those indices' choices. A partition goes to an open bin of one of its racks by the rule, else into a new
//! bin in one of its racks, else to any open bin by the rule (across zones), else into a new bin h(j,k).

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};

use crate::consumers::{Consumers, Pool, MINTED_PREFIX, SURPLUS_PREFIX};
use crate::intern::NONE;
use crate::zones::{Zones, NO_RACK};

/// A load counts as within a capacity up to this factor (`app.core.model.ROUNDING`).
pub const ROUNDING: f64 = 1.0 + 1e-12;

pub fn within(load: f64, capacity: f64) -> bool {
    load <= capacity * ROUNDING
}

/// An f64 with a total order (rates and loads are finite and never NaN here).
#[derive(Clone, Copy, PartialEq)]
pub struct F(pub f64);
impl Eq for F {}
impl Ord for F {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}
impl PartialOrd for F {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A float's bits made to sort as the float does (for finite values; -0.0 as 0.0, as Python compares them).
pub fn ordered(x: f64) -> u64 {
    let bits = if x == 0.0 { 0 } else { x.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Next,
    First,
    Best,
    Worst,
}

impl Rule {
    /// The rule's name in `app.core.bins.FIT_RULES`.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Next => "next",
            Rule::First => "first",
            Rule::Best => "best",
            Rule::Worst => "worst",
        }
    }
}

pub struct Bins<'a> {
    pub rates: &'a [f64],
    pub previous_owner: &'a [u32],
    pub consumers: &'a mut Consumers,
    pub pool: Pool,
    rule: Rule,
    pub ids: Vec<u32>,
    pub cap: Vec<f64>,
    pub limit: Vec<f64>,
    pub load: Vec<f64>,
    pub held: Vec<Vec<u32>>,
    pub tie: Vec<u64>,
    // Worst Fit: min-heap of (load − limit, tie, bin), stale entries skipped (loads only grow); zone mode: of
    // the bins without a rack.
    heap: BinaryHeap<Reverse<(F, u64, u32)>>,
    // Best Fit: open bins by (residual, tie) as one integer (`ordered`), each with its bin (zone mode: those
    // without a rack).
    by_residual: BTreeMap<u128, u32>,
    entry: Vec<Option<u128>>,
    // First Fit: max-segment tree of residuals over every id the pool can open, in id order.
    universe: Vec<u64>,
    leaves: usize,
    tree: Vec<f64>,
    bin_at: Vec<u32>,
    /// Zone mode: the request's zones, each bin's rack, and the rule's index per rack.
    pub zones: Option<&'a Zones>,
    pub rack: Vec<i32>,
    rack_residual: Vec<BTreeMap<u128, u32>>,
    rack_entry: Vec<Option<u128>>,
    rack_heap: Vec<BinaryHeap<Reverse<(F, u64, u32)>>>,
    /// consumer → its bin (NONE: not open)
    pub bin_of: Vec<u32>,
}

impl<'a> Bins<'a> {
    /// `zones`: the request's, for a zone-aware request (zone mode with the Best and Worst Fit rules).
    pub fn new(
        rule: Rule,
        rates: &'a [f64],
        previous_owner: &'a [u32],
        consumers: &'a mut Consumers,
        members: Option<&[u32]>,
        previous: &[u32],
        zones: Option<&'a Zones>,
    ) -> Self {
        let zones = zones.filter(|_| matches!(rule, Rule::Best | Rule::Worst));
        let mut pool = Pool::new(consumers, members);
        let racks = zones.map_or(0, |z| z.names.len());
        if let Some(zones) = zones {
            pool = pool.zoned(consumers, zones, previous);
        }
        let mut bins = Bins {
            rates,
            previous_owner,
            pool,
            rule,
            ids: vec![],
            cap: vec![],
            limit: vec![],
            load: vec![],
            held: vec![],
            tie: vec![],
            heap: BinaryHeap::new(),
            by_residual: BTreeMap::new(),
            entry: vec![],
            universe: vec![],
            leaves: 0,
            tree: vec![],
            bin_at: vec![],
            zones,
            rack: vec![],
            rack_residual: vec![BTreeMap::new(); if rule == Rule::Best { racks } else { 0 }],
            rack_entry: vec![],
            rack_heap: vec![BinaryHeap::new(); if rule == Rule::Worst { racks } else { 0 }],
            bin_of: vec![],
            consumers,
        };
        if rule == Rule::First {
            // pool.candidates(previous, size): previous ∪ members ∪ prefix<n> for n ≤ size + |those|.
            let mut universe: Vec<u64> = previous
                .iter()
                .map(|&c| bins.consumers.tie[c as usize])
                .collect();
            if let Some(m) = members {
                universe.extend(m.iter().map(|&c| bins.consumers.tie[c as usize]));
            }
            universe.sort_unstable();
            universe.dedup();
            let prefix = if members.is_some() {
                SURPLUS_PREFIX
            } else {
                MINTED_PREFIX
            };
            let count = (rates.len() + universe.len() + 1) as u64;
            for n in 0..count {
                universe.push(bins.consumers.minted_tie(prefix, n));
            }
            universe.sort_unstable();
            universe.dedup();
            bins.leaves = universe.len().max(1).next_power_of_two();
            bins.tree = vec![f64::NEG_INFINITY; 2 * bins.leaves];
            bins.bin_at = vec![NONE; bins.leaves];
            bins.universe = universe;
        }
        bins
    }

    /// createConsumer: a new, empty bin for consumer h(j,k) (`preferred` = g(j,k)).
    pub fn open(&mut self, preferred: u32) -> usize {
        let c = self.pool.open(self.consumers, preferred);
        self.add(c)
    }

    /// Zone mode: a new bin in one of j's racks (h(j,k) where j's previous consumer runs there), or None.
    pub fn open_local(&mut self, j: u32) -> Option<usize> {
        let racks = self.zones?.of_partition(j);
        let c = self
            .pool
            .open_for(self.consumers, racks, self.previous_owner[j as usize])?;
        Some(self.add(c))
    }

    /// A consumer the pool opened, as an empty bin.
    fn add(&mut self, c: u32) -> usize {
        if self.bin_of.len() <= c as usize {
            self.bin_of
                .resize(self.consumers.len().max(c as usize + 1), NONE);
        }
        self.bin_of[c as usize] = self.ids.len() as u32;
        self.rack.push(self.pool.rack_of(c));
        let capacity = self.consumers.cap[c as usize];
        self.ids.push(c);
        self.cap.push(capacity);
        self.limit.push(capacity * ROUNDING);
        self.load.push(0.0);
        self.held.push(vec![]);
        self.tie.push(self.consumers.tie[c as usize]);
        self.entry.push(None);
        if self.zones.is_some() && self.rule == Rule::Best {
            self.rack_entry.push(None);
        }
        let b = self.ids.len() - 1;
        if self.rule == Rule::First {
            let leaf = self
                .universe
                .binary_search(&self.tie[b])
                .expect("an id outside First Fit's universe");
            self.bin_at[leaf] = b as u32;
        }
        b
    }

    fn fits(&self, b: usize, j: u32) -> bool {
        self.held[b].is_empty() || self.load[b] + self.rates[j as usize] <= self.limit[b]
    }

    /// An open bin that takes partition j under this rule, or None.
    pub fn find(&mut self, j: u32) -> Option<usize> {
        let need = self.rates[j as usize];
        match self.rule {
            Rule::Next => {
                let b = self.ids.len().checked_sub(1)?;
                self.fits(b, j).then_some(b)
            }
            Rule::First => {
                if self.tree[1] < need {
                    return None;
                }
                let mut i = 1;
                while i < self.leaves {
                    i = if self.tree[2 * i] >= need {
                        2 * i
                    } else {
                        2 * i + 1
                    };
                }
                Some(self.bin_at[i - self.leaves] as usize)
            }
            // the best of every rack's index (zone mode; none otherwise) and of the global one
            Rule::Best => Self::best_of(self.rack_residual.iter().chain([&self.by_residual]), need),
            Rule::Worst => Self::worst_of(
                self.rack_heap.iter_mut().chain([&mut self.heap]),
                &self.load,
                &self.limit,
                need,
            ),
        }
    }

    /// Record bin b's new load in the rule's index.
    fn track(&mut self, b: usize) {
        match self.rule {
            Rule::Next => {}
            Rule::First => {
                let mut i = self.universe.binary_search(&self.tie[b]).unwrap() + self.leaves;
                self.tree[i] = if self.held[b].is_empty() {
                    f64::INFINITY
                } else {
                    self.limit[b] - self.load[b]
                };
                i >>= 1;
                while i > 0 {
                    let (l, r) = (self.tree[2 * i], self.tree[2 * i + 1]);
                    self.tree[i] = if l > r { l } else { r };
                    i >>= 1;
                }
            }
            Rule::Best | Rule::Worst => {
                if self.rack[b] != NO_RACK {
                    let rack = self.rack[b] as usize;
                    if self.rule == Rule::Best {
                        let new = self.residual_entry(b);
                        let runs = &mut self.rack_residual[rack];
                        if let Some(old) = self.rack_entry[b].replace(new) {
                            runs.remove(&old);
                        }
                        runs.insert(new, b as u32);
                    } else {
                        let entry = self.heap_entry(b);
                        Self::renew(&mut self.rack_heap[rack], entry);
                    }
                }
                if self.rack[b] == NO_RACK {
                    self.renew_global(b);
                }
            }
        }
    }

    /// Best Fit: bin b's entry, (residual, tie) as one integer.
    fn residual_entry(&self, b: usize) -> u128 {
        (ordered(self.limit[b] - self.load[b]) as u128) << 64 | self.tie[b] as u128
    }

    /// Worst Fit: bin b's entry, (load − limit, tie, bin).
    fn heap_entry(&self, b: usize) -> Reverse<(F, u64, u32)> {
        Reverse((F(self.load[b] - self.limit[b]), self.tie[b], b as u32))
    }

    /// Bin b's entry in the rule's global index, renewed.
    #[inline(always)]
    fn renew_global(&mut self, b: usize) {
        if self.rule == Rule::Best {
            let new = self.residual_entry(b);
            if let Some(old) = self.entry[b].replace(new) {
                self.by_residual.remove(&old);
            }
            self.by_residual.insert(new, b as u32);
        } else {
            let entry = self.heap_entry(b);
            Self::renew(&mut self.heap, entry);
        }
    }

    /// A bin's new entry in a Worst Fit heap: in place of its old one where that is the top (the bin just
    /// found), else beside it (the old one, stale, is dropped when it comes up).
    fn renew(heap: &mut BinaryHeap<Reverse<(F, u64, u32)>>, entry: Reverse<(F, u64, u32)>) {
        if let Some(mut top) = heap.peek_mut() {
            if top.0 .2 == entry.0 .2 {
                *top = entry;
                return;
            }
        }
        heap.push(entry);
    }

    /// Zone mode: an open bin of one of j's racks that takes j under this rule, or None.
    fn find_local(&mut self, j: u32) -> Option<usize> {
        let need = self.rates[j as usize];
        let zones = self.zones?;
        if let (Some(r), Rule::Worst) = (zones.lone_rack(j), self.rule) {
            // (most partitions: one rack, one heap)
            let heap = &mut self.rack_heap[r];
            return Self::worst_of([heap].into_iter(), &self.load, &self.limit, need);
        }
        let racks = zones.of_partition(j);
        match self.rule {
            Rule::Best => Self::best_of(in_racks(self.rack_residual.iter(), racks), need),
            Rule::Worst => Self::worst_of(
                in_racks(self.rack_heap.iter_mut(), racks),
                &self.load,
                &self.limit,
                need,
            ),
            _ => None,
        }
    }

    /// Best Fit among several indices: the bin with the least remaining capacity that takes `need`.
    fn best_of<'i>(
        indices: impl Iterator<Item = &'i BTreeMap<u128, u32>>,
        need: f64,
    ) -> Option<usize> {
        indices
            .filter_map(|index| index.range((ordered(need) as u128) << 64..).next())
            .min()
            .map(|(_, &b)| b as usize)
    }

    /// Worst Fit among several heaps: the bin with the most room of all (their valid tops; ties by id), if
    /// `need` fits in it.
    fn worst_of<'h>(
        heaps: impl Iterator<Item = &'h mut BinaryHeap<Reverse<(F, u64, u32)>>>,
        load: &[f64],
        limit: &[f64],
        need: f64,
    ) -> Option<usize> {
        let mut best: Option<(F, u64, u32)> = None;
        for heap in heaps {
            if let Some(top) = Self::valid_top(heap, load, limit) {
                if best.is_none_or(|b| top < b) {
                    best = Some(top);
                }
            }
        }
        let (_, _, b) = best?;
        let b = b as usize;
        (load[b] + need <= limit[b]).then_some(b)
    }

    /// The heap's valid top (stale entries dropped on the way).
    fn valid_top(
        heap: &mut BinaryHeap<Reverse<(F, u64, u32)>>,
        load: &[f64],
        limit: &[f64],
    ) -> Option<(F, u64, u32)> {
        while let Some(&Reverse(top)) = heap.peek() {
            let b = top.2 as usize;
            if top.0 .0 == load[b] - limit[b] {
                return Some(top);
            }
            heap.pop();
        }
        None
    }

    /// Zone mode: the open bin of j's racks `place` puts j into (Some(None): it opens one there), None where j
    /// cannot be placed in its zone.
    pub fn local_choice(&mut self, j: u32) -> Option<Option<usize>> {
        if let Some(b) = self.find_local(j) {
            return Some(Some(b));
        }
        let racks = self.zones?.of_partition(j);
        self.pool.can_open_for(racks).then_some(None)
    }

    /// The open bin `place` puts j into, or None where it opens one.
    pub fn choose(&mut self, j: u32) -> Option<usize> {
        if self.zones.is_none() {
            return self.find(j);
        }
        match self.local_choice(j) {
            Some(choice) => choice,
            None => self.find(j),
        }
    }

    pub fn put(&mut self, b: usize, j: u32) {
        self.load[b] += self.rates[j as usize];
        self.held[b].push(j);
        self.track(b);
    }

    /// `put` into the bin `find` just returned: for Worst Fit it is the heap's top, whose entry is
    /// replaced in place (one sift down instead of a pop and a push).
    fn put_found(&mut self, b: usize, j: u32) {
        if self.rule != Rule::Worst {
            return self.put(b, j);
        }
        self.load[b] += self.rates[j as usize];
        self.held[b].push(j);
        let key = self.heap_entry(b);
        *self
            .heap
            .peek_mut()
            .expect("the bin found is the heap's top") = key;
    }

    /// Put partitions into bin b in order until the first that does not fit; return how many went in.
    pub fn fill(&mut self, b: usize, partitions: &[u32]) -> usize {
        let limit = self.limit[b];
        let mut load = self.load[b];
        let mut taken = partitions.len();
        for (i, &j) in partitions.iter().enumerate() {
            if !self.held[b].is_empty() && load + self.rates[j as usize] > limit {
                taken = i;
                break;
            }
            load += self.rates[j as usize];
            self.held[b].push(j);
        }
        self.load[b] = load;
        self.track(b);
        taken
    }

    /// assignOpenBin (Algorithm 1, line 8): into an open bin by the rule, never a new one.
    pub fn place_open(&mut self, j: u32) -> bool {
        if self.zones.is_some() {
            return match self.find_local(j) {
                Some(b) => {
                    self.put(b, j);
                    true
                }
                None => false,
            };
        }
        match self.find(j) {
            Some(b) => {
                self.put_found(b, j);
                true
            }
            None => false,
        }
    }

    /// Zone mode: `place` with `choose`'s choice for j already made.
    pub fn place_chosen(&mut self, j: u32, chosen: Option<usize>) -> usize {
        let b = match chosen {
            Some(b) => b,
            None => match self.open_local(j) {
                Some(b) => b,
                None => self.open(self.previous_owner[j as usize]),
            },
        };
        self.put(b, j);
        b
    }

    /// assignBin: by the rule, else into a new bin h(j,k) (Eq. 14). Next Fit's first bin is open before any
    /// partition comes, so it is f(k).
    pub fn place(&mut self, j: u32) -> usize {
        if self.rule == Rule::Next && self.ids.is_empty() {
            self.open(NONE);
        }
        if self.zones.is_some() {
            let chosen = self.choose(j);
            return self.place_chosen(j, chosen);
        }
        match self.find(j) {
            Some(b) => {
                self.put_found(b, j);
                b
            }
            None => {
                let b = self.open(self.previous_owner[j as usize]);
                self.put(b, j);
                b
            }
        }
    }
}

/// Of the indices kept per rack (in rack order), those of `racks`.
fn in_racks<'r, T>(
    per_rack: impl Iterator<Item = T> + 'r,
    racks: &'r [u32],
) -> impl Iterator<Item = T> + 'r {
    per_rack
        .enumerate()
        .filter(|(r, _)| racks.contains(&(*r as u32)))
        .map(|(_, index)| index)
}
