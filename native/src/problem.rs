//! One rebalance on arrays (partition index → rate, previous owner as a consumer index) and its outcome:
//! the fold of surplus bins into the members, owners, loads, moves, Rscore (Eq. 11) and the sparse delta
//! (Eq. 9), as `app/core/assign.py` and `app/core/delta.py`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::bins::{F, ROUNDING};
use crate::consumers::Consumers;
use crate::intern::NONE;
use crate::zones::{Zones, NO_RACK};

pub struct Problem {
    pub rates: Vec<f64>,
    pub lags: Vec<Option<f64>>,
    pub capacity: f64,
    pub consumers: Consumers,
    /// g(j,k): the consumer that held partition j, NONE for a new partition.
    pub previous_owner: Vec<u32>,
    /// The previous consumers (every one listed, in the request's order) and what each held that still exists.
    pub previous_ids: Vec<u32>,
    pub previous_held: Vec<Vec<u32>>,
    /// Partitions of the previous assignment that are no longer listed: (their old consumer, gone index).
    pub gone: Vec<u32>,
    pub members: Option<Vec<u32>>,
    /// Partition indices by rate, largest first, ties by (topic, partition); and each one's place there.
    pub decreasing: Vec<u32>,
    pub decreasing_rank: Vec<u32>,
    /// Each partition's place in (topic, partition) order.
    pub key_rank: Vec<u32>,
    /// The racks of a zone-aware request (a partition names its racks and, with members, a member its rack).
    pub zones: Option<Zones>,
}

pub enum Outputs {
    None,
    /// (the caps are echoed from the parameters as given: bindings.rs)
    Budget {
        rscore: f64,
        moves: i64,
        refused: u64,
        overloaded: Vec<u32>,
    },
    LeastLoaded {
        action: &'static str,
        before: usize,
        after: usize,
        rate_capacity: f64,
        lag_capacity: f64,
    },
}

/// What an algorithm returns: bins (consumer, partitions) in the order they were opened.
pub struct Placement {
    pub bins: Vec<(u32, Vec<u32>)>,
    pub outputs: Outputs,
    /// Zone mode: (consumer, rack) for each consumer whose rack the algorithm knows or chose.
    pub racks: Vec<(u32, u32)>,
}

/// What a zone-aware answer says of zones (`app.core.assign.ZoneReport`), by the outcome's assignment: each
/// consumer's rack (NO_RACK: not known) and the rate it reads across zones; and their math.fsum.
pub struct ZoneReport {
    pub racks: Vec<i32>,
    pub cross: Vec<f64>,
    pub total: f64,
}

pub struct Outcome {
    pub assignment: Vec<(u32, Vec<u32>)>,
    pub sorted: Vec<u32>,
    pub owner: Vec<u32>,
    pub loads: Vec<f64>,
    pub moved: Vec<u32>,
    pub moved_from: Vec<u32>,
    pub rscore: f64,
    pub overloaded: Vec<u32>,
    pub bins_used: usize,
    pub outputs: Outputs,
    /// The sparse delta: rows (consumers in id order), columns (changed partitions in index order, then gone
    /// ones as `partitions + g`), cells (row, column, ±1).
    pub rows: Vec<u32>,
    pub columns: Vec<u32>,
    pub cells: Vec<(u32, u32, i8)>,
    pub zones: Option<ZoneReport>,
}

impl Problem {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rates: Vec<f64>,
        lags: Vec<Option<f64>>,
        capacity: f64,
        consumers: Consumers,
        previous_owner: Vec<u32>,
        previous_ids: Vec<u32>,
        previous_held: Vec<Vec<u32>>,
        gone: Vec<u32>,
        members: Option<Vec<u32>>,
        key_rank: Vec<u32>, // each partition's place in (topic, partition) order
        zones: Option<Zones>,
    ) -> Self {
        // Rates are at least 0, where a float's bits grow with its value: sort (!bits, key rank) as one integer.
        let mut by_rate: Vec<u128> = rates
            .iter()
            .zip(&key_rank)
            .enumerate()
            .map(|(j, (&r, &rank))| {
                let bits = if r == 0.0 { 0 } else { r.to_bits() };
                ((!bits as u128) << 64) | ((rank as u128) << 32) | j as u128
            })
            .collect();
        by_rate.sort_unstable();
        let decreasing: Vec<u32> = by_rate.into_iter().map(|key| key as u32).collect();
        let mut decreasing_rank = vec![0u32; rates.len()];
        for (position, &j) in decreasing.iter().enumerate() {
            decreasing_rank[j as usize] = position as u32;
        }
        Problem {
            rates,
            lags,
            capacity,
            consumers,
            previous_owner,
            previous_ids,
            previous_held,
            gone,
            members,
            decreasing,
            decreasing_rank,
            key_rank,
            zones,
        }
    }

    pub fn uniform(&self) -> bool {
        self.consumers.cap[..self.consumers.known()]
            .iter()
            .all(|&c| c == self.capacity)
    }
}

/// The member mode fold: bins beyond the members go, largest partition first, to the member with the most
/// remaining capacity (ties to the lowest id); members the algorithm left unused get empty assignments.
fn fold_into_members(
    p: &Problem,
    members: &[u32],
    assignment: Vec<(u32, Vec<u32>)>,
) -> Vec<(u32, Vec<u32>)> {
    let mut sorted = members.to_vec();
    p.consumers.sort(&mut sorted);
    let mut slot = vec![usize::MAX; p.consumers.len()];
    for (i, &m) in sorted.iter().enumerate() {
        slot[m as usize] = i;
    }
    let mut result: Vec<(u32, Vec<u32>)> = sorted.iter().map(|&m| (m, vec![])).collect();
    let mut surplus = vec![];
    for (c, held) in assignment {
        match slot.get(c as usize) {
            Some(&i) if i != usize::MAX => result[i].1 = held,
            _ => surplus.extend(held),
        }
    }
    if let (Some(zones), false) = (&p.zones, surplus.is_empty()) {
        fold_zoned(p, zones, &mut result, surplus);
    } else if !surplus.is_empty() {
        let rates = &p.rates;
        let mut heap: BinaryHeap<Reverse<(F, u64, usize)>> = result
            .iter()
            .enumerate()
            .map(|(i, (m, held))| {
                let load = held.iter().fold(0.0, |s, &j| s + rates[j as usize]);
                Reverse((
                    F(load - p.consumers.cap[*m as usize]),
                    p.consumers.tie[*m as usize],
                    i,
                ))
            })
            .collect();
        surplus.sort_unstable_by_key(|&j| p.decreasing_rank[j as usize]);
        for j in surplus {
            let Some(Reverse((excess, tie, i))) = heap.pop() else {
                break; // no member: `outcome` finds the partitions unplaced
            };
            result[i].1.push(j);
            heap.push(Reverse((F(excess.0 + rates[j as usize]), tie, i)));
        }
    }
    result
}

/// Zone mode of the fold: a partition goes to the member of one of its racks with the most remaining capacity
/// if it fits there, else to the member with the most remaining capacity (heaps of (load − capacity, id), the
/// stale entries of a member whose load changed dropped when they come up).
fn fold_zoned(p: &Problem, zones: &Zones, result: &mut [(u32, Vec<u32>)], mut surplus: Vec<u32>) {
    type Heap = BinaryHeap<Reverse<(F, u64, usize)>>;
    let (rates, consumers) = (&p.rates, &p.consumers);
    let mut excess: Vec<f64> = result
        .iter()
        .map(|(m, held)| fsum(held.iter().map(|&j| rates[j as usize])) - consumers.cap[*m as usize])
        .collect();
    let ties: Vec<u64> = result
        .iter()
        .map(|(m, _)| consumers.tie[*m as usize])
        .collect();
    let caps: Vec<f64> = result
        .iter()
        .map(|(m, _)| consumers.cap[*m as usize])
        .collect();
    let entry = |i: usize, excess: f64| Reverse((F(excess), ties[i], i));
    let mut every: Heap = (0..result.len()).map(|i| entry(i, excess[i])).collect();
    let mut by_rack: Vec<Heap> = vec![BinaryHeap::new(); zones.names.len()];
    for (i, (m, _)) in result.iter().enumerate() {
        let rack = zones.rack_of(*m);
        if rack != NO_RACK {
            by_rack[rack as usize].push(entry(i, excess[i]));
        }
    }
    let top = |heap: &mut Heap, excess: &[f64]| -> Option<Reverse<(F, u64, usize)>> {
        while let Some(&Reverse((value, tie, i))) = heap.peek() {
            if value.0 == excess[i] {
                return Some(Reverse((value, tie, i)));
            }
            heap.pop();
        }
        None
    };
    surplus.sort_unstable_by_key(|&j| p.decreasing_rank[j as usize]);
    for j in surplus {
        let rate = rates[j as usize];
        let local = zones
            .of_partition(j)
            .iter()
            .filter_map(|&r| top(&mut by_rack[r as usize], &excess))
            .max(); // Reverse: the largest is the least (load − capacity, id)
        let fits = |Reverse((value, _, i)): Reverse<(F, u64, usize)>| {
            value.0 + rate <= caps[i] * (ROUNDING - 1.0)
        };
        let best = match local {
            Some(found) if fits(found) => found,
            _ => top(&mut every, &excess).expect("a member"),
        };
        let i = best.0 .2;
        result[i].1.push(j);
        excess[i] += rate;
        every.push(entry(i, excess[i]));
        let rack = zones.rack_of(result[i].0);
        if rack != NO_RACK {
            by_rack[rack as usize].push(entry(i, excess[i]));
        }
    }
}

/// Each consumer's rack: the one the algorithm chose, else the one known (a member's, a previous consumer's),
/// else for a new consumer of a group groupfit sizes the rack where the most of its rate is local; and the
/// rate each reads across zones.
fn zone_report(
    p: &Problem,
    zones: &Zones,
    assignment: &[(u32, Vec<u32>)],
    chosen: &[(u32, u32)],
) -> ZoneReport {
    let mut chosen_rack = vec![NO_RACK; p.consumers.len()];
    for &(c, rack) in chosen {
        chosen_rack[c as usize] = rack as i32;
    }
    let mut previous = vec![false; p.consumers.len()];
    for &c in &p.previous_ids {
        previous[c as usize] = true;
    }
    let (mut racks, mut cross) = (vec![], vec![]);
    for (c, held) in assignment {
        let c = *c as usize;
        let mut rack = chosen_rack[c];
        if rack == NO_RACK {
            rack = zones.rack_of(c as u32);
        }
        if rack == NO_RACK && p.members.is_none() && !previous[c] {
            rack = zones.best_rack(&p.rates, held);
        }
        racks.push(rack);
        cross.push(zones.cross_zone(&p.rates, held, rack));
    }
    // (fsum is correctly rounded: the zeros of the consumers that read within their zone change nothing)
    let total = fsum(cross.iter().copied().filter(|&rate| rate != 0.0));
    ZoneReport {
        racks,
        cross,
        total,
    }
}

pub fn outcome(p: &Problem, placement: Placement) -> Result<Outcome, String> {
    let chosen = placement.racks;
    let mut assignment: Vec<(u32, Vec<u32>)> = placement
        .bins
        .into_iter()
        .filter(|(_, held)| !held.is_empty())
        .collect();
    let bins_used = assignment.len();
    if let Some(members) = &p.members {
        assignment = fold_into_members(p, members, assignment);
    }
    let n = p.rates.len();
    let mut owner = vec![NONE; n];
    let mut loads = Vec::with_capacity(assignment.len());
    let mut placed = 0usize;
    for (c, held) in &assignment {
        placed += held.len();
        let mut load = 0.0;
        for &j in held {
            owner[j as usize] = *c;
            load += p.rates[j as usize];
        }
        loads.push(load);
    }
    if placed != n || owner.contains(&NONE) {
        return Err("an algorithm did not place every partition exactly once".into());
    }
    let mut sorted: Vec<u32> = assignment.iter().map(|(c, _)| *c).collect();
    p.consumers.sort(&mut sorted);
    let mut moved = vec![];
    let mut changed = vec![];
    for (j, (&old, &new)) in p.previous_owner.iter().zip(&owner).enumerate() {
        if old != new {
            changed.push(j as u32);
            if old != NONE {
                moved.push(j as u32);
            }
        }
    }
    let moved_from = moved
        .iter()
        .map(|&j| p.previous_owner[j as usize])
        .collect();
    let rscore = fsum(moved.iter().map(|&j| p.rates[j as usize])) / p.capacity;
    let overloaded = (0..n as u32)
        .filter(|&j| p.rates[j as usize] > p.consumers.cap[owner[j as usize] as usize])
        .collect();
    // the sparse delta: rows and columns that hold a change
    let mut in_rows = vec![false; p.consumers.len()];
    for &j in &changed {
        let (old, new) = (p.previous_owner[j as usize], owner[j as usize]);
        if old != NONE {
            in_rows[old as usize] = true;
        }
        in_rows[new as usize] = true;
    }
    for &c in &p.gone {
        in_rows[c as usize] = true;
    }
    let mut rows: Vec<u32> = (0..in_rows.len() as u32)
        .filter(|&c| in_rows[c as usize])
        .collect();
    p.consumers.sort(&mut rows);
    let mut row_of = vec![0u32; p.consumers.len()];
    for (r, &c) in rows.iter().enumerate() {
        row_of[c as usize] = r as u32;
    }
    let mut cells = Vec::with_capacity(2 * changed.len() + p.gone.len());
    for (column, &j) in changed.iter().enumerate() {
        let (old, new) = (p.previous_owner[j as usize], owner[j as usize]);
        if old != NONE {
            cells.push((row_of[old as usize], column as u32, -1));
        }
        cells.push((row_of[new as usize], column as u32, 1));
    }
    let mut columns = changed;
    for (g, &c) in p.gone.iter().enumerate() {
        cells.push((row_of[c as usize], columns.len() as u32, -1));
        columns.push((n + g) as u32);
    }
    Ok(Outcome {
        sorted,
        owner,
        loads,
        moved,
        moved_from,
        rscore,
        overloaded,
        bins_used,
        outputs: placement.outputs,
        rows,
        columns,
        cells,
        zones: p
            .zones
            .as_ref()
            .map(|zones| zone_report(p, zones, &assignment, &chosen)),
        assignment,
    })
}

/// Python's math.fsum: the correctly rounded sum (Shewchuk's partials, with CPython's half-even fix-up), of
/// finite summands; +inf where Python's raises OverflowError (an intermediate sum overflows).
pub fn fsum(values: impl Iterator<Item = f64>) -> f64 {
    // the partials in place while they are few (most sums), else on the heap
    let mut inline = [0.0f64; 32];
    let mut spilled: Vec<f64> = vec![];
    let mut len = 0;
    for mut x in values {
        let partials: &mut [f64] = if spilled.is_empty() {
            &mut inline
        } else {
            &mut spilled
        };
        let mut i = 0;
        for k in 0..len {
            let mut y = partials[k];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        len = i;
        if !x.is_finite() {
            return f64::INFINITY;
        }
        if x != 0.0 {
            if spilled.is_empty() && len == inline.len() {
                spilled = inline.to_vec();
            }
            if spilled.is_empty() {
                inline[len] = x;
            } else if len == spilled.len() {
                spilled.push(x);
            } else {
                spilled[len] = x;
            }
            len += 1;
        }
    }
    let partials = if spilled.is_empty() {
        &inline[..len]
    } else {
        &spilled[..len]
    };
    let mut n = partials.len();
    let mut hi = 0.0;
    if n > 0 {
        n -= 1;
        hi = partials[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = partials[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::fsum;

    #[test]
    fn fsum_as_python() {
        let max = f64::MAX;
        // math.fsum: 1.0 (correctly rounded), 0.0 of -0.0 (a zero is no partial), OverflowError (inf here)
        assert_eq!(fsum([1e100, 1.0, -1e100].into_iter()), 1.0);
        assert_eq!(fsum([-0.0].into_iter()).to_bits(), 0.0f64.to_bits());
        assert_eq!(fsum([max, 7.98e291, 7.98e291].into_iter()), f64::INFINITY);
        assert_eq!(fsum([max, 7.98e291].into_iter()), max);
        // more partials than are kept in place: single bits 2^0, 2^2, … 2^198 stay apart
        let bits: Vec<f64> = (0..100).map(|e| 2f64.powi(2 * e)).collect();
        let exact = bits.iter().rev().fold(0.0, |s, &b| s + b);
        assert_eq!(fsum(bits.iter().copied()), exact);
    }
}
