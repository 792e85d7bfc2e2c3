//! Any Fit (Landau et al. §II-B, §VI-A) and Modified Any Fit (Algorithm 1, Table II) with the migration
//! budget, as `app/core/algorithms/any_fit.py`, `modified_any_fit.py` and `budget.py`.

use crate::bins::{within, Bins, Rule, F};
use crate::intern::NONE;
use crate::problem::{Outputs, Placement, Problem};

pub fn any_fit(p: &mut Problem, rule: Rule, decreasing: bool) -> Placement {
    let order: Vec<u32> = if decreasing {
        p.decreasing.clone()
    } else {
        (0..p.rates.len() as u32).collect()
    };
    let members = p.members.clone();
    let mut bins = Bins::new(
        rule,
        &p.rates,
        &p.previous_owner,
        &mut p.consumers,
        members.as_deref(),
        &p.previous_ids,
    );
    for j in order {
        bins.place(j);
    }
    Placement {
        bins: bins.ids.into_iter().zip(bins.held).collect(),
        outputs: Outputs::None,
    }
}

/// Modified Any Fit's order of the previous consumers (Table II), largest first: by their total rate (MWF,
/// MBF) or by their largest partition (MWFP, MBFP).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ConsumerOrder {
    Cumulative,
    Max,
}

/// A migration budget (`app.core.algorithms.budget.MigrationBudget`): caps on the Rscore and on the moves.
pub struct Budget {
    pub max_rscore: Option<f64>,
    pub max_moves: Option<u64>,
}

/// Caps on the Rscore (Eq. 11) and on the partitions that change consumer; what is spent of them.
pub struct Spending<'r> {
    rates: &'r [f64],
    max_rate: Option<f64>,
    max_moves: Option<u64>,
    pub rate: f64,
    pub moves: u64,
    pub refused: u64,
}

impl<'r> Spending<'r> {
    pub fn new(
        rates: &'r [f64],
        capacity: f64,
        max_rscore: Option<f64>,
        max_moves: Option<u64>,
    ) -> Self {
        // the Rscore cap as a rate, up to float rounding of the summed rates
        let max_rate = max_rscore.map(|r| r * capacity * (1.0 + 1e-12));
        Spending {
            rates,
            max_rate,
            max_moves,
            rate: 0.0,
            moves: 0,
            refused: 0,
        }
    }

    pub fn limited(&self) -> bool {
        self.max_rate.is_some() || self.max_moves.is_some()
    }

    pub fn affords(&self, j: u32) -> bool {
        if let Some(m) = self.max_moves {
            if self.moves + 1 > m {
                return false;
            }
        }
        self.max_rate
            .is_none_or(|cap| self.rate + self.rates[j as usize] <= cap)
    }

    pub fn spend(&mut self, j: u32) {
        self.rate += self.rates[j as usize];
        self.moves += 1;
    }
}

/// Algorithm 1: previous consumers largest first (`cumulative`: by their total rate, else by their largest
/// partition); each one's partitions migrate smallest first into open bins while the budget affords it; at
/// the first that fits nowhere the consumer is opened and keeps the rest largest first until one does not
/// fit; the unassigned set then goes through the fit rule largest first.
pub fn modified_any_fit(
    p: &mut Problem,
    rule: Rule,
    order: ConsumerOrder,
    budget: &Budget,
) -> Placement {
    let rates = &p.rates;
    let mut spending = Spending::new(rates, p.capacity, budget.max_rscore, budget.max_moves);
    let members = p.members.clone();
    let known = p.consumers.known();
    // line 5 for every consumer at once: its partitions, largest first
    let mut psets: Vec<Vec<u32>> = vec![vec![]; known];
    let mut unassigned: Vec<u32> = vec![];
    for &j in &p.decreasing {
        let owner = p.previous_owner[j as usize];
        if owner == NONE {
            unassigned.push(j);
        } else {
            psets[owner as usize].push(j);
        }
    }
    let mut visits: Vec<u32> = (0..known as u32)
        .filter(|&c| !psets[c as usize].is_empty())
        .collect();
    let size: Vec<f64> = psets
        .iter()
        .map(|pset| match (pset.first(), order) {
            (None, _) => 0.0,
            (Some(&first), ConsumerOrder::Max) => rates[first as usize],
            (Some(_), ConsumerOrder::Cumulative) => {
                pset.iter().fold(0.0, |sum, &j| sum + rates[j as usize])
            }
        })
        .collect();
    // line 2: largest first, ties by id
    p.consumers.sort(&mut visits);
    visits.sort_by_key(|&c| std::cmp::Reverse(F(size[c as usize])));
    let mut bins = Bins::new(
        rule,
        rates,
        &p.previous_owner,
        &mut p.consumers,
        members.as_deref(),
        &p.previous_ids,
    );
    let mut home: Vec<usize> = vec![usize::MAX; known];
    for consumer in visits {
        let pset = &mut psets[consumer as usize];
        // a consumer that is gone keeps nothing
        let stays = bins.pool.allowed(bins.consumers, consumer);
        // lines 6-13: smallest first into open bins, while the budget affords the move
        while let Some(&j) = pset.last() {
            let may_move = !stays || spending.affords(j);
            if !may_move || !bins.place_open(j) {
                break;
            }
            spending.spend(j);
            pset.pop();
        }
        if pset.is_empty() {
            continue; // lines 14-16
        }
        let own = bins.open(consumer); // line 17
        let taken = bins.fill(own, pset); // lines 18-25
        if stays {
            home[consumer as usize] = own;
        } else {
            for &j in &pset[..taken] {
                spending.spend(j);
            }
        }
        unassigned.extend_from_slice(&pset[taken..]);
    }
    let rank = &p.decreasing_rank;
    unassigned.sort_unstable_by_key(|&j| rank[j as usize]);
    for j in unassigned {
        // lines 27-30
        let b = bins.find(j);
        let was = p.previous_owner[j as usize];
        let stay = if was == NONE || (was as usize) >= known {
            usize::MAX
        } else {
            home[was as usize]
        };
        if stay == usize::MAX || b == Some(stay) {
            let b = bins.place(j);
            if was != NONE && bins.ids[b] != was {
                spending.spend(j);
            }
        } else if spending.affords(j) {
            bins.place(j);
            spending.spend(j);
        } else {
            spending.refused += 1; // the budget is spent: j stays where it is
            bins.put(stay, j);
        }
    }
    let outputs = if spending.limited() {
        let mut over: Vec<u32> = (0..bins.ids.len())
            .filter(|&b| bins.held[b].len() > 1 && !within(bins.load[b], bins.cap[b]))
            .map(|b| bins.ids[b])
            .collect();
        bins.consumers.sort(&mut over);
        Outputs::Budget {
            rscore: spending.rate / p.capacity,
            moves: spending.moves,
            refused: spending.refused,
            overloaded: over,
        }
    } else {
        Outputs::None
    };
    Placement {
        bins: bins.ids.into_iter().zip(bins.held).collect(),
        outputs,
    }
}
