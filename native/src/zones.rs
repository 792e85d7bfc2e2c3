//! Zones, as `app/core/zones.py`: where a consumer runs (its rack) and where each partition is read without
//! crossing zones (its racks). A partition is local on a consumer whose rack is known and is one of its racks;
//! every other placement reads across zones. A rack is its index in the sorted list of the request's racks
//! (byte order of UTF-8 is code point order, Python's order of str).

use crate::bins::F;
use crate::problem::fsum;

/// A consumer whose rack is not known (or not chosen yet).
pub const NO_RACK: i32 = -1;
/// A partition with several racks.
const SEVERAL: i32 = -2;

pub struct Zones {
    pub names: Vec<String>,
    /// Partition j's racks, sorted and each once: `racks[starts[j]..starts[j + 1]]`.
    starts: Vec<u32>,
    racks: Vec<u32>,
    /// Partition j's rack where it has one (most have: their leader's), else NO_RACK (none) or SEVERAL: the
    /// test of a partition's zone reads one number, most times.
    lone: Vec<i32>,
    /// The racks known before the algorithm runs (the members', or the previous consumers'), by consumer.
    of_consumer: Vec<i32>,
}

impl Zones {
    /// `names`: the racks as first read; `partition_racks(j)`: partition j's racks as indices into `names`;
    /// `consumer_racks`: (consumer, index into `names`) for the known ones; `known`: the known consumers.
    pub fn new<'r>(
        names: &[String],
        n: usize,
        partition_racks: impl Fn(usize) -> &'r [u32],
        consumer_racks: &[(u32, u32)],
        known: usize,
    ) -> Self {
        let mut order: Vec<u32> = (0..names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut index = vec![0u32; names.len()];
        for (r, &id) in order.iter().enumerate() {
            index[id as usize] = r as u32;
        }
        let mut starts = Vec::with_capacity(n + 1);
        let mut racks = Vec::with_capacity(n);
        let mut lone = Vec::with_capacity(n);
        starts.push(0);
        for j in 0..n {
            let listed = partition_racks(j);
            if let [one] = listed {
                racks.push(index[*one as usize]); // most partitions: their leader's rack
            } else if !listed.is_empty() {
                let from = racks.len();
                racks.extend(listed.iter().map(|&id| index[id as usize]));
                racks[from..].sort_unstable();
                let mut kept = from + 1;
                for i in from + 1..racks.len() {
                    if racks[i] != racks[kept - 1] {
                        racks[kept] = racks[i];
                        kept += 1;
                    }
                }
                racks.truncate(kept);
            }
            let from = starts[j] as usize;
            lone.push(match racks.len() - from {
                0 => NO_RACK,
                1 => racks[from] as i32,
                _ => SEVERAL,
            });
            starts.push(racks.len() as u32);
        }
        let mut of_consumer = vec![NO_RACK; known];
        for &(c, id) in consumer_racks {
            of_consumer[c as usize] = index[id as usize] as i32;
        }
        Zones {
            names: order.iter().map(|&id| names[id as usize].clone()).collect(),
            starts,
            racks,
            lone,
            of_consumer,
        }
    }

    pub fn of_partition(&self, j: u32) -> &[u32] {
        &self.racks[self.starts[j as usize] as usize..self.starts[j as usize + 1] as usize]
    }

    /// Partition j's rack where it has exactly one.
    #[inline]
    pub fn lone_rack(&self, j: u32) -> Option<usize> {
        usize::try_from(self.lone[j as usize]).ok()
    }

    /// The rack known for consumer c before the algorithm runs.
    pub fn rack_of(&self, c: u32) -> i32 {
        self.of_consumer.get(c as usize).copied().unwrap_or(NO_RACK)
    }

    /// Whether partition j has racks.
    #[inline]
    pub fn has_racks(&self, j: u32) -> bool {
        self.lone[j as usize] != NO_RACK
    }

    /// Whether partition j is read within its zone by a consumer in `rack`.
    #[inline]
    pub fn local(&self, j: u32, rack: i32) -> bool {
        match self.lone[j as usize] {
            SEVERAL => self.among(j, rack),
            lone => lone >= 0 && lone == rack,
        }
    }

    /// Whether `rack` is one of partition j's several racks.
    #[inline(never)]
    fn among(&self, j: u32, rack: i32) -> bool {
        rack >= 0 && self.of_partition(j).contains(&(rack as u32))
    }

    /// Whether partition j has racks and a consumer in `rack` reads it across zones.
    #[inline]
    pub fn crosses(&self, j: u32, rack: i32) -> bool {
        self.has_racks(j) && !self.local(j, rack)
    }

    /// The rate a consumer in `rack` holding `held` reads across zones (math.fsum, as the reference sums it).
    pub fn cross_zone(&self, rates: &[f64], held: &[u32], rack: i32) -> f64 {
        self.cross_zone_each(rates, held, rack, |_| ())
    }

    /// `cross_zone`, `each` called with every partition of `held` read across zones.
    pub fn cross_zone_each(
        &self,
        rates: &[f64],
        held: &[u32],
        rack: i32,
        mut each: impl FnMut(u32),
    ) -> f64 {
        match held.iter().position(|&j| !self.local(j, rack)) {
            None => 0.0, // (most consumers)
            Some(first) => fsum(held[first..].iter().filter(|&&j| !self.local(j, rack)).map(
                |&j| {
                    each(j);
                    rates[j as usize]
                },
            )),
        }
    }

    /// The rack where the most of `held`'s rate is local (ties: the first by name); NO_RACK where none is.
    pub fn best_rack(&self, rates: &[f64], held: &[u32]) -> i32 {
        let mut local_rate: Vec<(u32, f64)> = vec![];
        for &j in held {
            for &r in self.of_partition(j) {
                match local_rate.iter_mut().find(|(rack, _)| *rack == r) {
                    Some((_, rate)) => *rate += rates[j as usize],
                    None => local_rate.push((r, 0.0 + rates[j as usize])),
                }
            }
        }
        local_rate
            .iter()
            .min_by(|a, b| F(b.1).cmp(&F(a.1)).then(a.0.cmp(&b.0)))
            .map_or(NO_RACK, |&(r, _)| r as i32)
    }
}
