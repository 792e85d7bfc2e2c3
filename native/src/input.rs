//! A request's partitions, previous assignment and members on arrays: partition j ↔ (topic, partition),
//! consumers as integers. Built from the request's JSON (`parse`: the bulk read here, the rest handed back
//! for msgspec to decode with its checks) or from the Python objects of the reference's Problem.
//!
//! `parse` takes only what the reference decoder and `build_problem` would accept, meaning the same; for
//! anything else (a wrong type, an unknown or repeated key, a rate below 0, a partition listed twice, an id
//! the natural order here cannot rank, …) it declines, and the reference runs and says what is wrong.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::consumers::NONE;
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
        let b = name.as_bytes();
        let mix = b.len() ^ b.first().map_or(0, |&c| c as usize) << 2 ^ b.last().map_or(0, |&c| c as usize) << 4;
        mix & 63
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
    /// The partitions: None when one is listed twice or a sum overflows (the reference says which).
    pub fn new(
        topics: Vec<String>,
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
        let topic_ids = topics
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
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
    pub fn set_previous(&mut self, consumers: Vec<(&str, usize)>, keys: &[(u32, i64)]) -> Option<()> {
        let n = self.keys.len();
        let mut previous = Previous {
            ids: Vec::with_capacity(consumers.len()),
            held: Vec::with_capacity(consumers.len()),
            owner: vec![NONE; n],
            gone: vec![],
            gone_keys: vec![],
        };
        let mut gone_seen: HashSet<(u32, i64)> = HashSet::new();
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionRate<'a> {
    #[serde(borrow)]
    topic: Str<'a>,
    partition: u64,
    rate: f64,
    #[serde(default)]
    lag: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionRef<'a> {
    #[serde(borrow)]
    topic: Str<'a>,
    partition: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SizedMember<'a> {
    #[serde(borrow)]
    id: Str<'a>,
    capacity: f64,
}

/// A member: its id, or {id, capacity}.
struct Member<'a>(Str<'a>, Option<f64>);

impl<'de> Deserialize<'de> for Member<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Member<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a consumer id or {id, capacity}")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Member(Cow::Borrowed(v), None))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Member(Cow::Owned(v.to_owned()), None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let m = SizedMember::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Member(m.id, Some(m.capacity)))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The previous assignment: consumer → partitions, in the request's order, each consumer once; the
/// partitions of all in one list (consumer i's are the next `count` of them).
struct PreviousDoc<'a> {
    consumers: Vec<(Str<'a>, usize)>,
    held: Vec<PartitionRef<'a>>,
}

/// One consumer's partitions, appended to the shared list.
struct Held<'s, 'a>(&'s mut Vec<PartitionRef<'a>>);

impl<'de> DeserializeSeed<'de> for Held<'_, 'de> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Held<'_, 'de> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of partitions")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let before = self.0.len();
        while let Some(r) = seq.next_element::<PartitionRef<'de>>()? {
            self.0.push(r);
        }
        Ok(self.0.len() - before)
    }
}

impl<'de> Deserialize<'de> for PreviousDoc<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PreviousDoc<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("consumer → partitions")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut doc = PreviousDoc {
                    consumers: vec![],
                    held: vec![],
                };
                // (a consumer listed twice is refused by `set_previous`)
                while let Some(Borrowed(name)) = map.next_key()? {
                    let count = map.next_value_seed(Held(&mut doc.held))?;
                    doc.consumers.push((name, count));
                }
                Ok(doc)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// A string, borrowed from the body unless it holds an escape.
struct Borrowed<'a>(Str<'a>);

impl<'de> Deserialize<'de> for Borrowed<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Borrowed<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// Any JSON value, checked for a key repeated in one object (msgspec keeps the last silently; the reference
/// refuses it), and otherwise skipped.
struct Unrepeated;

impl<'de> Deserialize<'de> for Unrepeated {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Unrepeated;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Unrepeated)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Unrepeated)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Unrepeated)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Unrepeated)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Unrepeated)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Unrepeated)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<Unrepeated>()?.is_some() {}
                Ok(Unrepeated)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut seen: HashSet<Str<'de>> = HashSet::new();
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    if !seen.insert(key) {
                        return Err(de::Error::custom("a key twice"));
                    }
                    map.next_value::<Unrepeated>()?;
                }
                Ok(Unrepeated)
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The request's top-level object: the bulk read, the other fields kept as written.
struct Request<'a> {
    partitions: Option<Vec<PartitionRate<'a>>>,
    previous: Option<PreviousDoc<'a>>,
    members: Option<Vec<Member<'a>>>,
    /// `{"field":value,…}` of every other field (and of a bulk field given as null), for msgspec.
    rest: Vec<u8>,
}

struct RequestSeed;

impl<'de> DeserializeSeed<'de> for RequestSeed {
    type Value = Request<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed {
    type Value = Request<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an assignment request")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut request = Request {
            partitions: None,
            previous: None,
            members: None,
            rest: vec![b'{'],
        };
        let mut seen: HashSet<Str<'de>> = HashSet::new();
        while let Some(key) = map.next_key::<Str<'de>>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom("a key twice"));
            }
            let keep = |request: &mut Request, raw: &str| {
                if request.rest.len() > 1 {
                    request.rest.push(b',');
                }
                crate::answer::string(&mut request.rest, &key);
                request.rest.push(b':');
                request.rest.extend_from_slice(raw.as_bytes());
            };
            match key.as_ref() {
                "partitions" => match map.next_value()? {
                    Some(partitions) => request.partitions = Some(partitions),
                    None => keep(&mut request, "null"),
                },
                "previous" => match map.next_value()? {
                    Some(previous) => request.previous = Some(previous),
                    None => keep(&mut request, "null"),
                },
                "members" => match map.next_value()? {
                    Some(members) => request.members = Some(members),
                    None => keep(&mut request, "null"),
                },
                _ => {
                    let raw: &'de serde_json::value::RawValue = map.next_value()?;
                    serde_json::from_str::<Unrepeated>(raw.get()).map_err(de::Error::custom)?;
                    keep(&mut request, raw.get());
                }
            }
        }
        request.rest.push(b'}');
        Ok(request)
    }
}

/// The request's JSON → (the other fields' JSON, the bulk on arrays); None to let the reference decode it.
pub fn parse(body: &[u8]) -> Option<(Vec<u8>, Input)> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let request = RequestSeed.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    let partitions = request.partitions?; // none given (a group's stored rates): the reference decodes it
    let mut topic_ids: HashMap<&str, u32> = HashMap::new();
    let mut topics: Vec<String> = vec![];
    let n = partitions.len();
    let (mut keys, mut rates, mut lags) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut recent = Recent::new();
    for p in &partitions {
        let good = |v: f64| v >= 0.0; // finite: JSON has no NaN or infinity, and out-of-range numbers fail
        if p.partition > MAX_PARTITION || !good(p.rate) || !p.lag.is_none_or(good) {
            return None;
        }
        let topic: &str = &p.topic;
        let t = recent.get(topic, || {
            Some(match topic_ids.get(topic) {
                Some(&t) => t,
                None => {
                    if !sized(topic) {
                        return None;
                    }
                    let t = topics.len() as u32;
                    topic_ids.insert(topic, t);
                    topics.push(topic.to_owned());
                    t
                }
            })
        })?;
        keys.push((t, p.partition as i64));
        rates.push(p.rate);
        lags.push(p.lag);
    }
    let mut input = Input::new(topics, keys, rates, lags)?;
    if let Some(previous) = &request.previous {
        let held = &previous.held;
        if previous.consumers.iter().any(|(name, _)| !sized(name))
            || held.iter().any(|r| r.partition > MAX_PARTITION || !sized(&r.topic))
        {
            return None;
        }
        let mut recent = Recent::new();
        let keys = held.iter().map(|r| {
            let t = recent.get(&r.topic, || Some(input.topic(&r.topic))).unwrap();
            (t, r.partition as i64)
        });
        let keys: Vec<(u32, i64)> = keys.collect();
        let consumers = previous.consumers.iter().map(|(name, count)| (name.as_ref(), *count));
        input.set_previous(consumers.collect(), &keys)?;
    }
    if let Some(members) = &request.members {
        if members.iter().any(|m| !sized(&m.0)) {
            return None;
        }
        input.set_members(members.iter().map(|m| (m.0.as_ref(), m.1)).collect())?;
    }
    Some((request.rest, input))
}
