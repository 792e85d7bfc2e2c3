//! A stream of rate measurements replayed through one algorithm, as `app.sim.replay` does: each measurement
//! solved from the algorithm's own previous assignment (the first from none), that assignment carried here
//! from one measurement to the next, and per measurement what the evaluation reads — consumers, Rscore,
//! whether every consumer is within C, the moves — and, when asked, each partition's consumer and previous
//! consumer for the latency model. No Python object per partition, and no JSON, between the measurements.

use crate::algorithms::{self, Algorithm, Params};
use crate::bins::within;
use crate::input::Input;
use crate::intern::{Interner, NONE};
use crate::validate;

/// The measurements, each one's partitions (in its own listing order) validated as the reference validates
/// a request's, with every topic of the stream numbered alike, so a previous assignment's keys read the same
/// in each.
pub struct Stream {
    pub measurements: Vec<Input>,
}

impl Stream {
    /// Measurement k lists `counts[k]` of `keys` and `rates`, after those of the measurements before it.
    /// None where the reference would refuse one (a rate not finite or below 0, a partition listed twice, a sum
    /// that overflows) or the counts do not add up: the reference then replays it and says what is wrong.
    pub fn new(
        topics: Interner,
        keys: &[(u32, i64)],
        rates: &[f64],
        counts: &[usize],
    ) -> Option<Self> {
        if keys.len() != rates.len() || counts.iter().sum::<usize>() != keys.len() {
            return None;
        }
        let mut start = 0;
        let mut measurements = Vec::with_capacity(counts.len());
        for &n in counts {
            let range = start..start + n;
            start += n;
            let lags = vec![None; n];
            if !validate::partitions(
                &keys[range.clone()],
                topics.len(),
                &rates[range.clone()],
                &lags,
            ) {
                return None;
            }
            let input = Input::new(
                topics.clone(),
                keys[range.clone()].to_vec(),
                rates[range].to_vec(),
                lags,
            )?;
            measurements.push(input);
        }
        Some(Stream { measurements })
    }
}

/// What a replay gives, per measurement; and, when asked, per partition (measurement after measurement, each
/// in its listing order) its consumer and previous consumer (NONE: a new partition), numbered in `names`.
#[derive(Default)]
pub struct Replayed {
    pub consumers: Vec<usize>,
    pub rscore: Vec<f64>,
    /// no consumer above C but one holding a single partition
    pub within: Vec<bool>,
    pub moves: Vec<usize>,
    /// consumer ids in the order they first held a partition
    pub names: Interner,
    pub owner: Vec<u32>,
    pub previous: Vec<u32>,
}

pub fn replay(
    stream: &Stream,
    algorithm: &Algorithm,
    capacity: f64,
    params: &Params,
    owners: bool,
) -> Result<Replayed, String> {
    let mut out = Replayed::default();
    // the assignment carried to the next measurement: its consumers in order, how many each holds, their keys
    let mut holders: Vec<(String, usize)> = vec![];
    let mut held_keys: Vec<(u32, i64)> = vec![];
    for measurement in &stream.measurements {
        let mut input = measurement.clone();
        let previous = holders.iter().map(|(c, n)| (c.as_str(), *n)).collect();
        input
            .set_previous(previous, &held_keys)
            .ok_or("a replay's previous assignment was refused (a bug)")?;
        let keys = &measurement.keys;
        let (p, _, o) = algorithms::solve(input, algorithm, capacity, params)?;
        // each consumer of this problem as a number of the replay's, once it holds or held a partition
        let mut number = vec![NONE; p.consumers.len()];
        let mut numbered = |c: u32, names: &mut Interner| {
            let slot = &mut number[c as usize];
            if *slot == NONE {
                *slot = names.id(p.consumers.ids.name(c));
            }
            *slot
        };
        holders.clear();
        held_keys.clear();
        let mut fits = true;
        for ((c, held), &load) in o.assignment.iter().zip(&o.loads) {
            fits &= held.len() == 1 || within(load, p.capacity);
            if !held.is_empty() {
                numbered(*c, &mut out.names);
            }
        }
        // carried in id order (the order of the previous consumers decides nothing, and the next problem
        // then finds its known ids sorted)
        let place: Vec<usize> = {
            let mut place = vec![usize::MAX; p.consumers.len()];
            for (i, (c, _)) in o.assignment.iter().enumerate() {
                place[*c as usize] = i;
            }
            place
        };
        for &c in &o.sorted {
            let held = &o.assignment[place[c as usize]].1;
            if held.is_empty() {
                continue;
            }
            holders.push((p.consumers.ids.name(c).to_owned(), held.len()));
            held_keys.extend(held.iter().map(|&j| keys[j as usize]));
        }
        out.consumers.push(holders.len());
        out.rscore.push(o.rscore);
        out.within.push(fits);
        out.moves.push(o.moved.len());
        if owners {
            for (&c, &was) in o.owner.iter().zip(&p.previous_owner) {
                out.owner.push(numbered(c, &mut out.names));
                out.previous.push(if was == NONE {
                    NONE
                } else {
                    numbered(was, &mut out.names)
                });
            }
        }
    }
    Ok(out)
}
