//! A request's partitions, previous assignment and members on arrays: partition j ↔ (topic, partition),
//! consumers as integers. Built from the request's JSON (`parse`: the bulk read here, the rest handed back
//! for msgspec to decode with its checks) or from the Python objects of the reference's Problem.
//!
//! `parse` takes only what the reference decoder and `build_problem` would accept, meaning the same; for
//! anything else (a wrong type, an unknown or repeated key, a rate below 0, a partition listed twice, an id
//! the natural order here cannot rank, …) it declines, and the reference runs and says what is wrong.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::consumers::NONE;
use crate::json::Reader;
use crate::natural;

/// The topics seen lately, by a cheap hash of the name, in front of the map of every topic: keys come grouped
/// by topic or cycling through a few, so most lookups end here without hashing the whole name. (A collision
/// only costs a map lookup: the name is compared in full.)
pub struct Recent<'a> {
    slots: [(&'a str, u32); 64],
}

impl<'a> Recent<'a> {
    pub fn new() -> Self {
        Recent {
            slots: [("", NONE); 64],
        }
    }

    fn slot(name: &str) -> usize {
        // names like "orders-3" differ at the end: the last two bytes, the first and the length
        let b = name.as_bytes();
        let at = |i: usize| b.get(i).map_or(0, |&c| c as usize);
        let n = b.len();
        let h = ((n * 31 + at(0)) * 31 + at(n.wrapping_sub(2))) * 31 + at(n.wrapping_sub(1));
        (h ^ h >> 6) & 63
    }

    pub fn get(&mut self, name: &'a str, lookup: impl FnOnce() -> Option<u32>) -> Option<u32> {
        let slot = &mut self.slots[Self::slot(name)];
        if slot.1 != NONE && slot.0 == name {
            return Some(slot.1);
        }
        let id = lookup()?;
        *slot = (name, id);
        Some(id)
    }
}

/// The partitions named by the previous assignment, each known one as its index, and those no longer listed.
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

pub struct Input {
    pub topics: Vec<String>,
    topic_ids: HashMap<String, u32>,
    /// partition j → (topic id, partition number)
    pub keys: Vec<(u32, i64)>,
    pub rates: Vec<f64>,
    pub lags: Vec<Option<f64>>,
    index: Index,
    /// Each partition's place in (topic, partition) order.
    pub key_rank: Vec<u32>,
    /// Known consumer ids (previous consumers and members), each once.
    pub names: Vec<String>,
    pub consumer_of: HashMap<String, u32>,
    pub previous: Option<Previous>,
    pub members: Option<Vec<u32>>,
    /// Members with a capacity of their own.
    pub own: Vec<(u32, f64)>,
}

/// (topic, partition) → partition index: a table per topic whose partition numbers are dense (Kafka numbers
/// them 0..n-1), a hash map for the others.
pub struct Index {
    dense: Vec<Vec<u32>>,
    sparse: HashMap<(u32, i64), u32>,
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
        let mut sparse = HashMap::new();
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
    fn ranks(&self, topics: &[String], n: usize) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.dense.len() as u32).collect();
        order.sort_by(|&a, &b| topics[a as usize].cmp(&topics[b as usize]));
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
    /// The partitions, with the topics they name (`topic_ids`: each name's place in `topics`, which may also
    /// hold topics only a previous assignment names): None when one is listed twice or a sum overflows (the
    /// reference says which).
    pub fn new(
        topics: Vec<String>,
        topic_ids: HashMap<String, u32>,
        keys: Vec<(u32, i64)>,
        rates: Vec<f64>,
        lags: Vec<Option<f64>>,
    ) -> Option<Self> {
        let sum = |values: &mut dyn Iterator<Item = f64>| values.fold(0.0, |s, v| s + v);
        if !sum(&mut rates.iter().copied()).is_finite()
            || !sum(&mut lags.iter().flatten().copied()).is_finite()
        {
            return None;
        }
        let index = Index::new(&keys, topics.len())?;
        let key_rank = index.ranks(&topics, keys.len());
        Some(Input {
            topics,
            topic_ids,
            keys,
            rates,
            lags,
            index,
            key_rank,
            names: vec![],
            consumer_of: HashMap::new(),
            previous: None,
            members: None,
            own: vec![],
        })
    }

    /// A consumer id as an integer; None for an id the natural order here cannot rank as the reference does.
    pub fn consumer(&mut self, name: &str) -> Option<u32> {
        if let Some(&c) = self.consumer_of.get(name) {
            return Some(c);
        }
        if !natural::supported(name) {
            return None;
        }
        let c = self.names.len() as u32;
        self.consumer_of.insert(name.to_owned(), c);
        self.names.push(name.to_owned());
        Some(c)
    }

    pub fn topic(&mut self, name: &str) -> u32 {
        if let Some(&t) = self.topic_ids.get(name) {
            return t;
        }
        let t = self.topics.len() as u32;
        self.topic_ids.insert(name.to_owned(), t);
        self.topics.push(name.to_owned());
        t
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
        let mut gone_seen: HashSet<(u32, i64)> = HashSet::new();
        self.consumer_of.reserve(consumers.len());
        let mut keys = keys.iter();
        let mut listed = vec![false; self.names.len() + consumers.len()];
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
        let mut seen = HashSet::with_capacity(members.len());
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

// ---------------------------------------------------------------------------------------------------
// The request's JSON

type Str<'a> = Cow<'a, str>;

/// A string msgspec's `Meta(min_length=1, max_length=255)` accepts (counted in characters).
fn sized(s: &str) -> bool {
    !s.is_empty() && (s.len() <= 255 || s.chars().count() <= 255)
}

/// A partition number msgspec's `Meta(ge=0, le=2**31 - 1)` accepts.
const MAX_PARTITION: u64 = (1 << 31) - 1;

/// Topics as integers while reading, the recent ones in front of the map.
struct TopicTable<'a> {
    names: Vec<String>,
    ids: HashMap<String, u32>,
    recent: Recent<'a>,
}

impl<'a> TopicTable<'a> {
    fn id(&mut self, topic: &Str<'a>) -> Option<u32> {
        let (names, ids) = (&mut self.names, &mut self.ids);
        let mut lookup = |name: &str| -> Option<u32> {
            if let Some(&t) = ids.get(name) {
                return Some(t);
            }
            if !sized(name) {
                return None;
            }
            let t = names.len() as u32;
            ids.insert(name.to_owned(), t);
            names.push(name.to_owned());
            Some(t)
        };
        match topic {
            Cow::Borrowed(name) => self.recent.get(name, || lookup(name)),
            Cow::Owned(name) => lookup(name),
        }
    }
}

/// `{"topic": …, "partition": …}` plus, for a partition of the request, `"rate"` and `"lag"`: each key at most
/// once, no other key, topic, partition (and rate) required.
fn partition_object<'a>(
    r: &mut Reader<'a>,
    rated: bool,
) -> Option<(Str<'a>, u64, f64, Option<f64>)> {
    r.eat(b'{')?;
    let (mut topic, mut partition, mut rate, mut lag) = (None, None, None, None);
    let mut first = true;
    while r.more(b'}', first)? {
        first = false;
        let key = r.plain_key()?;
        r.eat(b':')?;
        match key {
            b"topic" if topic.is_none() => topic = Some(r.string()?),
            b"partition" if partition.is_none() => partition = Some(r.unsigned(MAX_PARTITION)?),
            b"rate" if rated && rate.is_none() => rate = Some(r.float()?),
            b"lag" if rated && lag.is_none() => {
                lag = Some(if r.null() { None } else { Some(r.float()?) })
            }
            _ => return None, // unknown, or given twice
        }
    }
    let rate = if rated { rate? } else { 0.0 };
    Some((topic?, partition?, rate, lag.flatten()))
}

/// The previous assignment as read: each consumer with how many partitions it held, then all of them in order.
type PreviousDoc<'a> = (Vec<(Str<'a>, usize)>, Vec<(Str<'a>, u64)>);

/// A member: an id, or `{"id": …, "capacity": …}`.
fn member<'a>(r: &mut Reader<'a>) -> Option<(Str<'a>, Option<f64>)> {
    if r.peek()? == b'"' {
        return Some((r.string()?, None));
    }
    r.eat(b'{')?;
    let (mut id, mut capacity) = (None, None);
    let mut first = true;
    while r.more(b'}', first)? {
        first = false;
        let key = r.string()?;
        r.eat(b':')?;
        match key.as_ref() {
            "id" if id.is_none() => id = Some(r.string()?),
            "capacity" if capacity.is_none() => capacity = Some(r.float()?),
            _ => return None,
        }
    }
    Some((id?, Some(capacity?)))
}

/// The request's JSON → (the other fields' JSON, for msgspec; the partitions, previous assignment and members
/// on arrays); None to let the reference decode it.
pub fn parse(body: &[u8]) -> Option<(Vec<u8>, Input)> {
    let mut r = Reader::new(body);
    r.eat(b'{')?;
    let mut rest = vec![b'{'];
    let mut fields: Vec<Str> = vec![];
    let mut topics = TopicTable {
        names: vec![],
        ids: HashMap::new(),
        recent: Recent::new(),
    };
    let (mut keys, mut rates, mut lags) = (vec![], vec![], vec![]);
    let mut partitions = false;
    let mut previous: Option<PreviousDoc> = None;
    let mut members: Option<Vec<(Str, Option<f64>)>> = None;
    let mut first = true;
    while r.more(b'}', first)? {
        first = false;
        let field = r.string()?;
        if fields.contains(&field) {
            return None; // a key twice
        }
        r.eat(b':')?;
        let bulk = matches!(field.as_ref(), "partitions" | "previous" | "members");
        if bulk && r.peek()? != b'n' {
            match field.as_ref() {
                "partitions" => {
                    partitions = true;
                    r.eat(b'[')?;
                    let mut first = true;
                    while r.more(b']', first)? {
                        first = false;
                        let (topic, partition, rate, lag) = partition_object(&mut r, true)?;
                        if !(rate >= 0.0 && lag.is_none_or(|l| l >= 0.0)) {
                            return None;
                        }
                        keys.push((topics.id(&topic)?, partition as i64));
                        rates.push(rate);
                        lags.push(lag);
                    }
                }
                "previous" => {
                    let (mut consumers, mut held) = (vec![], vec![]);
                    r.eat(b'{')?;
                    let mut first = true;
                    while r.more(b'}', first)? {
                        first = false;
                        let name = r.string()?;
                        r.eat(b':')?;
                        r.eat(b'[')?;
                        let before = held.len();
                        let mut first = true;
                        while r.more(b']', first)? {
                            first = false;
                            let (topic, partition, ..) = partition_object(&mut r, false)?;
                            held.push((topic, partition));
                        }
                        consumers.push((name, held.len() - before));
                    }
                    previous = Some((consumers, held));
                }
                _ => {
                    let mut list = vec![];
                    r.eat(b'[')?;
                    let mut first = true;
                    while r.more(b']', first)? {
                        first = false;
                        list.push(member(&mut r)?);
                    }
                    members = Some(list);
                }
            }
        } else {
            r.ws();
            let start = r.at;
            r.skip(0)?;
            if rest.len() > 1 {
                rest.push(b',');
            }
            crate::answer::string(&mut rest, &field);
            rest.push(b':');
            rest.extend_from_slice(&body[start..r.at]);
        }
        fields.push(field);
    }
    r.ws();
    if r.at != body.len() || !partitions {
        return None; // more after the object; or no partitions (a group's stored rates): the reference reads it
    }
    rest.push(b'}');
    // the previous assignment's partitions numbered with the same topics (one it alone names is added)
    let mut previous_keys = vec![];
    if let Some((consumers, held)) = &previous {
        if consumers.iter().any(|(name, _)| !sized(name)) {
            return None;
        }
        previous_keys.reserve(held.len());
        for (topic, partition) in held {
            previous_keys.push((topics.id(topic)?, *partition as i64));
        }
    }
    let mut input = Input::new(topics.names, topics.ids, keys, rates, lags)?;
    if let Some((consumers, _)) = &previous {
        let consumers = consumers
            .iter()
            .map(|(name, count)| (name.as_ref(), *count));
        input.set_previous(consumers.collect(), &previous_keys)?;
    }
    if let Some(members) = &members {
        if members.iter().any(|(id, _)| !sized(id)) {
            return None;
        }
        input.set_members(
            members
                .iter()
                .map(|(id, capacity)| (id.as_ref(), *capacity))
                .collect(),
        )?;
    }
    Some((rest, input))
}
