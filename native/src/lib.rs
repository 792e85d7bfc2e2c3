//! groupfit's compiled core: the Python side hands over the problem as it holds it (keys, rates, the
//! previous assignment), this module maps ids to integers once, runs the algorithm on arrays (without the
//! GIL) and returns the outcome's parts as Python objects. `app/core` is the reference it must equal.

mod bins;
mod consumers;
mod fit;
mod least_loaded;
mod natural;
mod problem;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyString, PyTuple};

use consumers::{Consumers, NONE};
use problem::{Outputs, Problem};

/// The algorithms this core runs; any other falls back to the reference.
const ALGORITHMS: [&str; 13] = [
    "nf",
    "ff",
    "bf",
    "wf",
    "nfd",
    "ffd",
    "bfd",
    "wfd",
    "mwf",
    "mbf",
    "mwfp",
    "mbfp",
    "least-loaded",
];

/// FxHash (rustc's): keys here are small integers, and SipHash's DoS resistance is not needed for them.
#[derive(Default)]
struct Fx(u64);
impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.write_u64(u64::from_le_bytes(chunk.try_into().unwrap()));
        }
        let mut last = [0u8; 8];
        let rest = chunks.remainder();
        last[..rest.len()].copy_from_slice(rest);
        self.write_u64(u64::from_le_bytes(last) ^ (rest.len() as u64) << 56);
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Topics as small integers, remembering the last topic object (keys come grouped by topic).
/// (Every key object stays alive for the whole call, so an object's address names it.)
struct Topics {
    ids: FxMap<String, u32>,
    names: Vec<String>,
    last: (*mut pyo3::ffi::PyObject, u32),
}

impl Topics {
    fn key(&mut self, key: &Bound<'_, PyAny>, add: bool) -> PyResult<Option<(u32, i64)>> {
        let tuple = key.downcast::<PyTuple>()?;
        let topic = tuple.get_borrowed_item(0)?;
        let partition: i64 = tuple.get_borrowed_item(1)?.extract()?;
        let ptr = topic.as_ptr();
        if ptr == self.last.0 {
            return Ok(Some((self.last.1, partition)));
        }
        let name = topic.downcast::<PyString>()?.to_str()?;
        let id = match self.ids.get(name) {
            Some(&id) => id,
            None if add => {
                let id = self.names.len() as u32;
                self.ids.insert(name.to_owned(), id);
                self.names.push(name.to_owned());
                id
            }
            None => return Ok(None),
        };
        self.last = (ptr, id);
        Ok(Some((id, partition)))
    }
}

fn name_of<'py>(
    py: Python<'py>,
    strings: &mut Vec<Option<Bound<'py, PyString>>>,
    consumers: &Consumers,
    c: u32,
) -> Bound<'py, PyString> {
    let c = c as usize;
    if strings.len() < consumers.len() {
        strings.resize(consumers.len(), None);
    }
    strings[c]
        .get_or_insert_with(|| PyString::new(py, &consumers.names[c]))
        .clone()
}

fn get<'py, T: FromPyObject<'py>>(params: &Bound<'py, PyDict>, name: &str) -> PyResult<Option<T>> {
    match params.get_item(name)? {
        Some(value) if !value.is_none() => Ok(Some(value.extract()?)),
        _ => Ok(None),
    }
}

/// (topic, partition) → partition index: a table per topic whose partition numbers are dense (Kafka numbers
/// them 0..n-1), a hash map for the others.
struct Index {
    dense: Vec<Vec<u32>>,
    sparse: FxMap<(u32, i64), u32>,
}

impl Index {
    fn new(parsed: &[(u32, i64)], topics: usize) -> Self {
        let mut count = vec![0usize; topics];
        let mut low = vec![i64::MAX; topics];
        let mut high = vec![-1i64; topics];
        for &(t, p) in parsed {
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
        let mut sparse = FxMap::default();
        for (j, &(t, p)) in parsed.iter().enumerate() {
            let table = &mut dense[t as usize];
            if table.is_empty() {
                sparse.insert((t, p), j as u32);
            } else {
                table[p as usize] = j as u32;
            }
        }
        Index { dense, sparse }
    }

    fn get(&self, (t, p): (u32, i64)) -> Option<u32> {
        let table = &self.dense[t as usize];
        if table.is_empty() {
            return self.sparse.get(&(t, p)).copied();
        }
        let j = *table.get(usize::try_from(p).ok()?)?;
        (j != NONE).then_some(j)
    }
}

/// Solve one rebalance; None when this core does not run the algorithm or cannot order these consumer ids
/// exactly as the reference does (non-ASCII ids, digit runs with leading zeros).
#[pyfunction]
#[pyo3(signature = (algorithm, keys, rates, lags, capacity, previous, members, member_capacities, params))]
#[allow(clippy::too_many_arguments)]
fn solve<'py>(
    py: Python<'py>,
    algorithm: &str,
    keys: &Bound<'py, PyList>,
    rates: Vec<f64>,
    lags: &Bound<'py, PyList>,
    capacity: f64,
    previous: &Bound<'py, PyDict>,
    members: Option<&Bound<'py, PyList>>,
    member_capacities: &Bound<'py, PyDict>,
    params: &Bound<'py, PyDict>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    if !ALGORITHMS.contains(&algorithm) {
        return Ok(None);
    }
    let n = keys.len();
    // consumer ids: the previous consumers, then the members not among them
    let mut strings: Vec<Option<Bound<'py, PyString>>> = vec![];
    let mut names: Vec<String> = vec![];
    let mut consumer_of: HashMap<String, u32> = HashMap::new();
    let mut intern = |name: Bound<'py, PyString>,
                      strings: &mut Vec<Option<Bound<'py, PyString>>>|
     -> PyResult<Option<u32>> {
        let text = name.to_str()?;
        if let Some(&c) = consumer_of.get(text) {
            return Ok(Some(c));
        }
        if !natural::supported(text) {
            return Ok(None);
        }
        let c = names.len() as u32;
        consumer_of.insert(text.to_owned(), c);
        names.push(text.to_owned());
        strings.push(Some(name));
        Ok(Some(c))
    };
    let mut previous_ids = vec![];
    for consumer in previous.keys() {
        match intern(consumer.downcast_into::<PyString>()?, &mut strings)? {
            Some(c) => previous_ids.push(c),
            None => return Ok(None),
        }
    }
    let mut member_ids = None;
    if let Some(members) = members {
        let mut ids = vec![];
        for m in members.iter() {
            match intern(m.downcast_into::<PyString>()?, &mut strings)? {
                Some(c) => ids.push(c),
                None => return Ok(None),
            }
        }
        member_ids = Some(ids);
    }
    let mut own = vec![capacity; names.len()];
    for (name, value) in member_capacities.iter() {
        let name: String = name.extract()?;
        if let Some(&c) = consumer_of.get(&name) {
            own[c as usize] = value.extract()?;
        }
    }
    // partitions: (topic, partition) → index, and the (topic, partition) order
    let key_items: Vec<Bound<'py, PyAny>> = keys.iter().collect();
    let mut topics = Topics {
        ids: FxMap::default(),
        names: vec![],
        last: (std::ptr::null_mut(), 0),
    };
    let mut parsed = Vec::with_capacity(n);
    for key in &key_items {
        parsed.push(topics.key(key, true)?.unwrap());
    }
    let index = Index::new(&parsed, topics.names.len());
    let mut topic_order: Vec<u32> = (0..topics.names.len() as u32).collect();
    topic_order.sort_by(|&a, &b| topics.names[a as usize].cmp(&topics.names[b as usize]));
    let mut key_rank = vec![0u32; n];
    let mut rank = 0u32;
    let mut sparse: Vec<Vec<(i64, u32)>> = vec![vec![]; topics.names.len()];
    for (&(t, p), &j) in &index.sparse {
        sparse[t as usize].push((p, j));
    }
    for &t in &topic_order {
        let table = &index.dense[t as usize];
        if table.is_empty() {
            let run = &mut sparse[t as usize];
            run.sort_unstable();
            for &(_, j) in run.iter() {
                key_rank[j as usize] = rank;
                rank += 1;
            }
        } else {
            for &j in table.iter().filter(|&&j| j != NONE) {
                key_rank[j as usize] = rank;
                rank += 1;
            }
        }
    }
    // the previous assignment
    let mut previous_owner = vec![NONE; n];
    let mut previous_held = vec![];
    let mut gone = vec![];
    let mut gone_keys: Vec<Bound<'py, PyAny>> = vec![];
    for (i, held) in previous.values().iter().enumerate() {
        let c = previous_ids[i];
        let held = held.downcast_into::<PyList>()?;
        let mut kept = Vec::with_capacity(held.len());
        for key in held.iter() {
            let j = topics.key(&key, false)?.and_then(|k| index.get(k));
            match j {
                Some(j) => {
                    previous_owner[j as usize] = c;
                    kept.push(j);
                }
                None => {
                    gone.push(c);
                    gone_keys.push(key.clone());
                }
            }
        }
        previous_held.push(kept);
    }
    let lags: Vec<Option<f64>> = if algorithm == "least-loaded" {
        lags.extract()?
    } else {
        vec![]
    };
    let budget = (
        get::<f64>(params, "max_rscore")?,
        get::<u64>(params, "max_moves")?,
    );
    let least_loaded_params = least_loaded::Params {
        mu: get(params, "mu")?,
        w_sla: get(params, "w_sla")?.unwrap_or(5.0),
        f_up: get(params, "f_up")?.unwrap_or(0.9),
        f_down: get(params, "f_down")?.unwrap_or(0.4),
        rebalance_s: get(params, "rebalance_s")?.unwrap_or(5.0),
        plan_rebalance_lag: get(params, "plan_rebalance_lag")?.unwrap_or(true),
    };
    let algorithm = algorithm.to_owned();
    let members_for_table = member_ids.clone().unwrap_or_default();
    let (outcome, consumers) = py.allow_threads(move || {
        let consumers = Consumers::new(names, own, &members_for_table, capacity);
        let mut p = Problem::new(
            rates,
            lags,
            capacity,
            consumers,
            previous_owner,
            previous_ids,
            previous_held,
            gone,
            member_ids,
            key_rank,
        );
        let placement = match algorithm.as_str() {
            "least-loaded" => least_loaded::place(&mut p, &least_loaded_params),
            "mwf" | "mbf" | "mwfp" | "mbfp" => {
                let rule = if algorithm.starts_with("mw") {
                    bins::Rule::Worst
                } else {
                    bins::Rule::Best
                };
                fit::modified_any_fit(&mut p, rule, !algorithm.ends_with('p'), budget.0, budget.1)
            }
            name => {
                let rule = bins::Rule::of(match &name[..1] {
                    "n" => "next",
                    "f" => "first",
                    "b" => "best",
                    _ => "worst",
                })
                .unwrap();
                fit::any_fit(&mut p, rule, name.len() == 3)
            }
        };
        let outcome = problem::outcome(&p, placement);
        (outcome, p.consumers)
    });
    let outcome = outcome.map_err(PyRuntimeError::new_err)?;
    let mut name = |c: u32| name_of(py, &mut strings, &consumers, c);
    let assignment = PyDict::new(py);
    let loads = PyDict::new(py);
    for ((c, held), load) in outcome.assignment.iter().zip(&outcome.loads) {
        let id = name(*c);
        assignment.set_item(&id, PyList::new(py, held)?)?;
        loads.set_item(&id, *load)?;
    }
    let sorted = PyList::new(py, outcome.sorted.iter().map(|&c| name(c)))?;
    let owner_names: Vec<Bound<'py, PyString>> =
        outcome.assignment.iter().map(|(c, _)| name(*c)).collect();
    let mut slot = vec![0usize; consumers.len()];
    for (i, (c, _)) in outcome.assignment.iter().enumerate() {
        slot[*c as usize] = i;
    }
    let owner = PyList::new(
        py,
        outcome
            .owner
            .iter()
            .map(|&c| owner_names[slot[c as usize]].clone()),
    )?;
    let moved_from = PyList::new(py, outcome.moved_from.iter().map(|&c| name(c)))?;
    let outputs = PyDict::new(py);
    match &outcome.outputs {
        Outputs::None => {}
        Outputs::Budget {
            max_rscore,
            max_moves,
            rscore,
            moves,
            refused,
            overloaded,
        } => {
            let budget = PyDict::new(py);
            budget.set_item("max_rscore", max_rscore)?;
            budget.set_item("max_moves", max_moves)?;
            budget.set_item("rscore", rscore)?;
            budget.set_item("moves", moves)?;
            budget.set_item("refused_moves", refused)?;
            outputs.set_item("budget", budget)?;
            outputs.set_item(
                "overloaded_consumers",
                PyList::new(py, overloaded.iter().map(|&c| name(c)))?,
            )?;
        }
        Outputs::LeastLoaded {
            action,
            before,
            after,
            rate_capacity,
            lag_capacity,
        } => {
            outputs.set_item("scale_action", action)?;
            outputs.set_item("consumers_before", before)?;
            outputs.set_item("consumers_after", after)?;
            outputs.set_item("rate_capacity", rate_capacity)?;
            outputs.set_item("lag_capacity", lag_capacity)?;
        }
    }
    let rows = PyList::new(py, outcome.rows.iter().map(|&c| name(c)))?;
    let columns = PyList::new(
        py,
        outcome.columns.iter().map(|&j| {
            if (j as usize) < n {
                key_items[j as usize].clone()
            } else {
                gone_keys[j as usize - n].clone()
            }
        }),
    )?;
    let cells = PyList::new(
        py,
        outcome
            .cells
            .iter()
            .map(|&(r, c, v)| PyTuple::new(py, [r as i64, c as i64, v as i64]).unwrap()),
    )?;
    let result = PyTuple::new(
        py,
        [
            assignment.into_any(),
            sorted.into_any(),
            owner.into_any(),
            loads.into_any(),
            PyList::new(py, &outcome.moved)?.into_any(),
            moved_from.into_any(),
            outcome.rscore.into_pyobject(py)?.into_any(),
            PyList::new(py, &outcome.overloaded)?.into_any(),
            outcome.bins_used.into_pyobject(py)?.into_any(),
            outputs.into_any(),
            rows.into_any(),
            columns.into_any(),
            cells.into_any(),
        ],
    )?;
    Ok(Some(result))
}

/// Whether a problem's partitions and previous assignment are certainly valid: rates floats, finite and at
/// least 0; lags None or such floats; each (topic, partition) once; previous consumers non-empty strings,
/// each holding a list, no partition held twice. False says only "let the reference check find what is wrong".
#[pyfunction]
fn valid(
    keys: &Bound<'_, PyList>,
    rates: &Bound<'_, PyList>,
    lags: &Bound<'_, PyList>,
    previous: &Bound<'_, PyDict>,
) -> bool {
    let number = |value: &Bound<'_, PyAny>| match value.downcast_exact::<PyFloat>() {
        Ok(f) => {
            let v = f.value();
            v.is_finite() && v >= 0.0
        }
        Err(_) => false,
    };
    if rates.len() != keys.len() || lags.len() != keys.len() {
        return false;
    }
    if !rates.iter().all(|r| number(&r)) || !lags.iter().all(|l| l.is_none() || number(&l)) {
        return false;
    }
    let mut topics = Topics {
        ids: FxMap::default(),
        names: vec![],
        last: (std::ptr::null_mut(), 0),
    };
    let mut seen: FxMap<(u32, i64), ()> =
        FxMap::with_capacity_and_hasher(keys.len(), Default::default());
    let mut unique = |key: &Bound<'_, PyAny>, topics: &mut Topics| -> bool {
        key.downcast_exact::<PyTuple>().is_ok_and(|t| t.len() == 2)
            && matches!(topics.key(key, true), Ok(Some(k)) if seen.insert(k, ()).is_none())
    };
    if !keys.iter().all(|key| unique(&key, &mut topics)) {
        return false;
    }
    let mut held_before: FxMap<(u32, i64), ()> = FxMap::default();
    for (consumer, held) in previous.iter() {
        let (Ok(consumer), Ok(held)) = (
            consumer.downcast_exact::<PyString>(),
            held.downcast_exact::<PyList>(),
        ) else {
            return false;
        };
        if consumer.to_str().map_or(true, str::is_empty) {
            return false;
        }
        for key in held.iter() {
            if !key.downcast_exact::<PyTuple>().is_ok_and(|t| t.len() == 2) {
                return false;
            }
            match topics.key(&key, true) {
                Ok(Some(k)) if held_before.insert(k, ()).is_none() => {}
                _ => return false,
            }
        }
    }
    true
}

#[pymodule]
fn groupfit_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(solve, m)?)?;
    m.add_function(wrap_pyfunction!(valid, m)?)?;
    m.add("ALGORITHMS", ALGORITHMS.to_vec())?;
    Ok(())
}
