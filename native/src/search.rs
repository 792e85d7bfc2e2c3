//! The last step of the zone-aware Best and Worst Fit algorithms, as `finish_zoned` of
//! `app/core/algorithms/search.py`: the bins as an assignment under search, then consumers closed
//! (`consolidate`, `merge`), new consumers moved to their best rack (`rerack`) and partitions brought into their
//! zone (`localize`), with consumers before cross-zone rate before moved rate, within the migration budget.
//! Work is counted, never timed, so the same input gives the same answer; every float is added in the
//! reference's order, so the answer is the reference's to the bit.

use std::collections::{BTreeMap, BTreeSet};

use crate::bins::{ordered, within, Bins, F, ROUNDING};
use crate::consumers::{Consumers, Pool};
use crate::fit::Spending;
use crate::hash::Map;
use crate::intern::NONE;
use crate::problem::{Outputs, Placement};
use crate::zones::{Zones, NO_RACK};

/// `app.core.model.ROUNDING_ERROR`
const ROUNDING_ERROR: f64 = 1e-12;
/// Consumers (those with the most room) a partition that fits nowhere may eject a smaller one from.
const EJECTION_TRIES: usize = 32;
/// Consumers (those with the most room in its racks) a partition read across zones may swap with.
const SWAP_TRIES: usize = 8;
/// The weight of a consumer (in units of C): consumers come before everything else.
const CONSUMER_FIRST: f64 = 1e12;
/// The weight of the cross-zone rate: it comes before the moved rate.
const ZONE_FIRST: f64 = 1e6;
/// `merge` stops after this many neighbourhoods in a row it could not improve.
const FAILED_MERGES: usize = 64;
/// `localize` stops trying, for the rest of a pass, the partitions of the racks whose last this many failed.
const FAILED_LOCALIZES: usize = 64;
/// `consolidate` stops a pass after this many consumers in a row it could not close (plus 4 per rack).
const FAILED_CLOSES: usize = 16;
/// Consumers re-placed together by `resolve`, and the branch-and-bound nodes one may take.
const K: usize = 4;
const NODES: i64 = 1_000;

/// (a float, a consumer's id) as one integer, ordered as the tuple: the slack indices' (load − capacity, id).
fn order_key(value: f64, tie: u64) -> u128 {
    (ordered(value) as u128) << 64 | tie as u128
}

/// The bound `best_fit` looks below: entries whose slack is below `value`.
fn below(value: f64) -> u128 {
    (ordered(value) as u128) << 64
}

pub struct SearchState<'p, 's> {
    rates: &'p [f64],
    capacity: f64,
    /// the partitions largest first (ties by id), and each one's place there
    decreasing: &'p [u32],
    rank: &'p [u32],
    zones: &'p Zones,
    members: bool,
    is_previous: Vec<bool>,
    pub consumers: &'p mut Consumers,
    pub pool: Pool,
    pub spending: Spending<'s>,
    pub ids: Vec<u32>,
    tie: Vec<u64>,
    pub cap: Vec<f64>,
    pub held: Vec<Vec<u32>>,
    pub load: Vec<f64>,
    pub rack: Vec<i32>,
    /// each partition's bin (OUT_BIN: none), and its previous consumer's bin (NEW: it had none; OUT_BIN: that
    /// consumer has no bin here), as 32 bits: the search reads them at random, the less memory the better
    owner: Vec<u32>,
    previous_bin: Vec<u32>,
    cross: f64,
    /// The consumers emptied by the search, by rack (index rack + 1: 0 for those without one).
    idle: Vec<BTreeSet<usize>>,
    work: i64,
    /// The open consumers by (load − capacity, id), all of them (until `merge`, the last to read it, is done)
    /// and by rack; each one's entry there.
    by_slack: Option<BTreeMap<u128, usize>>,
    rack_slack: Vec<BTreeMap<u128, usize>>,
    slack_entry: Vec<Option<u128>>,
    /// Partitions being moved with the slack indices left as they are (no one reads them meanwhile): each
    /// consumer's entry is renewed once the moves are done.
    placing: bool,
    /// The partitions with racks read across zones, by rank: `localize`'s list, in its order.
    crossing: Marks,
    /// The work `localize`'s exact re-placements may still spend
    exact_left: i64,
    /// `improve`'s tables, refilled for each neighbourhood
    hood: Neighbourhood,
}

const OUT: usize = usize::MAX;
const OUT_BIN: u32 = u32::MAX;
const NEW: u32 = u32::MAX - 1;

/// A bin as `owner` and `previous_bin` hold it, back as an index (OUT where it is none).
fn bin(b: u32) -> usize {
    if b >= NEW {
        OUT
    } else {
        b as usize
    }
}

impl<'p, 's> SearchState<'p, 's> {
    fn idle_of(&mut self, b: usize) -> &mut BTreeSet<usize> {
        &mut self.idle[(self.rack[b] + 1) as usize]
    }

    fn put(&mut self, b: usize, j: u32) {
        if self.held[b].is_empty() {
            self.idle_of(b).remove(&b);
        }
        self.held[b].push(j);
        self.load[b] += self.rates[j as usize];
        self.owner[j as usize] = b as u32;
        if !self.zones.local(j, self.rack[b]) {
            self.cross += self.rates[j as usize];
            if self.zones.has_racks(j) {
                self.crossing.set(self.rank[j as usize]);
            }
        }
        self.track(b);
    }

    fn take(&mut self, b: usize, j: u32) {
        let at = self.held[b]
            .iter()
            .position(|&x| x == j)
            .expect("a partition of the bin");
        self.held[b].remove(at);
        if self.held[b].is_empty() {
            self.idle_of(b).insert(b);
        }
        self.load[b] -= self.rates[j as usize];
        self.owner[j as usize] = OUT_BIN;
        if !self.zones.local(j, self.rack[b]) {
            self.cross -= self.rates[j as usize];
            self.crossing.unset(self.rank[j as usize]);
        }
        self.track(b);
    }

    /// Bin b's entry in the slack indices, renewed where its load changed (unless `improve` is placing).
    fn track(&mut self, b: usize) {
        let entry =
            (!self.held[b].is_empty()).then(|| order_key(self.load[b] - self.cap[b], self.tie[b]));
        if self.placing || entry == self.slack_entry[b] {
            return;
        }
        let rack = self.rack[b];
        if let Some(old) = self.slack_entry[b] {
            if let Some(by_slack) = &mut self.by_slack {
                by_slack.remove(&old);
            }
            if rack != NO_RACK {
                self.rack_slack[rack as usize].remove(&old);
            }
        }
        self.slack_entry[b] = entry;
        if let Some(entry) = entry {
            if let Some(by_slack) = &mut self.by_slack {
                by_slack.insert(entry, b);
            }
            if rack != NO_RACK {
                self.rack_slack[rack as usize].insert(entry, b);
            }
        }
    }

    /// A consumer the pool opened, as an empty bin.
    fn add(&mut self, c: u32) -> usize {
        self.ids.push(c);
        self.tie.push(self.consumers.tie[c as usize]);
        self.cap.push(self.consumers.cap[c as usize]);
        self.held.push(vec![]);
        self.load.push(0.0);
        self.rack.push(self.pool.rack_of(c));
        self.slack_entry.push(None);
        self.ids.len() - 1
    }

    fn owner(&self, j: u32) -> usize {
        bin(self.owner[j as usize])
    }

    fn local(&self, j: u32, b: usize) -> bool {
        self.zones.local(j, self.rack[b])
    }

    fn fits(&self, b: usize, j: u32) -> bool {
        self.held[b].is_empty() || within(self.load[b] + self.rates[j as usize], self.cap[b])
    }

    /// Whether partition j on bin b is a move (it had another consumer).
    fn cost(&self, j: u32, b: usize) -> bool {
        let was = self.previous_bin[j as usize];
        was != NEW && was as usize != b
    }

    fn by_slack(&self) -> &BTreeMap<u128, usize> {
        self.by_slack.as_ref().expect("the index of every consumer")
    }

    /// The open consumer with the least remaining capacity that takes `rate` (among one rack's when `rack` is
    /// given), other than `excluded`, or None.
    fn best_fit(&self, rate: f64, excluded: usize, rack: Option<u32>) -> Option<usize> {
        let runs = match rack {
            Some(r) => &self.rack_slack[r as usize],
            None => self.by_slack(),
        };
        let mut found = runs
            .range(..below(self.capacity * ROUNDING_ERROR - rate))
            .next_back();
        if let Some((&key, &b)) = found {
            if b == excluded {
                found = runs.range(..key).next_back();
            }
        }
        let (_, &b) = found?;
        within(self.load[b] + rate, self.cap[b]).then_some(b)
    }

    /// The consumer of one of j's racks with the least remaining capacity that takes j, or None.
    fn best_fit_local(&self, j: u32, excluded: usize) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &r in self.zones.of_partition(j) {
            if let Some(b) = self.best_fit(self.rates[j as usize], excluded, Some(r)) {
                if best.is_none_or(|a| self.slack_entry[b] > self.slack_entry[a]) {
                    best = Some(b);
                }
            }
        }
        best
    }

    /// Partition j to bin b (OUT: out of every bin), its cost charged or refunded (one unit of work).
    fn move_to(&mut self, j: u32, b: usize) {
        self.work += 1;
        let was = self.owner(j);
        if was != OUT {
            if self.cost(j, was) {
                self.spending.rate -= self.rates[j as usize];
                self.spending.moves -= 1;
            }
            self.take(was, j);
        }
        if b != OUT {
            self.put(b, j);
            if self.cost(j, b) {
                self.spending.spend(j);
            }
        }
    }

    /// Open consumers, least utilised first, ties by id (one unit of work each).
    fn targets(&mut self) -> Targets {
        self.work += self.ids.len() as i64;
        let mut keys = Vec::with_capacity(self.ids.len());
        keys.extend(
            (0..self.ids.len())
                .filter(|&b| !self.held[b].is_empty())
                .map(|b| (order_key(self.load[b] / self.cap[b], self.tie[b]), b)),
        );
        Targets {
            keys,
            next: 0,
            sorted: 0,
        }
    }

    /// Close the target if each of its partitions, largest first, finds another consumer and that lowers
    /// the objective within the budget; else leave everything as it was.
    fn dissolve(&mut self, target: usize) -> bool {
        let mut items = self.held[target].clone();
        by_rank(&mut items, self.rank);
        let (before_rate, before_moves, before_cross) =
            (self.spending.rate, self.spending.moves, self.cross);
        let mut journal: Vec<(u32, usize)> = vec![];
        self.placing = true; // the target's entry renewed once, when it is empty
        for &j in &items {
            journal.push((j, target));
            self.move_to(j, OUT);
        }
        self.placing = false;
        self.track(target);
        let closed = items
            .iter()
            .all(|&j| self.relocate(j, target, &mut journal));
        let mut gain = CONSUMER_FIRST * self.capacity - (self.spending.rate - before_rate);
        gain -= ZONE_FIRST * (self.cross - before_cross);
        if closed && gain > 1e-9 && self.spending.within() {
            return true;
        }
        // undone, each consumer's entry renewed once
        self.placing = true;
        let mut touched = Vec::with_capacity(2 * journal.len());
        for &(j, b) in journal.iter().rev() {
            touched.extend([self.owner(j), b]);
            self.move_to(j, b);
        }
        self.placing = false;
        for b in touched.into_iter().filter(|&b| b != OUT) {
            self.track(b);
        }
        self.spending.rate = before_rate;
        self.spending.moves = before_moves;
        self.cross = before_cross;
        false
    }

    /// Put j (out of every bin) on another open consumer: a consumer of j's racks first (its previous one,
    /// else Best Fit among them), then its previous one, then Best Fit, then by ejecting a smaller partition
    /// from one of the consumers with the most room into Best Fit elsewhere.
    fn relocate(&mut self, j: u32, target: usize, journal: &mut Vec<(u32, usize)>) -> bool {
        let rates = self.rates;
        self.work += 1;
        let home = bin(self.previous_bin[j as usize]);
        let home_open = home != OUT && home != target && !self.held[home].is_empty();
        if home_open && self.local(j, home) && self.fits(home, j) {
            self.move_to(j, home);
            return true;
        }
        if let Some(b) = self.best_fit_local(j, OUT) {
            self.move_to(j, b);
            return true;
        }
        if home_open && self.fits(home, j) {
            self.move_to(j, home);
            return true;
        }
        if let Some(b) = self.best_fit(rates[j as usize], OUT, None) {
            self.move_to(j, b);
            return true;
        }
        let roomiest: Vec<usize> = self
            .by_slack()
            .values()
            .take(EJECTION_TRIES)
            .copied()
            .collect();
        let (rank, rj) = (self.rank, rates[j as usize]);
        for b in roomiest {
            // its partitions smaller than j, smallest first (ties by rank); one unit of work for each partition
            // looked at in that order, the larger ones after them (all of them, where none makes room)
            if !self.held[b].iter().any(|&y| self.makes_room(b, y, rj)) {
                self.work += self.held[b].len() as i64;
                continue;
            }
            let mut smaller: Vec<u32> = self.held[b]
                .iter()
                .copied()
                .filter(|&y| rates[y as usize] < rj)
                .collect();
            let larger = self.held[b].len() - smaller.len();
            smaller.sort_unstable_by(|&x, &y| {
                F(rates[x as usize])
                    .cmp(&F(rates[y as usize]))
                    .then(rank[x as usize].cmp(&rank[y as usize]))
            });
            for y in smaller {
                self.work += 1;
                if !self.makes_room(b, y, rj) {
                    continue;
                }
                let ry = rates[y as usize];
                journal.push((y, b));
                // b's entry is left as it was while y is out: Best Fit excludes b wherever it stands
                self.placing = true;
                self.move_to(y, OUT);
                self.placing = false;
                match self.best_fit(ry, b, None) {
                    None => {
                        self.move_to(y, b);
                        journal.pop();
                    }
                    Some(other) => {
                        self.track(b);
                        self.move_to(y, other);
                        self.move_to(j, b);
                        return true;
                    }
                }
            }
            self.work += larger as i64;
        }
        false
    }

    /// Whether taking partition y out of bin b, smaller than a partition of rate `rj`, leaves room for it.
    fn makes_room(&self, b: usize, y: u32, rj: f64) -> bool {
        let ry = self.rates[y as usize];
        ry < rj && within(self.load[b] - ry + rj, self.cap[b])
    }

    /// Re-place the partitions of `bins` among them exactly; whether a better placement was kept.
    fn improve(&mut self, bins: &[usize], limit: i64) -> bool {
        let cutoff = NODES.min(limit - self.work);
        let setup = bins.iter().map(|&b| self.held[b].len()).sum::<usize>() * bins.len();
        if setup as i64 + 1 > cutoff {
            // the search stops at its first node, having found nothing: count it without setting it up
            self.work += setup as i64 + 1;
            return false;
        }
        let mut hood = std::mem::take(&mut self.hood);
        hood.fill(self, bins);
        let (spent, better) = hood.solve(cutoff);
        self.work += spent;
        if better {
            self.placing = true;
            for (&j, &slot) in hood.items.iter().zip(&hood.best) {
                let b = hood.bins[slot];
                if self.owner(j) != b {
                    self.move_to(j, b);
                }
            }
            self.placing = false;
            for &b in &hood.bins {
                self.track(b);
            }
        }
        self.hood = hood;
        better
    }

    /// The K open consumers with the most remaining capacity (ties by id).
    fn roomiest(&self) -> Vec<usize> {
        self.by_slack().values().take(K).copied().collect()
    }

    /// Whether the target and the K − 1 other consumers of `roomiest` (`bins`, filled here) have room for the
    /// partitions of all but one of them.
    fn closable(&self, target: usize, roomiest: &[usize], bins: &mut Vec<usize>) -> bool {
        bins.clear();
        bins.push(target);
        bins.extend(roomiest.iter().filter(|&&b| b != target).take(K - 1));
        let load = bins.iter().fold(0.0, |s, &b| s + self.load[b]);
        let caps = bins.iter().fold(0.0, |s, &b| s + self.cap[b]);
        let least = bins
            .iter()
            .map(|&b| self.cap[b])
            .min_by(|a, b| F(*a).cmp(&F(*b)))
            .expect("the target");
        load <= (caps - least) * ROUNDING
    }

    /// Passes of `dissolve` over the consumers, least utilised first, until a pass closes none, it fails
    /// too often in a row, or `limit` units of work are spent.
    fn consolidate(&mut self, limit: i64) {
        let give_up = FAILED_CLOSES + 4 * self.zones.names.len();
        let mut closed = 0;
        loop {
            let (mut failures, before) = (0, closed);
            let mut free = self.free_room();
            for target in self.targets() {
                if self.work >= limit || failures >= give_up {
                    break;
                }
                let room = positive(self.cap[target] * ROUNDING - self.load[target]);
                if self.held[target].is_empty() || self.load[target] > free - room {
                    continue;
                }
                if self.dissolve(target) {
                    closed += 1;
                    failures = 0;
                    free = self.free_room();
                } else {
                    failures += 1;
                }
            }
            if closed == before || self.work >= limit {
                return;
            }
        }
    }

    /// The capacity left on the open consumers (one unit of work each).
    fn free_room(&mut self) -> f64 {
        self.work += self.ids.len() as i64;
        (0..self.ids.len())
            .filter(|&b| !self.held[b].is_empty())
            .fold(0.0, |sum, b| {
                sum + positive(self.cap[b] * ROUNDING - self.load[b])
            })
    }

    /// One pass of `resolve` over the consumers, least utilised first, each with the consumers of the most
    /// room, until it fails FAILED_MERGES times in a row or `limit` units of work are spent.
    fn merge(&mut self, limit: i64) {
        let (mut failures, mut bins, mut roomiest) = (0, Vec::with_capacity(K), self.roomiest());
        // where no neighbourhood can close a consumer now, the pass changes nothing but the work it counts
        let open = |b: &usize| !self.held[*b].is_empty();
        if !(0..self.ids.len())
            .filter(open)
            .any(|b| self.closable(b, &roomiest, &mut bins))
        {
            self.work += self.ids.len() as i64;
            return;
        }
        for target in self.targets() {
            if self.work >= limit || failures >= FAILED_MERGES {
                break;
            }
            if self.held[target].is_empty() || !self.closable(target, &roomiest, &mut bins) {
                continue; // no consumer can go
            }
            if self.improve(&bins, limit) {
                failures = 0;
                roomiest = self.roomiest();
            } else {
                failures += 1;
            }
        }
    }

    /// Without members: each new consumer runs in the rack where the most of its rate is local (ties: its
    /// rack, then the first by name).
    fn rerack(&mut self) {
        if self.members {
            return;
        }
        let (rates, zones) = (self.rates, self.zones);
        for b in 0..self.ids.len() {
            let c = self.ids[b];
            if self.held[b].is_empty() || self.is_previous.get(c as usize) == Some(&true) {
                continue;
            }
            self.work += self.held[b].len() as i64;
            let best = zones.best_rack(rates, &self.held[b]);
            if best == NO_RACK || best == self.rack[b] {
                continue;
            }
            if zones.cross_zone(rates, &self.held[b], best)
                >= zones.cross_zone(rates, &self.held[b], self.rack[b])
            {
                continue; // a tie: it stays where it was opened
            }
            let items = self.held[b].clone();
            for &j in &items {
                self.take(b, j);
            }
            self.idle_of(b).remove(&b);
            self.rack[b] = best;
            self.pool.move_rack(c, best);
            for &j in &items {
                self.put(b, j);
            }
        }
    }

    /// Each partition read across zones, largest first, moves into its zone or swaps with a partition there,
    /// whichever lowers Z·cross-zone rate + moved rate the most within the budget; where neither does, its
    /// consumer and those of its racks with the most room are re-placed exactly. Passes until one keeps
    /// nothing or `limit` units of work are spent.
    fn localize(&mut self, limit: i64) {
        let mut kept = 0;
        while self.work < limit {
            self.work += self.owner.len() as i64 / 16 + 1;
            let before = kept;
            // (largest first: the marks are by rank)
            let crossing: Vec<Crossing> = self
                .crossing
                .iter()
                .map(|r| Crossing::of(self.decreasing[r as usize], self.zones))
                .collect();
            // per racks: partitions in a row left across zones; a pass whose every racks is done ends
            let mut failed = Failures::of(&crossing, self.zones);
            for &c in &crossing {
                if self.work >= limit || failed.all_done() {
                    break;
                }
                if failed.done(c) || self.local(c.j, self.owner(c.j)) {
                    continue;
                }
                if self.localize_one(c.j, limit) {
                    kept += 1;
                    failed.reset(c);
                } else {
                    failed.add(c);
                }
            }
            if kept == before {
                break;
            }
        }
    }

    /// What moving j from bin a to bin b lowers Z·cross + moved rate by.
    fn gain(&self, j: u32, a: usize, b: usize) -> f64 {
        let rate = self.rates[j as usize];
        let zone = ZONE_FIRST * rate * (self.local(j, b) as i32 - self.local(j, a) as i32) as f64;
        zone - rate * (self.cost(j, b) as i32 - self.cost(j, a) as i32) as f64
    }

    fn localize_one(&mut self, j: u32, limit: i64) -> bool {
        let rates = self.rates;
        let a = self.owner(j);
        let home = bin(self.previous_bin[j as usize]);
        let b = if home != OUT && home != a && self.local(j, home) && self.fits(home, j) {
            Some(home)
        } else {
            self.best_fit_local(j, OUT)
        };
        let mut best = 1e-9 * self.capacity;
        let mut step: Option<(usize, Option<u32>)> = None;
        if let Some(b) = b {
            self.work += 1;
            let gain = self.gain(j, a, b);
            if gain > best && (!self.cost(j, b) || self.cost(j, a) || self.spending.affords(j)) {
                best = gain;
                step = Some((b, None));
            }
        }
        let room_a = self.cap[a] * ROUNDING - self.load[a];
        let racks = self.zones.of_partition(j);
        let tries: Vec<usize> = racks
            .iter()
            .flat_map(|&r| {
                self.rack_slack[r as usize]
                    .values()
                    .take(SWAP_TRIES)
                    .copied()
            })
            .collect();
        let rj = rates[j as usize];
        for &other in &tries {
            if other == a {
                continue;
            }
            let room = self.cap[other] * ROUNDING - self.load[other];
            for i in 0..self.held[other].len() {
                let y = self.held[other][i];
                self.work += 1;
                let ry = rates[y as usize];
                if !(rj - room <= ry && ry <= rj + room_a) {
                    continue;
                }
                let gain = self.gain(j, a, other) + self.gain(y, other, a);
                if gain > best {
                    best = gain;
                    step = Some((other, Some(y)));
                }
            }
        }
        let Some((b, y)) = step else {
            // its consumer, an idle one of its racks and those of its racks with the most room
            let mut bins = vec![a];
            for &t in &tries {
                if t != a && !bins.contains(&t) {
                    bins.push(t);
                }
            }
            bins.truncate(K - 1);
            if let Some(idle) = self.idle_in(racks) {
                bins.push(idle);
            }
            if bins.len() < 2 || self.exact_left <= 0 {
                return false;
            }
            let before = self.work;
            let better = self.improve(&bins, limit);
            self.exact_left -= self.work - before;
            return better;
        };
        let before = (self.spending.rate, self.spending.moves, self.cross);
        self.exchange(j, b, y, a);
        if self.spending.within()
            || (self.spending.moves <= before.1 && self.spending.rate <= before.0)
        {
            return true;
        }
        self.exchange(j, a, y, b); // undone
        self.spending.rate = before.0;
        self.spending.moves = before.1;
        self.cross = before.2;
        false
    }

    /// j to bin `to_j` and y (if any) to bin `to_y`, y out first so that each finds its room.
    fn exchange(&mut self, j: u32, to_j: usize, y: Option<u32>, to_y: usize) {
        if let Some(y) = y {
            self.move_to(y, OUT);
        }
        self.move_to(j, to_j);
        if let Some(y) = y {
            self.move_to(y, to_y);
        }
    }

    /// An empty consumer in one of `racks` (one closed before, else one the pool opens there), or None.
    fn idle_in(&mut self, racks: &[u32]) -> Option<usize> {
        let idle = racks
            .iter()
            .filter_map(|&r| self.idle[r as usize + 1].first())
            .min();
        if let Some(&b) = idle {
            return Some(b);
        }
        let c = self.pool.open_for(self.consumers, racks, NONE)?;
        let b = self.add(c);
        self.idle_of(b).insert(b);
        Some(b)
    }

    /// Consumers holding more than one partition above their capacity.
    pub fn overloaded(&self) -> Vec<u32> {
        (0..self.ids.len())
            .filter(|&b| self.held[b].len() > 1 && !within(self.load[b], self.cap[b]))
            .map(|b| self.ids[b])
            .collect()
    }

    /// The bins holding partitions, each with its partitions in (topic, partition) order, and the rack of
    /// each one whose rack is known or was chosen.
    pub fn placement(mut self, key_rank: &[u32], outputs: Outputs) -> Placement {
        // (`key_rank` places each partition once: every partition, in that order, back to its bin)
        let mut in_key_order = vec![0u32; key_rank.len()];
        for (j, &place) in key_rank.iter().enumerate() {
            in_key_order[place as usize] = j as u32;
        }
        self.held.iter_mut().for_each(Vec::clear);
        for j in in_key_order {
            let b = self.owner(j);
            self.held[b].push(j);
        }
        let mut racks = vec![];
        let mut bins = vec![];
        for (b, held) in self.held.into_iter().enumerate() {
            if held.is_empty() {
                continue;
            }
            if self.rack[b] >= 0 {
                racks.push((self.ids[b], self.rack[b] as u32));
            }
            bins.push((self.ids[b], held));
        }
        Placement {
            bins,
            outputs,
            racks,
        }
    }
}

/// Partitions in the order of `rank` (a place of each partition, each its own): sorted on (rank, j) as one
/// integer, each rank read once.
fn by_rank(partitions: &mut [u32], rank: &[u32]) {
    if partitions.len() < 2 {
        return;
    }
    let mut keys: Vec<u64> = partitions
        .iter()
        .map(|&j| (rank[j as usize] as u64) << 32 | j as u64)
        .collect();
    keys.sort_unstable();
    for (j, key) in partitions.iter_mut().zip(keys) {
        *j = key as u32;
    }
}

/// A partition read across zones as `localize` lists it, with its rack where it has one (most have: their
/// leader's), read there without a lookup.
#[derive(Clone, Copy)]
struct Crossing {
    j: u32,
    lone: u32,
}

/// `Crossing::lone` of a partition with several racks.
const SEVERAL_RACKS: u32 = u32::MAX;

impl Crossing {
    fn of(j: u32, zones: &Zones) -> Self {
        Crossing {
            j,
            lone: zones.lone_rack(j).map_or(SEVERAL_RACKS, |r| r as u32),
        }
    }
}

/// A set of numbers below n, a bit each.
struct Marks {
    words: Vec<u64>,
}

impl Marks {
    fn new(n: usize) -> Self {
        Marks {
            words: vec![0; n.div_ceil(64)],
        }
    }

    fn set(&mut self, x: u32) {
        self.words[x as usize / 64] |= 1 << (x % 64);
    }

    fn unset(&mut self, x: u32) {
        self.words[x as usize / 64] &= !(1 << (x % 64));
    }

    /// The numbers set, in increasing order.
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let x = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    x as u32
                })
            })
        })
    }
}

/// `localize`'s count, per racks, of the partitions in a row a pass left across zones: those of a racks
/// whose count reached FAILED_LOCALIZES are not tried for the rest of the pass. Racks of one rack (most
/// partitions') are counted by rack, the others by their list.
struct Failures<'z> {
    zones: &'z Zones,
    lone: Vec<usize>,
    several: Map<&'z [u32], usize>,
    /// racks of one rack among the pass's partitions and not done yet; whether any has several
    open: usize,
    any_several: bool,
}

impl<'z> Failures<'z> {
    fn of(partitions: &[Crossing], zones: &'z Zones) -> Self {
        // a rack none of the partitions has counts as done
        let (mut lone, mut any_several) = (vec![usize::MAX; zones.names.len()], false);
        for c in partitions {
            match c.lone {
                SEVERAL_RACKS => any_several = true,
                r => lone[r as usize] = 0,
            }
        }
        let open = lone.iter().filter(|&&n| n == 0).count();
        Failures {
            zones,
            lone,
            several: Map::default(),
            open,
            any_several,
        }
    }

    fn count(&mut self, c: Crossing) -> &mut usize {
        match c.lone {
            SEVERAL_RACKS => self
                .several
                .entry(self.zones.of_partition(c.j))
                .or_insert(0),
            r => &mut self.lone[r as usize],
        }
    }

    fn done(&mut self, c: Crossing) -> bool {
        *self.count(c) >= FAILED_LOCALIZES
    }

    fn reset(&mut self, c: Crossing) {
        *self.count(c) = 0;
    }

    fn add(&mut self, c: Crossing) {
        let count = self.count(c);
        *count += 1;
        if *count == FAILED_LOCALIZES && c.lone != SEVERAL_RACKS {
            self.open -= 1;
        }
    }

    /// Whether no partition of the pass is left to try.
    fn all_done(&self) -> bool {
        self.open == 0 && !self.any_several
    }
}

/// The open consumers of `targets` in the order of their keys ((a value, id) as one integer), sorted as they
/// are taken: a pass of `consolidate` or `merge` takes the first few of thousands, most times.
struct Targets {
    keys: Vec<(u128, usize)>,
    next: usize,
    sorted: usize,
}

impl Iterator for Targets {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.next == self.sorted {
            let rest = &mut self.keys[self.sorted..];
            if rest.is_empty() {
                return None;
            }
            // the next 64, then four times as many as taken so far, then the rest
            let mut chunk = (4 * self.sorted).max(64);
            if 2 * chunk >= rest.len() {
                chunk = rest.len();
            } else {
                rest.select_nth_unstable(chunk);
            }
            rest[..chunk].sort_unstable(); // the keys are unique
            self.sorted += chunk;
        }
        self.next += 1;
        Some(self.keys[self.next - 1].1)
    }
}

/// Python's max(0.0, x).
fn positive(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// The partitions of a few consumers, re-placed among them for the least W·used + moved rate / C +
/// Z·cross-zone rate / C, by branch and bound. One is kept by the search and refilled for each neighbourhood
/// (its tables flat, item i's entry for slot s at i·k + s), so that a neighbourhood allocates nothing.
#[derive(Default)]
struct Neighbourhood {
    bins: Vec<usize>,
    items: Vec<u32>,
    rates: Vec<f64>,
    costs: Vec<f64>,
    values: Vec<f64>,
    moves: Vec<bool>,
    caps: Vec<f64>,
    order: Vec<usize>,
    equal_from: Vec<usize>,
    /// item i's slots in the order it tries them, at i·k + o: what the search reads at a node, side by side
    tries: Vec<Try>,
    best_value: f64,
    best: Vec<usize>,
    found: bool,
    suffix: Vec<f64>,
    /// the rate (in units of C) and the moves the budget leaves (infinite when it has no cap)
    free_rate: f64,
    free_moves: i64,
    // the search
    load: Vec<f64>,
    count: Vec<u32>,
    chosen: Vec<usize>,
    nodes: i64,
    limit: i64,
    total: f64,
}

/// One slot as item i tries it: its value and cost there, whether it is a move, and the slots (a bit each)
/// it is alike to from item i on (so that it is not tried empty after one of them was).
#[derive(Clone, Copy)]
struct Try {
    slot: usize,
    value: f64,
    cost: f64,
    is_move: bool,
    alike: u64,
}

impl Neighbourhood {
    fn fill(&mut self, state: &SearchState, bins: &[usize]) {
        let rates = state.rates;
        self.bins.clear();
        self.bins.extend_from_slice(bins);
        self.items.clear();
        for &b in bins {
            self.items.extend_from_slice(&state.held[b]);
        }
        by_rank(&mut self.items, state.rank);
        let capacity = state.capacity;
        let (k, n) = (bins.len(), self.items.len());
        let zone = ZONE_FIRST / capacity;
        self.rates.clear();
        self.moves.clear();
        self.costs.clear();
        self.values.clear();
        for &j in &self.items {
            let rate = rates[j as usize];
            self.rates.push(rate);
            for &b in bins {
                let is_move = state.cost(j, b);
                let cost = if is_move { rate / capacity } else { 0.0 };
                self.moves.push(is_move);
                self.costs.push(cost);
                self.values
                    .push(cost + if state.local(j, b) { 0.0 } else { zone * rate });
            }
        }
        self.caps.clear();
        self.caps
            .extend(bins.iter().map(|&b| state.cap[b] * ROUNDING));
        // each partition tries the consumers it costs least on first (ties: the target, then by slack)
        self.order.clear();
        for i in 0..n {
            let from = self.order.len();
            self.order.extend(0..k);
            let (values, moves) = (&self.values[i * k..], &self.moves[i * k..]);
            // a stable insertion sort of the few slots by (value, move)
            let order = &mut self.order[from..];
            for a in 1..k {
                let mut at = a;
                while at > 0 && {
                    let (s, t) = (order[at - 1], order[at]);
                    (F(values[t]), moves[t]) < (F(values[s]), moves[s])
                } {
                    order.swap(at - 1, at);
                    at -= 1;
                }
            }
        }
        // equal_from[s·k + t]: from which partition on slots s and t are alike (same capacity, same costs for
        // every partition after): an empty one is then not tried after the other
        self.equal_from.clear();
        self.equal_from.resize(k * k, n + 1);
        for a in 0..k {
            for b in a + 1..k {
                if self.caps[a] != self.caps[b] {
                    continue;
                }
                let mut i = n;
                while i > 0
                    && self.moves[(i - 1) * k + a] == self.moves[(i - 1) * k + b]
                    && self.values[(i - 1) * k + a] == self.values[(i - 1) * k + b]
                {
                    i -= 1;
                }
                self.equal_from[a * k + b] = i;
                self.equal_from[b * k + a] = i;
            }
        }
        self.tries.clear();
        for i in 0..n {
            for o in 0..k {
                let slot = self.order[i * k + o];
                let alike = (0..k)
                    .filter(|&t| self.equal_from[t * k + slot] <= i)
                    .fold(0u64, |mask, t| mask | 1 << t);
                self.tries.push(Try {
                    slot,
                    value: self.values[i * k + slot],
                    cost: self.costs[i * k + slot],
                    is_move: self.moves[i * k + slot],
                    alike,
                });
            }
        }
        let (mut moved, mut value) = (0.0, 0.0);
        let mut used_slots = 0u64; // k ≤ 64
        let mut inside = 0i64;
        for (i, &j) in self.items.iter().enumerate() {
            let owner = state.owner(j);
            let slot = bins
                .iter()
                .position(|&b| b == owner)
                .expect("a bin of the neighbourhood");
            used_slots |= 1 << slot;
            moved += self.costs[i * k + slot];
            value += self.values[i * k + slot];
            inside += state.cost(j, owner) as i64;
        }
        self.best_value = CONSUMER_FIRST * used_slots.count_ones() as f64 + value - 1e-9;
        self.found = false;
        self.suffix.clear();
        self.suffix.resize(n + 1, 0.0);
        for i in (0..n).rev() {
            self.suffix[i] = self.suffix[i + 1] + self.rates[i];
        }
        self.total = self.suffix[0];
        let spending = &state.spending;
        self.free_rate = spending.max_rate.map_or(f64::INFINITY, |max| {
            (max - spending.rate) / capacity + moved
        });
        // saturating: a cap given as 2^64 or more is i64::MAX here, as is no cap (moves never reach it)
        self.free_moves = spending.max_moves.map_or(i64::MAX, |max| {
            (max - spending.moves).saturating_add(inside)
        });
        self.load.clear();
        self.load.resize(k, 0.0);
        self.count.clear();
        self.count.resize(k, 0);
        self.chosen.clear();
        self.chosen.resize(n, 0);
        self.nodes = (n * k) as i64;
    }

    /// The work spent (search nodes, plus one per partition and consumer for setting it up); whether a better
    /// placement was found (`best`: each item's slot).
    fn solve(&mut self, limit: i64) -> (i64, bool) {
        self.limit = limit;
        self.dfs(0, 0, 0.0, 0.0, 0.0, 0);
        (self.nodes, self.found)
    }

    fn dfs(&mut self, i: usize, used: usize, used_cap: f64, value: f64, moved: f64, moves: i64) {
        self.nodes += 1;
        let (n, k) = (self.items.len(), self.bins.len());
        if i == n {
            if CONSUMER_FIRST * used as f64 + value < self.best_value {
                self.best_value = CONSUMER_FIRST * used as f64 + value;
                self.best.clear();
                self.best.extend_from_slice(&self.chosen);
                self.found = true;
            }
            return;
        }
        // the rest needs a consumer more unless the used ones have room for all of it
        let extra = if self.suffix[i] <= used_cap - (self.total - self.suffix[i]) {
            0
        } else {
            1
        };
        if CONSUMER_FIRST * (used + extra) as f64 + value >= self.best_value
            || self.nodes > self.limit
        {
            return;
        }
        let rate = self.rates[i];
        let mut tried_empty = 0u64; // slots, k ≤ 64
        for o in 0..k {
            let Try {
                slot,
                value: worth,
                cost: step,
                is_move,
                alike,
            } = self.tries[i * k + o];
            let empty = self.count[slot] == 0;
            if empty {
                if tried_empty & alike != 0 {
                    continue;
                }
                tried_empty |= 1 << slot;
            } else if self.load[slot] + rate > self.caps[slot] {
                continue;
            }
            if is_move
                && (moved + step > self.free_rate + ROUNDING_ERROR || moves >= self.free_moves)
            {
                continue;
            }
            self.load[slot] += rate;
            self.count[slot] += 1;
            self.chosen[i] = slot;
            let (used, used_cap) = if empty {
                (used + 1, used_cap + self.caps[slot])
            } else {
                (used, used_cap)
            };
            self.dfs(
                i + 1,
                used,
                used_cap,
                value + worth,
                moved + step,
                moves + is_move as i64,
            );
            self.load[slot] -= rate;
            self.count[slot] -= 1;
        }
    }
}

/// The last step of a zone-aware Best or Worst Fit algorithm (see the module). Work: at most 20 units per
/// partition and 50 000, so it stays n log n; of it, `localize`'s exact re-placements take at most one unit per
/// partition and 50 000 (past a few hundred of them, each of a thousand nodes, they bring little: a short
/// zone's consumers are full).
pub fn finish_zoned<'p, 's>(
    bins: Bins<'p>,
    spending: Spending<'s>,
    capacity: f64,
    previous_ids: &[u32],
    (decreasing, rank): (&'p [u32], &'p [u32]),
    members: bool,
) -> SearchState<'p, 's> {
    let rates = bins.rates;
    let zones = bins.zones.expect("zone mode");
    let n = rates.len();
    let mut is_previous = vec![false; bins.consumers.len()];
    for &c in previous_ids {
        is_previous[c as usize] = true;
    }
    let mut owner = vec![OUT_BIN; n];
    for (b, held) in bins.held.iter().enumerate() {
        for &j in held {
            owner[j as usize] = b as u32;
        }
    }
    let previous_bin = bins
        .previous_owner
        .iter()
        .map(|&was| match bins.bin_of.get(was as usize) {
            _ if was == NONE => NEW,
            Some(&b) if b != NONE => b,
            _ => OUT_BIN,
        })
        .collect();
    let mut state = SearchState {
        rates,
        capacity,
        decreasing,
        rank,
        zones,
        members,
        is_previous,
        consumers: bins.consumers,
        pool: bins.pool,
        spending,
        slack_entry: vec![None; bins.ids.len()],
        // the bins as Modified Any Fit left them
        ids: bins.ids,
        tie: bins.tie,
        cap: bins.cap,
        held: bins.held,
        load: bins.load,
        rack: bins.rack,
        owner,
        previous_bin,
        cross: 0.0,
        idle: vec![BTreeSet::new(); zones.names.len() + 1],
        work: 0,
        by_slack: None,
        rack_slack: vec![BTreeMap::new(); zones.names.len()],
        hood: Neighbourhood::default(),
        placing: false,
        crossing: Marks::new(n),
        exact_left: n as i64 + 50_000,
    };
    // the indices and the cross-zone rate, all at once (the keys are unique: sorted, the trees are built in
    // one pass)
    let mut entries: Vec<(u128, usize)> = (0..state.ids.len())
        .filter(|&b| !state.held[b].is_empty())
        .map(|b| (order_key(state.load[b] - state.cap[b], state.tie[b]), b))
        .collect();
    entries.sort_unstable();
    let mut by_rack: Vec<Vec<(u128, usize)>> = vec![vec![]; zones.names.len()];
    for &(entry, b) in &entries {
        state.slack_entry[b] = Some(entry);
        if state.rack[b] != NO_RACK {
            by_rack[state.rack[b] as usize].push((entry, b));
        }
    }
    state.by_slack = Some(entries.into_iter().collect());
    state.rack_slack = by_rack.into_iter().map(BTreeMap::from_iter).collect();
    // the cross-zone rate, consumer by consumer, and the partitions with racks read across zones
    for b in 0..state.ids.len() {
        let crossing = &mut state.crossing;
        state.cross += zones.cross_zone_each(rates, &state.held[b], state.rack[b], |j| {
            if zones.has_racks(j) {
                crossing.set(rank[j as usize]);
            }
        });
    }
    let limit = 20 * n as i64 + 50_000;
    state.consolidate(limit / 2);
    state.merge(limit);
    state.by_slack = None;
    state.rerack();
    state.localize(limit);
    state
}

#[cfg(test)]
mod tests {
    use super::Marks;

    #[test]
    fn marks_read_back_in_increasing_order_as_set_and_unset() {
        let mut marks = Marks::new(200);
        for x in [199, 3, 64, 63, 0, 128, 3] {
            marks.set(x);
        }
        marks.unset(64);
        marks.unset(5); // never set
        assert_eq!(marks.iter().collect::<Vec<_>>(), vec![0, 3, 63, 128, 199]);
        for x in [0, 3, 63, 128, 199] {
            marks.unset(x);
        }
        assert_eq!(marks.iter().next(), None);
    }
}
