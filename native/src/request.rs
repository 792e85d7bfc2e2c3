//! An assignment request's JSON read into an `Input`: the bulk (partitions, previous assignment, members)
//! here, the other fields handed back as JSON for msgspec to decode with its checks.
//!
//! `parse` takes only what the reference decoder and `build_problem` would accept, meaning the same; for
//! anything else (a wrong type, an unknown or repeated key, a rate below 0, a partition listed twice, a sum
//! that overflows, an id the natural order here cannot rank, …) it declines, and the reference runs and says
//! what is wrong.

use std::borrow::Cow;

use crate::input::Input;
use crate::intern::Interner;
use crate::json::{Keys, Reader};
use crate::validate;

type Str<'a> = Cow<'a, str>;

/// A string msgspec's `Meta(min_length=1, max_length=255)` accepts (counted in characters).
pub fn sized(s: &str) -> bool {
    !s.is_empty() && (s.len() <= 255 || s.chars().count() <= 255)
}

/// A partition number msgspec's `Meta(ge=0, le=2**31 - 1)` accepts.
const MAX_PARTITION: u64 = (1 << 31) - 1;

/// `{"topic": …, "partition": …}` plus, for a partition of the request or of stored rates, `"rate"` (None: left
/// out), `"lag"` and `"racks"` (pushed onto `racks`): each key at most once, no other key, topic and partition
/// required.
fn partition_object<'a>(
    r: &mut Reader<'a>,
    rated: bool,
    racks: &mut Vec<Str<'a>>,
) -> Option<(Str<'a>, u64, Option<f64>, Option<f64>)> {
    r.eat(b'{')?;
    let (mut topic, mut partition, mut rate, mut lag) = (None, None, None, None);
    let mut listed = false;
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
            b"racks" if rated && !listed => {
                listed = true;
                r.eat(b'[')?;
                let mut first = true;
                while r.more(b']', first)? {
                    first = false;
                    racks.push(r.string()?);
                }
            }
            _ => return None, // unknown, or given twice
        }
    }
    Some((topic?, partition?, rate, lag.flatten()))
}

/// The previous assignment as read: each consumer with how many partitions it held, then all of them in order.
type PreviousDoc<'a> = (Vec<(Str<'a>, usize)>, Vec<(Str<'a>, u64)>);

/// A member as read: its id, its own capacity, its rack.
type Member<'a> = (Str<'a>, Option<f64>, Option<Str<'a>>);

/// A member: an id, or `{"id": …, "capacity": …, "rack": …}` (capacity and rack optional).
fn member<'a>(r: &mut Reader<'a>) -> Option<Member<'a>> {
    if r.peek()? == b'"' {
        return Some((r.string()?, None, None));
    }
    r.eat(b'{')?;
    let (mut id, mut capacity, mut rack) = (None, None, None);
    let mut first = true;
    while r.more(b'}', first)? {
        first = false;
        let key = r.string()?;
        r.eat(b':')?;
        match key.as_ref() {
            "id" if id.is_none() => id = Some(r.string()?),
            "capacity" if capacity.is_none() => capacity = Some(r.float()?),
            "rack" if rack.is_none() => rack = Some(r.string()?),
            _ => return None,
        }
    }
    Some((id?, capacity, rack))
}

/// The request's JSON → (the other fields' JSON, for msgspec; the partitions, previous assignment and members
/// on arrays); None to let the reference decode it.
pub fn parse(body: &[u8]) -> Option<(Vec<u8>, Input)> {
    let mut r = Reader::new(body);
    r.eat(b'{')?;
    let mut rest = vec![b'{'];
    let mut fields = Keys::default();
    let mut topics = Interner::default();
    let (mut keys, mut rates, mut lags, mut unrated) = (vec![], vec![], vec![], vec![]);
    // each partition's racks: rack_list[rack_ends[j]..rack_ends[j + 1]]
    let (mut rack_list, mut rack_ends) = (vec![], vec![0usize]);
    let mut partitions = false;
    let mut previous: Option<PreviousDoc> = None;
    let mut members: Option<Vec<Member>> = None;
    let mut first = true;
    while r.more(b'}', first)? {
        first = false;
        let field = r.string()?;
        if !fields.insert(field.clone()) {
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
                        let (topic, partition, rate, lag) =
                            partition_object(&mut r, true, &mut rack_list)?;
                        rack_ends.push(rack_list.len());
                        if !(rate.is_none_or(validate::number) && lag.is_none_or(validate::number))
                        {
                            return None;
                        }
                        if rate.is_none() {
                            unrated.push(keys.len() as u32);
                        }
                        keys.push((topics.intern(&topic, sized)?, partition as i64));
                        rates.push(rate.unwrap_or(0.0));
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
                            let (topic, partition, ..) =
                                partition_object(&mut r, false, &mut rack_list)?;
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
            previous_keys.push((topics.intern(topic, sized)?, *partition as i64));
        }
    }
    let mut input = Input::new(topics, keys, rates, lags)?;
    input.unrated = unrated;
    if let Some((consumers, _)) = &previous {
        let consumers = consumers
            .iter()
            .map(|(name, count)| (name.as_ref(), *count));
        input.set_previous(consumers.collect(), &previous_keys)?;
    }
    if let Some(members) = &members {
        if members.iter().any(|(id, ..)| !sized(id)) {
            return None;
        }
        input.set_members(
            members
                .iter()
                .map(|(id, capacity, _)| (id.as_ref(), *capacity))
                .collect(),
        )?;
    }
    if !rack_list.is_empty() {
        input.set_partition_racks(|j| Some(&rack_list[rack_ends[j]..rack_ends[j + 1]]))?;
    }
    if let Some(members) = &members {
        let racks = members
            .iter()
            .filter_map(|(id, _, rack)| Some((id.as_ref(), rack.as_deref()?)));
        input.set_consumer_racks(racks)?;
    }
    Some((rest, input))
}

/// A group's stored rates (`PUT …/rates` as the store keeps it: `{"partitions": [...], …}`) onto the partitions
/// the request gave without a rate (`Input::take_rates`): Some((left out, taken)); None where this reader does
/// not take the document (the reference reads it).
pub fn fill_rates(input: &mut Input, stored: &[u8]) -> Option<(usize, usize)> {
    let mut r = Reader::new(stored);
    r.eat(b'{')?;
    let mut found = vec![];
    let mut racks = vec![];
    let mut first = true;
    while r.more(b'}', first)? {
        first = false;
        let field = r.string()?;
        r.eat(b':')?;
        if field != "partitions" {
            r.skip(0)?;
            continue;
        }
        r.eat(b'[')?;
        let mut first = true;
        while r.more(b']', first)? {
            first = false;
            let (topic, partition, rate, lag) = partition_object(&mut r, true, &mut racks)?;
            racks.clear(); // a request's racks are its own
            if let Some(t) = input.topics.get(&topic) {
                let rate = rate.filter(|&v| validate::number(v))?;
                found.push(((t, partition as i64), rate, lag));
            }
        }
    }
    input.take_rates(found)
}
