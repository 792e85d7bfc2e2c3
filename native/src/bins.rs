//! Open consumers (bins) of the assignment being built and the Any Fit rules that pick one, as
//! `app.core.bins`: an empty bin accepts any partition; Best Fit takes the bin with the least remaining
//! capacity that still fits, Worst Fit the one with the most, First Fit the first in id order, Next Fit
//! only the last opened; ties to the lowest id.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};

use crate::consumers::{Consumers, Pool, MINTED_PREFIX, SURPLUS_PREFIX};
use crate::intern::NONE;

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
    tie: Vec<u64>,
    // Worst Fit: min-heap of (load − limit, tie, bin), stale entries skipped (loads only grow).
    heap: BinaryHeap<Reverse<(F, u64, u32)>>,
    // Best Fit: open bins by (residual, tie, bin).
    // Best Fit: open bins by (residual, tie) as one integer (`ordered`), each with its bin.
    by_residual: BTreeMap<u128, u32>,
    entry: Vec<Option<u128>>,
    // First Fit: max-segment tree of residuals over every id the pool can open, in id order.
    universe: Vec<u64>,
    leaves: usize,
    tree: Vec<f64>,
    bin_at: Vec<u32>,
}

impl<'a> Bins<'a> {
    pub fn new(
        rule: Rule,
        rates: &'a [f64],
        previous_owner: &'a [u32],
        consumers: &'a mut Consumers,
        members: Option<&[u32]>,
        previous: &[u32],
    ) -> Self {
        let pool = Pool::new(consumers, members);
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
        let capacity = self.consumers.cap[c as usize];
        self.ids.push(c);
        self.cap.push(capacity);
        self.limit.push(capacity * ROUNDING);
        self.load.push(0.0);
        self.held.push(vec![]);
        self.tie.push(self.consumers.tie[c as usize]);
        self.entry.push(None);
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
            Rule::Best => {
                let (_, &b) = self
                    .by_residual
                    .range((ordered(need) as u128) << 64..)
                    .next()?;
                Some(b as usize)
            }
            Rule::Worst => {
                while let Some(&Reverse((top, _, b))) = self.heap.peek() {
                    let b = b as usize;
                    if top.0 == self.load[b] - self.limit[b] {
                        return (self.load[b] + need <= self.limit[b]).then_some(b);
                    }
                    self.heap.pop();
                }
                None
            }
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
            Rule::Best => {
                if let Some(old) = self.entry[b] {
                    self.by_residual.remove(&old);
                }
                let new =
                    (ordered(self.limit[b] - self.load[b]) as u128) << 64 | self.tie[b] as u128;
                self.entry[b] = Some(new);
                self.by_residual.insert(new, b as u32);
            }
            Rule::Worst => {
                self.heap.push(Reverse((
                    F(self.load[b] - self.limit[b]),
                    self.tie[b],
                    b as u32,
                )));
            }
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
        let key = Reverse((F(self.load[b] - self.limit[b]), self.tie[b], b as u32));
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
        match self.find(j) {
            Some(b) => {
                self.put_found(b, j);
                true
            }
            None => false,
        }
    }

    /// assignBin: by the rule, else into a new bin h(j,k) (Eq. 14). Next Fit's first bin is open before any
    /// partition comes, so it is f(k).
    pub fn place(&mut self, j: u32) -> usize {
        if self.rule == Rule::Next && self.ids.is_empty() {
            self.open(NONE);
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
