//! Any Fit (Landau et al. §II-B, §VI-A) and Modified Any Fit (Algorithm 1, Table II) with the migration
//! budget, as `app/core/algorithms/any_fit.py`, `modified_any_fit.py` and `budget.py`.

use crate::bins::{within, Bins, Rule, F};
use crate::intern::NONE;
use crate::problem::{Outputs, Placement, Problem};
use crate::search::finish_zoned;

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
        p.zones.as_ref(),
    );
    for j in order {
        bins.place(j);
    }
    if bins.zones.is_some() {
        let spending = Spending::new(&p.rates, p.capacity, None, None);
        let state = finish_zoned(
            bins,
            spending,
            p.capacity,
            &p.previous_ids,
            (&p.decreasing, &p.decreasing_rank),
            members.is_some(),
        );
        return state.placement(&p.key_rank, Outputs::None);
    }
    Placement {
        bins: bins.ids.into_iter().zip(bins.held).collect(),
        outputs: Outputs::None,
        racks: vec![],
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
    pub max_rate: Option<f64>,
    pub max_moves: Option<i64>,
    pub rate: f64,
    /// (a search refunds the moves it undoes: below 0 where the algorithm charged none)
    pub moves: i64,
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
            max_moves: max_moves.map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
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

    /// Whether what is spent is within both caps.
    pub fn within(&self) -> bool {
        if self.max_moves.is_some_and(|m| self.moves > m) {
            return false;
        }
        self.max_rate.is_none_or(|cap| self.rate <= cap)
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
        p.zones.as_ref(),
    );
    let zones = bins.zones;
    let mut let_go = vec![false; if zones.is_some() { rates.len() } else { 0 }];
    let mut home: Vec<usize> = vec![usize::MAX; known];
    let mut across: Vec<u32> = vec![]; // a consumer's partitions read across zones, in order
    for consumer in visits {
        let pset = &mut psets[consumer as usize];
        // a consumer that is gone keeps nothing
        let stays = bins.pool.allowed(bins.consumers, consumer);
        if let (Some(zones), true) = (zones, stays) {
            // zone mode: the partitions it reads across zones go (without members: a consumer can be started
            // in their zones), or come after its others (with members: kept while they fit)
            let rack = zones.rack_of(consumer);
            across.clear();
            pset.retain(|&j| {
                let crosses = zones.crosses(j, rack);
                if crosses {
                    across.push(j);
                }
                !crosses
            });
            if members.is_none() {
                for &j in &across {
                    let_go[j as usize] = true;
                }
                unassigned.extend_from_slice(&across);
            } else {
                pset.extend_from_slice(&across);
            }
        }
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
        let was = p.previous_owner[j as usize];
        if zones.is_some() && let_go[j as usize] {
            place_let_go(&mut bins, &mut spending, &mut home, j, was);
            continue;
        }
        let b = bins.choose(j);
        // (zone mode: placed where chosen, not chosen again)
        let place = |bins: &mut Bins| {
            if zones.is_some() {
                bins.place_chosen(j, b)
            } else {
                bins.place(j)
            }
        };
        let stay = if was == NONE || (was as usize) >= known {
            usize::MAX
        } else {
            home[was as usize]
        };
        if stay == usize::MAX || b == Some(stay) {
            let b = place(&mut bins);
            if was != NONE && bins.ids[b] != was {
                spending.spend(j);
            }
        } else if spending.affords(j) {
            place(&mut bins);
            spending.spend(j);
        } else {
            spending.refused += 1; // the budget is spent: j stays where it is
            bins.put(stay, j);
        }
    }
    let capacity = p.capacity;
    let budget =
        |spending: &Spending, mut over: Vec<u32>, consumers: &crate::consumers::Consumers| {
            if !spending.limited() {
                return Outputs::None;
            }
            consumers.sort(&mut over);
            Outputs::Budget {
                rscore: spending.rate / capacity,
                moves: spending.moves,
                refused: spending.refused,
                overloaded: over,
            }
        };
    if zones.is_some() {
        let state = finish_zoned(
            bins,
            spending,
            capacity,
            &p.previous_ids,
            (&p.decreasing, rank),
            members.is_some(),
        );
        let outputs = budget(&state.spending, state.overloaded(), state.consumers);
        return state.placement(&p.key_rank, outputs);
    }
    let over: Vec<u32> = (0..bins.ids.len())
        .filter(|&b| bins.held[b].len() > 1 && !within(bins.load[b], bins.cap[b]))
        .map(|b| bins.ids[b])
        .collect();
    let outputs = budget(&spending, over, bins.consumers);
    Placement {
        bins: bins.ids.into_iter().zip(bins.held).collect(),
        outputs,
        racks: vec![],
    }
}

/// Zone mode without members: a partition its consumer `was` reads across zones goes to a consumer of its
/// racks (open, else new) if the budget affords the move; else it stays with `was`.
fn place_let_go(bins: &mut Bins, spending: &mut Spending, home: &mut [usize], j: u32, was: u32) {
    let target = bins
        .local_choice(j)
        .expect("a consumer can always be started in a partition's racks");
    if spending.affords(j) {
        let b = match target {
            Some(b) => b,
            None => bins.open_local(j).expect("a consumer started in its racks"),
        };
        bins.put(b, j);
        spending.spend(j);
        return;
    }
    spending.refused += 1;
    let mut stay = home[was as usize];
    if stay == usize::MAX {
        stay = match bins.bin_of.get(was as usize) {
            Some(&b) if b != NONE => b as usize,
            _ => bins.open(was),
        };
    }
    home[was as usize] = stay;
    bins.put(stay, j);
}
