//! Lag-aware Least-Loaded bin pack autoscaler (Ezzeddine, Baude, Huet, CLOSER 2024), as
//! `app/core/algorithms/least_loaded.py`: packing on rate ≤ μ·f and lag ≤ μ·w_sla·f (Eq. 4-5),
//! scaleNeeded (Procedure 1) and doScale (Procedure 2) with the planned lag lag + λ·t_r (Eq. 6-7).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::hash::Map;

use crate::bins::{ordered, within, F};
use crate::consumers::Pool;
use crate::intern::NONE;
use crate::problem::{Outputs, Placement, Problem};

/// `LeastLoadedParams`, every field as the reference's model holds it (mu None: the capacity C).
pub struct Params {
    pub mu: Option<f64>,
    pub w_sla: f64,
    pub f_up: f64,
    pub f_down: f64,
    pub rebalance_s: f64,
    pub plan_rebalance_lag: bool,
}

/// A least-loaded packing: each partition's bin (in the order the partitions were placed).
pub struct Packing {
    order: Vec<u32>,
    bin_of: Vec<u32>,
    count: Vec<u32>,
}

impl Packing {
    /// The bins that hold a partition.
    pub fn len(&self) -> usize {
        self.count.iter().filter(|&&c| c > 0).count()
    }

    /// The bins that hold a partition, in bin order, each with its partitions in the order they were placed.
    pub fn bins(&self) -> Vec<Vec<u32>> {
        let mut held: Vec<Vec<u32>> = self
            .count
            .iter()
            .map(|&c| Vec::with_capacity(c as usize))
            .collect();
        for &j in &self.order {
            held[self.bin_of[j as usize] as usize].push(j);
        }
        held.into_iter().filter(|h| !h.is_empty()).collect()
    }
}

/// The bins of a packing being built: what each holds and carries.
struct Loads {
    bin_of: Vec<u32>,
    count: Vec<u32>,
    rate: Vec<f64>,
    lag: Vec<f64>,
    /// bins that hold nothing yet
    empty: usize,
}

impl Loads {
    /// (partition j's rate and lag fit bin b of `scale`, its rate fits): an empty bin takes any partition.
    fn fits(&self, b: usize, rate: f64, lag: f64, caps: (f64, f64), scale: f64) -> (bool, bool) {
        let rate_fits = within(self.rate[b] + rate, caps.0 * scale);
        let fits = self.count[b] == 0 || (rate_fits && within(self.lag[b] + lag, caps.1 * scale));
        (fits, rate_fits)
    }

    /// Put partition j into bin b; b's rate load after.
    fn put(&mut self, b: usize, j: u32, rate: f64, lag: f64) -> f64 {
        if self.count[b] == 0 {
            self.empty -= 1;
        }
        self.count[b] += 1;
        self.bin_of[j as usize] = b as u32;
        self.rate[b] += rate;
        self.lag[b] += lag;
        self.rate[b]
    }

    fn open(&mut self) -> usize {
        self.count.push(0);
        self.rate.push(0.0);
        self.lag.push(0.0);
        self.empty += 1;
        self.count.len() - 1
    }
}

/// Least-Loaded from `start` bins: each partition to the least loaded bin it fits (rate load over the bin's
/// scale, ties to the lowest bin); a partition that fits nowhere opens one bin more. Bin b has `scales[b]`
/// times the capacity (1 beyond the list).
pub fn least_loaded(
    rates: &[f64],
    lags: &[f64],
    order: &[u32],
    rate_cap: f64,
    lag_cap: f64,
    start: usize,
    scales: &[f64],
) -> Packing {
    let scale_of = |b: usize| if b < scales.len() { scales[b] } else { 1.0 };
    let uniform = scales.iter().all(|&s| s == 1.0);
    let caps = (rate_cap, lag_cap);
    // A bin beyond the n-th is never taken (an empty bin goes before any bin after it, and takes any
    // partition), so n bins give the reference's packing of `start` > n bins, without allocating them.
    let bins = start.min(rates.len()).max(1);
    let mut loads = Loads {
        bin_of: vec![0; rates.len()],
        count: vec![0; bins],
        rate: vec![0.0; bins],
        lag: vec![0.0; bins],
        empty: bins,
    };
    // (load / scale, bin) as one integer: the load's ordered bits, then the bin
    let key = |load: f64, b: usize| Reverse((ordered(load) as u128) << 64 | b as u128);
    let mut heap: BinaryHeap<Reverse<u128>> = (0..bins).map(|b| key(0.0, b)).collect();
    let mut skipped = vec![];
    for &j in order {
        let (rate, lag) = (rates[j as usize], lags[j as usize]);
        // Mostly the least loaded bin takes the partition: its entry is updated in place (one sift down).
        if let Some(mut top) = heap.peek_mut() {
            let b = top.0 as u64 as usize;
            let scale = scale_of(b);
            if loads.fits(b, rate, lag, caps, scale).0 {
                *top = key(loads.put(b, j, rate, lag) / scale, b);
                continue;
            }
        }
        let mut chosen = None;
        while let Some(entry) = heap.pop() {
            let b = entry.0 as u64 as usize;
            let (fits, rate_fits) = loads.fits(b, rate, lag, caps, scale_of(b));
            if fits {
                chosen = Some(b);
                break;
            }
            skipped.push(entry);
            // With one size the bins after this one carry at least its rate load: none fits in rate.
            if uniform && loads.empty == 0 && !rate_fits {
                break;
            }
        }
        let b = chosen.unwrap_or_else(|| loads.open());
        heap.push(key(loads.put(b, j, rate, lag) / scale_of(b), b));
        heap.extend(skipped.drain(..));
    }
    Packing {
        order: order.to_vec(),
        bin_of: loads.bin_of,
        count: loads.count,
    }
}

/// Bins one dimension needs at least (`least_loaded.lower_bound`).
fn lower_bound(values: &[f64], cap: f64, scales: &[f64]) -> usize {
    if !scales.is_empty() {
        let total = values.iter().fold(0.0, |s, &v| s + v) / cap;
        let (mut covered, mut count) = (0.0, 0usize);
        for &scale in scales {
            if covered >= total - 1e-9 {
                break;
            }
            covered += scale;
            count += 1;
        }
        return count.saturating_add(ceiling(total - covered));
    }
    let alone = values.iter().filter(|&&v| v > cap).count();
    let rest = values
        .iter()
        .filter(|&&v| v <= cap)
        .fold(0.0, |s, &v| s + v);
    let half = values.iter().filter(|&&v| v > cap / 2.0).count();
    alone.saturating_add(ceiling(rest / cap)).max(half)
}

/// ⌈implied⌉ as `app.core.model.consumers_implied` rounds it (0 below 0; a float too large as the largest).
fn ceiling(implied: f64) -> usize {
    (implied - 1e-9).ceil().max(0.0) as usize
}

/// `naming.candidates`: the members (pool order), or the previous consumers that still hold a partition (id
/// order), then fresh ids up to `count`.
fn candidates(p: &mut Problem, count: usize) -> Vec<u32> {
    let members = p.members.clone();
    let mut pool = Pool::new(&p.consumers, members.as_deref());
    let known: Vec<u32> = match &pool.members {
        Some(m) => m.clone(),
        None => {
            let mut k: Vec<u32> = (0..p.previous_ids.len())
                .filter(|&i| !p.previous_held[i].is_empty())
                .map(|i| p.previous_ids[i])
                .collect();
            p.consumers.sort(&mut k);
            k
        }
    };
    let mut ids: Vec<u32> = known
        .iter()
        .map(|&c| pool.open(&mut p.consumers, c))
        .collect();
    while ids.len() < count {
        ids.push(pool.open(&mut p.consumers, NONE));
    }
    ids
}

/// `naming.name_by_overlap`: each bin the id among `ids` it shares the most previous rate with (largest
/// overlap first, ties by bin, then id), the other bins the unused ids in order; with `sizes`, only an id of
/// the capacity the bin was packed for.
fn name_by_overlap(
    p: &Problem,
    packing: Vec<Vec<u32>>,
    ids: &[u32],
    sizes: Option<&[f64]>,
) -> Vec<(u32, Vec<u32>)> {
    let cap = &p.consumers.cap;
    let fits = |b: usize, c: u32| sizes.is_none_or(|s| cap[c as usize] == s[b]);
    // each bin's overlaps, summed in the bin's order: a bin holds a few partitions, so a short list serves
    // (with an index once it holds many previous consumers)
    let mut by_overlap: Vec<((usize, u32), f64)> = vec![];
    let mut local: Vec<(u32, f64)> = vec![];
    let mut index: Map<u32, usize> = Map::default();
    for (b, held) in packing.iter().enumerate() {
        local.clear();
        index.clear();
        for &j in held {
            let c = p.previous_owner[j as usize];
            if c == NONE {
                continue;
            }
            let rate = p.rates[j as usize];
            let found = if local.len() <= 16 {
                local.iter().position(|&(k, _)| k == c)
            } else {
                if index.is_empty() {
                    index.extend(local.iter().enumerate().map(|(i, &(k, _))| (k, i)));
                }
                index.get(&c).copied()
            };
            match found {
                Some(i) => local[i].1 += rate,
                None => {
                    if !index.is_empty() {
                        index.insert(c, local.len());
                    }
                    local.push((c, 0.0 + rate));
                }
            }
        }
        by_overlap.extend(local.iter().map(|&(c, v)| ((b, c), v)));
    }
    // (b, c) pairs are distinct, so the order is total
    by_overlap.sort_unstable_by(|x, y| {
        F(y.1)
            .cmp(&F(x.1))
            .then(x.0 .0.cmp(&y.0 .0))
            .then(p.consumers.tie[x.0 .1 as usize].cmp(&p.consumers.tie[y.0 .1 as usize]))
    });
    let mut allowed = vec![false; p.consumers.len()];
    for &c in ids {
        allowed[c as usize] = true;
    }
    let mut names = vec![NONE; packing.len()];
    for ((b, c), _) in by_overlap {
        if names[b] == NONE && allowed[c as usize] && fits(b, c) {
            names[b] = c;
            allowed[c as usize] = false;
        }
    }
    // the unused ids in order, one queue per capacity (ids only leave `allowed`, so each queue only advances)
    let mut next: Map<u64, usize> = Map::default();
    for (b, held) in packing.iter().enumerate() {
        if !held.is_empty() && names[b] == NONE {
            let class = sizes.map_or(0, |s| s[b].to_bits());
            let i = next.entry(class).or_insert(0);
            while !(allowed[ids[*i] as usize] && fits(b, ids[*i])) {
                *i += 1;
            }
            names[b] = ids[*i];
            allowed[ids[*i] as usize] = false;
        }
    }
    names
        .into_iter()
        .zip(packing)
        .filter(|(_, held)| !held.is_empty())
        .collect()
}

pub fn place(p: &mut Problem, params: &Params) -> Placement {
    let mu = params.mu.unwrap_or(p.capacity);
    let n = p.rates.len();
    let uniform = p.uniform();
    // Consumers of different sizes: bin b is the b-th candidate, and μ scales with its capacity / C.
    let ids = if uniform { vec![] } else { candidates(p, n) };
    let scales: Vec<f64> = ids
        .iter()
        .map(|&c| p.consumers.cap[c as usize] / p.capacity)
        .collect();
    let lags: Vec<f64> = p.lags.iter().map(|l| l.unwrap_or(0.0)).collect();
    // Eq. 6-7: totalLag = lag + λ·t_r, the lag a partition will have when the rebalance is over.
    let planned: Vec<f64> = if params.plan_rebalance_lag {
        lags.iter()
            .zip(&p.rates)
            .map(|(l, r)| l + r * params.rebalance_s)
            .collect()
    } else {
        lags.clone()
    };
    // By rate, then lag, largest first, then (topic, partition): the decreasing order already has rate and
    // (topic, partition), so only each run of equal rates is sorted by lag (stably).
    let mut order = p.decreasing.clone();
    let mut start = 0;
    while start < n {
        let rate = p.rates[order[start] as usize];
        let mut end = start + 1;
        while end < n && p.rates[order[end] as usize] == rate {
            end += 1;
        }
        if end - start > 1 {
            order[start..end].sort_by(|&a, &b| F(lags[b as usize]).cmp(&F(lags[a as usize])));
        }
        start = end;
    }
    // (with no partition, a packing of no bin: least_loaded would open one)
    let pack = |lag_values: &[f64], f: f64| -> Packing {
        if n == 0 {
            return Packing {
                order: vec![],
                bin_of: vec![],
                count: vec![],
            };
        }
        let (rate_cap, lag_cap) = (mu * f, mu * params.w_sla * f);
        let start = lower_bound(&p.rates, rate_cap, &scales)
            .max(lower_bound(lag_values, lag_cap, &scales))
            .max(1);
        least_loaded(
            &p.rates, lag_values, &order, rate_cap, lag_cap, start, &scales,
        )
    };
    // G_current: the members, or the consumers that held a partition.
    let current: Vec<(u32, Vec<u32>)> = match &p.members {
        Some(members) => {
            let mut held_of: Map<u32, &Vec<u32>> = Map::default();
            for (i, &c) in p.previous_ids.iter().enumerate() {
                held_of.insert(c, &p.previous_held[i]);
            }
            members
                .iter()
                .map(|m| (*m, held_of.get(m).map_or(vec![], |h| (*h).clone())))
                .collect()
        }
        None => (0..p.previous_ids.len())
            .filter(|&i| !p.previous_held[i].is_empty())
            .map(|i| (p.previous_ids[i], p.previous_held[i].clone()))
            .collect(),
    };
    let owned: usize = current.iter().map(|(_, h)| h.len()).sum();
    let violates = |f: f64| -> bool {
        owned < n
            || current.iter().any(|(c, held)| {
                let own = mu * f * p.consumers.cap[*c as usize] / p.capacity;
                let lag = held.iter().fold(0.0, |s, &j| s + lags[j as usize]);
                let rate = held.iter().fold(0.0, |s, &j| s + p.rates[j as usize]);
                !within(lag, own * params.w_sla) || !within(rate, own)
            })
    };
    // Procedure 1, scaleNeeded, on the current lags.
    let mut action = if pack(&lags, params.f_up).len() > current.len() {
        "UP"
    } else if pack(&lags, params.f_down).len() < current.len() {
        "DOWN"
    } else if violates(params.f_up) {
        "REASS"
    } else {
        "NONE"
    };
    // Procedure 2, doScale, on the planned lags.
    let mut packing = None;
    if action == "DOWN" {
        let down = pack(&planned, params.f_down);
        if down.len() >= current.len() {
            action = if violates(params.f_up) {
                "REASS"
            } else {
                "NONE"
            };
        } else {
            packing = Some(down);
        }
    }
    if action == "UP" || action == "REASS" {
        packing = Some(pack(&planned, params.f_up));
    }
    let before = current.len();
    let assignment = match packing {
        None => current,
        Some(packing) if uniform => {
            let bins = packing.bins();
            let named = candidates(p, bins.len());
            name_by_overlap(p, bins, &named, None)
        }
        Some(packing) => {
            let sizes: Vec<f64> = ids.iter().map(|&c| p.consumers.cap[c as usize]).collect();
            name_by_overlap(p, packing.bins(), &ids, Some(&sizes))
        }
    };
    let after = assignment.iter().filter(|(_, h)| !h.is_empty()).count();
    Placement {
        bins: assignment,
        outputs: Outputs::LeastLoaded {
            action,
            before,
            after,
            rate_capacity: mu * params.f_up,
            lag_capacity: mu * params.w_sla * params.f_up,
        },
        racks: vec![],
    }
}
