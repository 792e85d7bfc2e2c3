//! One rebalance on arrays (partition index → rate, previous owner as a consumer index) and its outcome:
//! the fold of surplus bins into the members, owners, loads, moves, Rscore (Eq. 11) and the sparse delta
//! (Eq. 9), as `app/core/assign.py` and `app/core/delta.py`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::bins::F;
use crate::consumers::Consumers;
use crate::intern::NONE;

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
}

pub enum Outputs {
    None,
    /// (the caps are echoed from the parameters as given: bindings.rs)
    Budget {
        rscore: f64,
        moves: u64,
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
    if !surplus.is_empty() {
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

pub fn outcome(p: &Problem, placement: Placement) -> Result<Outcome, String> {
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
        assignment,
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
    })
}

/// Python's math.fsum: the correctly rounded sum (Shewchuk's partials, with CPython's half-even fix-up), of
/// finite summands; +inf where Python's raises OverflowError (an intermediate sum overflows).
pub fn fsum(values: impl Iterator<Item = f64>) -> f64 {
    let mut partials: Vec<f64> = vec![];
    for mut x in values {
        let mut i = 0;
        for k in 0..partials.len() {
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
        partials.truncate(i);
        if !x.is_finite() {
            return f64::INFINITY;
        }
        if x != 0.0 {
            partials.push(x);
        }
    }
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
    }
}
