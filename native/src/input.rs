//! A request's partitions, previous assignment and members on arrays: partition j ↔ (topic, partition),
//! topics and consumers as integers (one `Interner` each). Filled from the request's JSON (request.rs) or
//! from the Python objects of the reference's Problem (bindings.rs).

use crate::consumers::Consumers;
use crate::hash::{Map, Set};
use crate::intern::{Interner, NONE};
use crate::natural;
use crate::problem::{self, Problem};
use crate::zones::Zones;

/// The most racks one partition may list, and distinct racks one request's partitions may name
/// (`app.core.model.MAX_PARTITION_RACKS`, `MAX_RACKS`).
pub const MAX_PARTITION_RACKS: usize = 32;
pub const MAX_RACKS: usize = 1_000;

/// The partitions named by the previous assignment, each known one as its index, and those no longer listed.
#[derive(Clone)]
pub struct Previous {
    /// The previous consumers in the request's order (one listed with nothing too).
    pub ids: Vec<u32>,
    /// What each held that still exists.
    pub held: Vec<Vec<u32>>,
    /// g(j,k): partition j's previous consumer, NONE for a new partition.
    pub owner: Vec<u32>,
    /// Partitions held that are no longer listed: their consumer and key.
    pub gone: Vec<u32>,
    pub gone_keys: Vec<(u32, i64)>,
}

#[derive(Clone)]
pub struct Input {
    /// Every topic named, the previous assignment's too.
    pub topics: Interner,
    /// partition j → (topic id, partition number)
    pub keys: Vec<(u32, i64)>,
    pub rates: Vec<f64>,
    /// math.fsum of the rates.
    pub rate_sum: f64,
    pub lags: Vec<Option<f64>>,
    index: Index,
    /// Each partition's place in (topic, partition) order.
    pub key_rank: Vec<u32>,
    /// Known consumer ids (previous consumers and members).
    pub consumers: Interner,
    pub previous: Option<Previous>,
    pub members: Option<Vec<u32>>,
    /// Members with a capacity of their own.
    pub own: Vec<(u32, f64)>,
    /// Racks: each partition's (`rack_ids[rack_starts[j]..rack_starts[j + 1]]`; no starts: none named), and
    /// the known consumers' (the members', or the previous consumers'), as numbers of `rack_names`.
    pub rack_names: Interner,
    rack_starts: Vec<u32>,
    rack_ids: Vec<u32>,
    pub consumer_racks: Vec<(u32, u32)>,
    /// Partitions given without a rate (rate 0 until `take_rates`).
    pub unrated: Vec<u32>,
}

/// math.fsum of the rates, where the rates and lags add up finite one by one (as the algorithms add loads) and
/// exactly, as app.core.model.check_sums requires; else None.
fn checked_sum(rates: &[f64], lags: &[Option<f64>]) -> Option<f64> {
    let rate_sum = problem::fsum(rates.iter().copied());
    let added = |values: &mut dyn Iterator<Item = f64>| values.fold(0.0, |s, v| s + v);
    let lags_present = || lags.iter().flatten().copied();
    (rate_sum.is_finite()
        && added(&mut rates.iter().copied()).is_finite()
        && problem::fsum(lags_present()).is_finite()
        && added(&mut lags_present()).is_finite())
    .then_some(rate_sum)
}

/// (topic, partition) → partition index: a table per topic whose partition numbers are dense (Kafka numbers
/// them 0..n-1), a hash map for the others.
#[derive(Clone)]
pub struct Index {
    dense: Vec<Vec<u32>>,
    sparse: Map<(u32, i64), u32>,
}

impl Index {
    /// None when a (topic, partition) is listed twice.
    pub fn new(keys: &[(u32, i64)], topics: usize) -> Option<Self> {
        let mut count = vec![0usize; topics];
        let mut low = vec![i64::MAX; topics];
        let mut high = vec![-1i64; topics];
        for &(t, p) in keys {
            let t = t as usize;
            count[t] += 1;
            low[t] = low[t].min(p);
            high[t] = high[t].max(p);
        }
        let mut dense: Vec<Vec<u32>> = (0..topics)
            .map(|t| {
                let fits = low[t] >= 0 && (high[t] as usize) < 2 * count[t] + 16;
                if fits {
                    vec![NONE; high[t] as usize + 1]
                } else {
                    vec![]
                }
            })
            .collect();
        let mut sparse = Map::default();
        for (j, &(t, p)) in keys.iter().enumerate() {
            let table = &mut dense[t as usize];
            let slot = if table.is_empty() {
                sparse.entry((t, p)).or_insert(NONE)
            } else {
                &mut table[p as usize]
            };
            if *slot != NONE {
                return None;
            }
            *slot = j as u32;
        }
        Some(Index { dense, sparse })
    }

    fn get(&self, (t, p): (u32, i64)) -> Option<u32> {
        let table = self.dense.get(t as usize)?;
        if table.is_empty() {
            return self.sparse.get(&(t, p)).copied();
        }
        let j = *table.get(usize::try_from(p).ok()?)?;
        (j != NONE).then_some(j)
    }

    /// Partition indices in (topic, partition) order, topics by name.
    fn ranks(&self, topics: &Interner, n: usize) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.dense.len() as u32).collect();
        order.sort_by(|&a, &b| topics.name(a).cmp(topics.name(b)));
        let mut sparse: Vec<Vec<(i64, u32)>> = vec![vec![]; self.dense.len()];
        for (&(t, p), &j) in &self.sparse {
            sparse[t as usize].push((p, j));
        }
        let mut rank = vec![0u32; n];
        let mut next = 0u32;
        for &t in &order {
            let table = &self.dense[t as usize];
            let run: Box<dyn Iterator<Item = u32>> = if table.is_empty() {
                let run = &mut sparse[t as usize];
                run.sort_unstable();
                Box::new(run.iter().map(|&(_, j)| j))
            } else {
                Box::new(table.iter().copied().filter(|&j| j != NONE))
            };
            for j in run {
                rank[j as usize] = next;
                next += 1;
            }
        }
        rank
    }
}

impl Input {
    /// The partitions, with the topics they name: None when one is listed twice, a sum overflows (the
    /// reference says which) or the lists differ in length.
    pub fn new(
        topics: Interner,
        keys: Vec<(u32, i64)>,
        rates: Vec<f64>,
        lags: Vec<Option<f64>>,
    ) -> Option<Self> {
        if rates.len() != keys.len() || lags.len() != keys.len() {
            return None;
        }
        let rate_sum = checked_sum(&rates, &lags)?;
        let index = Index::new(&keys, topics.len())?;
        let key_rank = index.ranks(&topics, keys.len());
        Some(Input {
            topics,
            keys,
            rates,
            rate_sum,
            lags,
            index,
            key_rank,
            consumers: Interner::default(),
            previous: None,
            members: None,
            own: vec![],
            rack_names: Interner::default(),
            rack_starts: vec![],
            rack_ids: vec![],
            consumer_racks: vec![],
            unrated: vec![],
        })
    }

    /// The stored rates ((topic, partition), rate, lag) onto the partitions given without a rate (`unrated`): each
    /// takes its stored rate, and its stored lag unless it gave one; the others keep rate 0. Some((left out,
    /// taken)); None where a sum overflows (the reference says which).
    pub fn take_rates(
        &mut self,
        stored: impl IntoIterator<Item = ((u32, i64), f64, Option<f64>)>,
    ) -> Option<(usize, usize)> {
        let mut waiting = vec![false; self.keys.len()];
        for &j in &self.unrated {
            waiting[j as usize] = true;
        }
        let mut taken = 0;
        for (key, rate, lag) in stored {
            if let Some(j) = self.index.get(key) {
                if std::mem::take(&mut waiting[j as usize]) {
                    self.rates[j as usize] = rate;
                    let given = &mut self.lags[j as usize];
                    *given = given.or(lag);
                    taken += 1;
                }
            }
        }
        self.rate_sum = checked_sum(&self.rates, &self.lags)?;
        Some((std::mem::take(&mut self.unrated).len(), taken))
    }

    /// (math.fsum of the rates, sum of lags (none as 0), sum of the lags planned for a rebalance of
    /// `rebalance_s` when `plan`): the totals the reference checks before it solves, summed as it sums them.
    pub fn totals(&self, rebalance_s: f64, plan: bool) -> (f64, f64, f64) {
        let lags = self.lags.iter().map(|l| l.unwrap_or(0.0));
        let lag_sum = lags.clone().fold(0.0, |s, l| s + l);
        let planned = if plan {
            lags.zip(&self.rates)
                .fold(0.0, |s, (l, &r)| s + (l + r * rebalance_s))
        } else {
            lag_sum
        };
        (self.rate_sum, lag_sum, planned)
    }

    /// A consumer id as an integer; None for an id the natural order here cannot rank as the reference does.
    pub fn consumer(&mut self, name: &str) -> Option<u32> {
        self.consumers.intern(name, natural::supported)
    }

    /// The previous assignment: each consumer with how many of `keys` (in order) it held. None when an id
    /// cannot be ranked or a partition is held twice (the reference says which).
    pub fn set_previous(
        &mut self,
        consumers: Vec<(&str, usize)>,
        keys: &[(u32, i64)],
    ) -> Option<()> {
        let n = self.keys.len();
        let mut previous = Previous {
            ids: Vec::with_capacity(consumers.len()),
            held: Vec::with_capacity(consumers.len()),
            owner: vec![NONE; n],
            gone: vec![],
            gone_keys: vec![],
        };
        let mut gone_seen: Set<(u32, i64)> = Set::default();
        let mut keys = keys.iter();
        self.consumers.reserve(consumers.len());
        let mut listed = vec![false; self.consumers.len() + consumers.len()];
        for (name, count) in consumers {
            let c = self.consumer(name)?;
            if std::mem::replace(&mut listed[c as usize], true) {
                return None; // listed twice
            }
            previous.ids.push(c);
            let mut kept = Vec::with_capacity(count);
            for &k in keys.by_ref().take(count) {
                match self.index.get(k) {
                    Some(j) => {
                        let slot = &mut previous.owner[j as usize];
                        if *slot != NONE {
                            return None;
                        }
                        *slot = c;
                        kept.push(j);
                    }
                    None => {
                        if !gone_seen.insert(k) {
                            return None;
                        }
                        previous.gone.push(c);
                        previous.gone_keys.push(k);
                    }
                }
            }
            previous.held.push(kept);
        }
        self.previous = Some(previous);
        Some(())
    }

    /// The members, each with the capacity it was given: None when one repeats or cannot be ranked, or a
    /// capacity is not a finite number above 0.
    pub fn set_members(&mut self, members: Vec<(&str, Option<f64>)>) -> Option<()> {
        if members.is_empty() {
            return None;
        }
        let mut ids = Vec::with_capacity(members.len());
        let mut seen = Set::with_capacity_and_hasher(members.len(), Default::default());
        for (name, capacity) in members {
            let c = self.consumer(name)?;
            if !seen.insert(c) {
                return None;
            }
            ids.push(c);
            if let Some(capacity) = capacity {
                if !(capacity.is_finite() && capacity > 0.0) {
                    return None;
                }
                self.own.push((c, capacity));
            }
        }
        self.members = Some(ids);
        Some(())
    }
}

impl Input {
    /// Partition j's racks, as listed (`racks(j)`: None or empty, none); None when one is not a rack the
    /// reference takes (1-255 characters), a partition lists more than MAX_PARTITION_RACKS or the partitions
    /// name more than MAX_RACKS (the reference says which).
    pub fn set_partition_racks<'r, R: AsRef<str> + 'r>(
        &mut self,
        racks: impl Fn(usize) -> Option<&'r [R]>,
    ) -> Option<()> {
        let n = self.keys.len();
        self.rack_starts = Vec::with_capacity(n + 1);
        self.rack_starts.push(0);
        for j in 0..n {
            let listed = racks(j).unwrap_or(&[]);
            if listed.len() > MAX_PARTITION_RACKS {
                return None;
            }
            for rack in listed {
                let id = self
                    .rack_names
                    .intern(rack.as_ref(), crate::request::sized)?;
                self.rack_ids.push(id);
            }
            self.rack_starts.push(self.rack_ids.len() as u32);
        }
        (self.rack_names.len() <= MAX_RACKS).then_some(())
    }

    /// The racks of known consumers; None where a consumer is not known or a rack is not one the reference
    /// takes (the reference says what is wrong).
    pub fn set_consumer_racks<'r>(
        &mut self,
        racks: impl Iterator<Item = (&'r str, &'r str)>,
    ) -> Option<()> {
        for (consumer, rack) in racks {
            let c = self.consumers.get(consumer)?;
            let rack = self.rack_names.intern(rack, crate::request::sized)?;
            self.consumer_racks.push((c, rack));
        }
        Some(())
    }

    /// The request's zones: Some when a partition names its racks and, with members, a member its rack.
    fn zones(&self) -> Option<Zones> {
        if self.rack_ids.is_empty() || (self.members.is_some() && self.consumer_racks.is_empty()) {
            return None;
        }
        let (starts, ids) = (&self.rack_starts, &self.rack_ids);
        Some(Zones::new(
            self.rack_names.names(),
            self.keys.len(),
            |j| &ids[starts[j] as usize..starts[j + 1] as usize],
            &self.consumer_racks,
            self.consumers.len(),
        ))
    }
}

/// What names the partitions in an answer: the topics, each partition's (topic, partition), and those of the
/// previous assignment's partitions that are gone.
pub struct Labels {
    pub topics: Interner,
    pub keys: Vec<(u32, i64)>,
    pub gone_keys: Vec<(u32, i64)>,
}

impl Input {
    /// The problem with capacity C (consumers without one of their own have C), and the partitions' labels.
    pub fn into_problem(self, capacity: f64) -> (Problem, Labels) {
        let zones = self.zones();
        let Input {
            topics,
            keys,
            rates,
            lags,
            key_rank,
            consumers,
            previous,
            members,
            own,
            ..
        } = self;
        let mut capacities = vec![capacity; consumers.len()];
        for (c, value) in own {
            capacities[c as usize] = value;
        }
        let consumers = Consumers::new(
            consumers,
            capacities,
            members.as_deref().unwrap_or(&[]),
            capacity,
        );
        let previous = previous.unwrap_or_else(|| Previous {
            ids: vec![],
            held: vec![],
            owner: vec![NONE; keys.len()],
            gone: vec![],
            gone_keys: vec![],
        });
        let problem = Problem::new(
            rates,
            lags,
            capacity,
            consumers,
            previous.owner,
            previous.ids,
            previous.held,
            previous.gone,
            members,
            key_rank,
            zones,
        );
        let labels = Labels {
            topics,
            keys,
            gone_keys: previous.gone_keys,
        };
        (problem, labels)
    }
}
