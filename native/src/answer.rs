//! The answer's JSON written from the arrays, byte for byte as msgspec encodes `AssignResponse`
//! (app/codec/assign.py): the same fields in the same order, floats in their shortest round-trip form
//! (ryu's, as msgspec's), strings escaped as msgspec escapes them.

use crate::bins::within;
use crate::input::Labels;
use crate::intern::Interner;
use crate::problem::{Outcome, Problem, ZoneReport};
use crate::zones::Zones;

/// A string as msgspec writes it: `"` and `\` escaped, control characters as \n, \t, … or \u00xx.
pub fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\t' => b"\\t",
            b'\r' => b"\\r",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A float as msgspec writes it: shortest round-trip form; `null` for ±inf and NaN (a utilization over a
/// member's subnormal capacity, …).
pub fn float(out: &mut Vec<u8>, value: f64) {
    if !value.is_finite() {
        return out.extend_from_slice(b"null");
    }
    let mut buffer = ryu::Buffer::new();
    out.extend_from_slice(buffer.format_finite(value).as_bytes());
}

pub fn int(out: &mut Vec<u8>, value: impl itoa::Integer) {
    let mut buffer = itoa::Buffer::new();
    out.extend_from_slice(buffer.format(value).as_bytes());
}

/// JSON pieces, each written once, stored end to end.
#[derive(Default)]
struct Pieces {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Pieces {
    fn of<'s>(items: impl Iterator<Item = &'s str>, head: &[u8], tail: &[u8]) -> Self {
        let mut pieces = Pieces::default();
        for item in items {
            pieces.bytes.extend_from_slice(head);
            string(&mut pieces.bytes, item);
            pieces.bytes.extend_from_slice(tail);
            pieces.ends.push(pieces.bytes.len());
        }
        pieces
    }

    fn get(&self, i: u32) -> &[u8] {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// What the answer names: topics, partitions and consumers by their integers, each name escaped once.
pub struct Names {
    pub topics: Interner,
    pub keys: Vec<(u32, i64)>,
    pub gone_keys: Vec<(u32, i64)>,
    /// `{"topic":"…","partition":` of each topic
    partition_prefix: Pieces,
    /// `"topic":"…","partition":` of each topic
    key_prefix: Pieces,
    /// `["…",` of each topic (the stored form)
    pair_prefix: Pieces,
    /// each consumer id as a JSON string
    consumers: Pieces,
}

impl Names {
    pub fn new(labels: Labels, consumers: &[String]) -> Self {
        let Labels {
            topics,
            keys,
            gone_keys,
        } = labels;
        let topic = || topics.names().iter().map(String::as_str);
        let partition_prefix = Pieces::of(topic(), b"{\"topic\":", b",\"partition\":");
        let key_prefix = Pieces::of(topic(), b"\"topic\":", b",\"partition\":");
        let pair_prefix = Pieces::of(topic(), b"[", b",");
        Names {
            topics,
            keys,
            gone_keys,
            partition_prefix,
            key_prefix,
            pair_prefix,
            consumers: Pieces::of(consumers.iter().map(String::as_str), b"", b""),
        }
    }

    fn partition(&self, out: &mut Vec<u8>, (t, p): (u32, i64)) {
        out.extend_from_slice(self.partition_prefix.get(t));
        int(out, p);
        out.push(b'}');
    }

    /// `"topic":…,"partition":…` of partition j, inside an object of more fields.
    fn key_fields(&self, out: &mut Vec<u8>, j: u32) {
        let (t, p) = self.keys[j as usize];
        out.extend_from_slice(self.key_prefix.get(t));
        int(out, p);
    }

    fn consumer(&self, out: &mut Vec<u8>, c: u32) {
        out.extend_from_slice(self.consumers.get(c));
    }
}

/// `items` as a JSON array, each written by `write`.
fn array<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(b']');
}

pub struct Extra<'a> {
    pub algorithm: &'a str,
    pub lower_bound: i64,
    /// `outputs`, encoded by the codec (small, and free-form).
    pub outputs: &'a [u8],
    /// `group`, encoded (or `null`).
    pub group: &'a [u8],
    /// Whether the answer carries the (sparse) delta; without it, the moves alone tell the rebalance.
    pub delta: bool,
}

/// The answer with a sparse delta or none (`extra.delta`), `version` null (the store numbers it).
pub fn write(p: &Problem, o: &Outcome, names: &Names, extra: &Extra) -> Vec<u8> {
    let n = p.rates.len();
    // about what each part takes, so the buffer is not copied as it grows
    let size = 48 * n
        + 96 * o.assignment.len()
        + 112 * o.moved.len()
        + 56 * o.columns.len()
        + 16 * (o.cells.len() + o.rows.len())
        + 96 * o.overloaded.len()
        + extra.outputs.len()
        + 4096;
    let mut out = Vec::with_capacity(size);
    let out = &mut out;
    let consumers = &p.consumers;
    let mut slot = vec![usize::MAX; consumers.len()];
    for (i, (c, _)) in o.assignment.iter().enumerate() {
        slot[*c as usize] = i;
    }
    out.extend_from_slice(b"{\"algorithm\":");
    string(out, extra.algorithm);
    out.extend_from_slice(b",\"capacity\":");
    float(out, p.capacity);
    out.extend_from_slice(b",\"assignment\":{");
    for (i, &c) in o.sorted.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        names.consumer(out, c);
        out.push(b':');
        array(out, &o.assignment[slot[c as usize]].1, |out, &j| {
            names.partition(out, names.keys[j as usize])
        });
    }
    out.extend_from_slice(b"},\"consumers\":");
    array(out, &o.sorted, |out, &c| {
        let i = slot[c as usize];
        out.extend_from_slice(b"{\"id\":");
        names.consumer(out, c);
        out.extend_from_slice(b",\"load\":");
        float(out, o.loads[i]);
        out.extend_from_slice(b",\"utilization\":");
        float(out, o.loads[i] / consumers.cap[c as usize]);
        out.extend_from_slice(b",\"partition_count\":");
        int(out, o.assignment[i].1.len());
        if let (Some(report), Some(zones)) = (&o.zones, &p.zones) {
            out.extend_from_slice(b",\"rack\":");
            match report.racks[i] {
                rack if rack >= 0 => string(out, &zones.names[rack as usize]),
                _ => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(b",\"cross_zone_rate\":");
            float(out, report.cross[i]);
        }
        out.push(b'}');
    });
    out.extend_from_slice(b",\"moves\":");
    array(out, o.moved.iter().zip(&o.moved_from), |out, (&j, &was)| {
        out.push(b'{');
        names.key_fields(out, j);
        out.extend_from_slice(b",\"from\":");
        names.consumer(out, was);
        out.extend_from_slice(b",\"to\":");
        names.consumer(out, o.owner[j as usize]);
        out.extend_from_slice(b",\"rate\":");
        float(out, p.rates[j as usize]);
        out.push(b'}');
    });
    if extra.delta {
        delta(out, o, names, n);
        out.push(b'}');
    }
    out.extend_from_slice(b",\"rscore\":");
    float(out, o.rscore);
    out.extend_from_slice(b",\"consumer_count\":");
    int(
        out,
        o.assignment
            .iter()
            .filter(|(_, held)| !held.is_empty())
            .count(),
    );
    out.extend_from_slice(b",\"lower_bound\":");
    int(out, extra.lower_bound);
    out.extend_from_slice(b",\"overloaded_partitions\":");
    array(out, &o.overloaded, |out, &j| {
        out.push(b'{');
        names.key_fields(out, j);
        out.extend_from_slice(b",\"rate\":");
        float(out, p.rates[j as usize]);
        out.extend_from_slice(b",\"consumer\":");
        names.consumer(out, o.owner[j as usize]);
        out.push(b'}');
    });
    out.extend_from_slice(b",\"overloaded_members\":");
    let overloaded_members: &[u32] = if p.members.is_some() { &o.sorted } else { &[] };
    array(
        out,
        overloaded_members
            .iter()
            .filter(|&&c| !within(o.loads[slot[c as usize]], consumers.cap[c as usize])),
        |out, &c| names.consumer(out, c),
    );
    out.extend_from_slice(b",\"recommended_consumers\":");
    match p.members {
        Some(_) => int(out, o.bins_used),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"outputs\":");
    out.extend_from_slice(extra.outputs);
    if let Some(report) = &o.zones {
        out.extend_from_slice(b",\"cross_zone_rate\":");
        float(out, report.total);
    }
    out.extend_from_slice(b",\"group\":");
    out.extend_from_slice(extra.group);
    out.extend_from_slice(b",\"version\":null}");
    std::mem::take(out)
}

/// `,"delta":{"rows":…,"columns":…,"cells":…` (the object left open).
fn delta(out: &mut Vec<u8>, o: &Outcome, names: &Names, n: usize) {
    out.extend_from_slice(b",\"delta\":{\"rows\":");
    array(out, &o.rows, |out, &c| names.consumer(out, c));
    out.extend_from_slice(b",\"columns\":");
    array(out, &o.columns, |out, &j| {
        let key = match (j as usize).checked_sub(n) {
            None => names.keys[j as usize],
            Some(g) => names.gone_keys[g],
        };
        names.partition(out, key)
    });
    out.extend_from_slice(b",\"cells\":");
    array(out, &o.cells, |out, &(r, c, v)| {
        out.push(b'[');
        int(out, r);
        out.push(b',');
        int(out, c);
        out.push(b',');
        int(out, v);
        out.push(b']');
    });
}

/// The assignment as the store keeps it: `{"consumer":[["topic",partition],…],…}`, consumers in the
/// outcome's order.
pub fn stored(o: &Outcome, names: &Names) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 * names.keys.len() + 1024);
    out.push(b'{');
    for (i, (c, held)) in o.assignment.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        names.consumer(&mut out, *c);
        out.push(b':');
        array(&mut out, held, |out, &j| {
            let (t, p) = names.keys[j as usize];
            out.extend_from_slice(names.pair_prefix.get(t));
            int(out, p);
            out.push(b']');
        });
    }
    out.push(b'}');
    out
}

/// The racks stored with a zone-aware version: `{"consumer":"rack",…}` for the consumers whose rack is known,
/// in id order.
pub fn racks(o: &Outcome, report: &ZoneReport, zones: &Zones, names: &Names) -> Vec<u8> {
    let index: crate::hash::Map<u32, usize> = o
        .assignment
        .iter()
        .enumerate()
        .map(|(i, (c, _))| (*c, i))
        .collect();
    let mut out = vec![b'{'];
    for &c in &o.sorted {
        let rack = report.racks[index[&c]];
        if rack < 0 {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        names.consumer(&mut out, c);
        out.push(b':');
        string(&mut out, &zones.names[rack as usize]);
    }
    out.push(b'}');
    out
}

/// Each consumer's load as the store keeps it beside the assignment: `{"consumer":load,…}`, consumers in the
/// outcome's order, each load as the answer's `consumers[].load` writes it.
pub fn loads(o: &Outcome, names: &Names) -> Vec<u8> {
    let mut out = Vec::with_capacity(40 * o.assignment.len() + 2);
    out.push(b'{');
    for (i, ((c, _), &load)) in o.assignment.iter().zip(&o.loads).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        names.consumer(&mut out, *c);
        out.push(b':');
        float(&mut out, load);
    }
    out.push(b'}');
    out
}
