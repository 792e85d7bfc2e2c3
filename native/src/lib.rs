//! groupfit's compiled core. A request's partitions, previous assignment and members become arrays once
//! (`Bulk`: read from the request's JSON by `parse_assign`, or from the reference's Problem by
//! `from_objects`); `Bulk.solve` runs an algorithm on them without the GIL, and the `Solution` writes the
//! answer's JSON itself or hands the outcome's parts to Python. `app/core` is the reference it must equal.

mod answer;
mod bins;
mod consumers;
mod fit;
mod input;
mod json;
mod least_loaded;
mod natural;
mod problem;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

use answer::Names;
use consumers::Consumers;
use std::collections::HashMap;

use input::{Index, Input};
use problem::{Outcome, Outputs, Problem};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// Topics as small integers while reading Python keys, with the topic objects seen lately in front of the map
/// (keys come grouped by topic or cycling through a few; every key object stays alive for the whole call, so
/// an object's address names it).
struct Topics {
    ids: HashMap<String, u32>,
    names: Vec<String>,
    recent: [(*mut pyo3::ffi::PyObject, u32); 64],
}

impl Topics {
    fn new() -> Self {
        Topics {
            ids: HashMap::new(),
            names: vec![],
            recent: [(std::ptr::null_mut(), 0); 64],
        }
    }

    fn key(&mut self, key: &Bound<'_, PyAny>) -> PyResult<(u32, i64)> {
        let tuple = key.downcast::<PyTuple>()?;
        let topic = tuple.get_borrowed_item(0)?;
        let partition: i64 = tuple.get_borrowed_item(1)?.extract()?;
        let ptr = topic.as_ptr();
        let slot = (ptr as usize >> 4) & 63;
        if self.recent[slot].0 == ptr {
            return Ok((self.recent[slot].1, partition));
        }
        let name = topic.downcast::<PyString>()?.to_str()?;
        let id = match self.ids.get(name) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as u32;
                self.ids.insert(name.to_owned(), id);
                self.names.push(name.to_owned());
                id
            }
        };
        self.recent[slot] = (ptr, id);
        Ok((id, partition))
    }
}

/// A request's partitions, previous assignment and members on arrays, ready to solve once.
#[pyclass(module = "groupfit_native")]
struct Bulk {
    input: Option<Input>,
}

impl Bulk {
    fn input(&self) -> PyResult<&Input> {
        self.input
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("this request was solved already"))
    }
}

fn get<'py, T: FromPyObject<'py>>(params: &Bound<'py, PyDict>, name: &str) -> PyResult<Option<T>> {
    match params.get_item(name)? {
        Some(value) if !value.is_none() => Ok(Some(value.extract()?)),
        _ => Ok(None),
    }
}

#[pymethods]
impl Bulk {
    /// The number of partitions.
    #[getter]
    fn size(&self) -> PyResult<usize> {
        Ok(self.input()?.keys.len())
    }

    /// Whether the request gave the previous assignment.
    #[getter]
    fn has_previous(&self) -> PyResult<bool> {
        Ok(self.input()?.previous.is_some())
    }

    /// The number of members given, None in autoscale mode.
    #[getter]
    fn member_count(&self) -> PyResult<Option<usize>> {
        Ok(self.input()?.members.as_ref().map(Vec::len))
    }

    /// Partitions, previous partitions and members: the request's size, as the service counts it.
    #[getter]
    fn work(&self) -> PyResult<usize> {
        let input = self.input()?;
        let previous = input.previous.as_ref().map_or(0, |p| {
            p.held.iter().map(Vec::len).sum::<usize>() + p.gone.len()
        });
        Ok(input.keys.len() + previous + input.members.as_ref().map_or(0, Vec::len))
    }

    /// (math.fsum of the rates, sum of lags (none as 0), sum of the lags planned for a rebalance of
    /// `rebalance_s` when `plan`): the totals the reference checks before it solves, summed as it sums them.
    fn totals(&self, rebalance_s: f64, plan: bool) -> PyResult<(f64, f64, f64)> {
        let input = self.input()?;
        let lags = input.lags.iter().map(|l| l.unwrap_or(0.0));
        let lag_sum = lags.clone().fold(0.0, |s, l| s + l);
        let planned = if plan {
            lags.zip(&input.rates)
                .fold(0.0, |s, (l, &r)| s + (l + r * rebalance_s))
        } else {
            lag_sum
        };
        Ok((problem::fsum(input.rates.iter().copied()), lag_sum, planned))
    }

    /// Take a previous assignment (a group's stored one: consumer → list of (topic, partition)); False when
    /// this core cannot take it (then the reference must solve).
    fn set_previous(&mut self, previous: &Bound<'_, PyDict>) -> PyResult<bool> {
        let input = self
            .input
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this request was solved already"))?;
        previous_from_objects(input, previous)
    }

    /// Run `algorithm` (with C = `capacity` and the parameters in `params`); the request is spent.
    fn solve(
        &mut self,
        py: Python<'_>,
        algorithm: &str,
        capacity: f64,
        params: &Bound<'_, PyDict>,
    ) -> PyResult<Solution> {
        if !ALGORITHMS.contains(&algorithm) {
            return Err(PyValueError::new_err(format!(
                "the compiled core does not run {algorithm}"
            )));
        }
        let input = self
            .input
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this request was solved already"))?;
        let budget = (
            get::<f64>(params, "max_rscore")?,
            get::<u64>(params, "max_moves")?,
        );
        let least_loaded = least_loaded::Params {
            mu: get(params, "mu")?,
            w_sla: get(params, "w_sla")?.unwrap_or(5.0),
            f_up: get(params, "f_up")?.unwrap_or(0.9),
            f_down: get(params, "f_down")?.unwrap_or(0.4),
            rebalance_s: get(params, "rebalance_s")?.unwrap_or(5.0),
            plan_rebalance_lag: get(params, "plan_rebalance_lag")?.unwrap_or(true),
        };
        let algorithm = algorithm.to_owned();
        py.allow_threads(move || solve(input, &algorithm, capacity, budget, &least_loaded))
            .map_err(PyRuntimeError::new_err)
    }
}

fn solve(
    input: Input,
    algorithm: &str,
    capacity: f64,
    budget: (Option<f64>, Option<u64>),
    least_loaded_params: &least_loaded::Params,
) -> Result<Solution, String> {
    let Input {
        topics,
        keys,
        rates,
        lags,
        key_rank,
        names,
        consumer_of,
        previous,
        members,
        own,
        ..
    } = input;
    let mut capacities = vec![capacity; names.len()];
    for (c, value) in own {
        capacities[c as usize] = value;
    }
    let members_list = members.as_deref().unwrap_or(&[]);
    let consumers = Consumers::new(names, consumer_of, capacities, members_list, capacity);
    let previous = previous.unwrap_or_else(|| input::Previous {
        ids: vec![],
        held: vec![],
        owner: vec![consumers::NONE; keys.len()],
        gone: vec![],
        gone_keys: vec![],
    });
    let mut p = Problem::new(
        rates,
        lags,
        capacity,
        consumers,
        previous.owner,
        previous.ids,
        previous.held,
        previous.gone,
        members,
        key_rank,
    );
    let placement = match algorithm {
        "least-loaded" => least_loaded::place(&mut p, least_loaded_params),
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
    let outcome = problem::outcome(&p, placement)?;
    let names = Names::new(&topics, keys, previous.gone_keys, &p.consumers.names);
    Ok(Solution {
        problem: p,
        outcome,
        topics,
        names,
    })
}

/// An algorithm's outcome, with what it takes to write it.
#[pyclass(module = "groupfit_native")]
struct Solution {
    problem: Problem,
    outcome: Outcome,
    topics: Vec<String>,
    names: Names,
}

/// Python strings made once per consumer or topic.
struct Strings<'py, 'a> {
    py: Python<'py>,
    names: &'a [String],
    made: Vec<Option<Bound<'py, PyString>>>,
}

impl<'py, 'a> Strings<'py, 'a> {
    fn new(py: Python<'py>, names: &'a [String]) -> Self {
        Strings {
            py,
            names,
            made: vec![None; names.len()],
        }
    }

    fn get(&mut self, i: u32) -> Bound<'py, PyString> {
        let (py, names) = (self.py, self.names);
        self.made[i as usize]
            .get_or_insert_with(|| PyString::new(py, &names[i as usize]))
            .clone()
    }
}

#[pymethods]
impl Solution {
    /// The answer's JSON as msgspec encodes AssignResponse (sparse delta, version null); `outputs` and
    /// `group`: those fields already encoded.
    fn answer<'py>(
        &self,
        py: Python<'py>,
        algorithm: &str,
        lower_bound: i64,
        outputs: &[u8],
        group: &[u8],
    ) -> Bound<'py, PyBytes> {
        let extra = answer::Extra {
            algorithm,
            lower_bound,
            outputs,
            group,
        };
        let json =
            py.allow_threads(|| answer::write(&self.problem, &self.outcome, &self.names, &extra));
        PyBytes::new(py, &json)
    }

    /// The assignment as the store keeps it (JSON).
    fn stored<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let json = py.allow_threads(|| answer::stored(&self.outcome, &self.names));
        PyBytes::new(py, &json)
    }

    /// (consumers holding a partition, moves, their total rate, the `top` moves of the largest rate as
    /// (topic, partition, from, to, rate), consumers above their capacity, Rscore) for the group's history.
    fn summary<'py>(
        &self,
        py: Python<'py>,
        top: usize,
    ) -> PyResult<(usize, usize, f64, Bound<'py, PyList>, usize, f64)> {
        let (p, o) = (&self.problem, &self.outcome);
        let moved_rate = o.moved.iter().fold(0.0, |s, &j| s + p.rates[j as usize]);
        let mut largest: Vec<usize> = (0..o.moved.len())
            .take(if top == 0 { 0 } else { usize::MAX })
            .collect();
        largest.sort_by(|&a, &b| {
            let (ra, rb) = (p.rates[o.moved[a] as usize], p.rates[o.moved[b] as usize]);
            rb.partial_cmp(&ra).unwrap()
        });
        let mut consumers = Strings::new(py, &p.consumers.names);
        let mut topics = Strings::new(py, &self.topics);
        let moves = PyList::empty(py);
        for &i in largest.iter().take(top) {
            let j = o.moved[i];
            let (t, partition) = self.names.keys[j as usize];
            let rate = p.rates[j as usize];
            moves.append((
                topics.get(t),
                partition,
                consumers.get(o.moved_from[i]),
                consumers.get(o.owner[j as usize]),
                rate,
            ))?;
        }
        let overloaded = o
            .assignment
            .iter()
            .zip(&o.loads)
            .filter(|((c, _), &load)| !bins::within(load, p.consumers.cap[*c as usize]))
            .count();
        let used = o
            .assignment
            .iter()
            .filter(|(_, held)| !held.is_empty())
            .count();
        Ok((used, o.moved.len(), moved_rate, moves, overloaded, o.rscore))
    }

    /// The algorithm's own outputs (a migration budget's spending, least-loaded's scaling), as Python values.
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut consumers = Strings::new(py, &self.problem.consumers.names);
        outputs(py, &self.outcome.outputs, &mut consumers)
    }

    /// The outcome's parts, as app.core.assign.Outcome takes them: (assignment, consumers in id order, owner,
    /// loads, moved, moved_from, Rscore, overloaded, bins used, outputs, delta rows, columns, cells).
    fn parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (p, o) = (&self.problem, &self.outcome);
        let n = p.rates.len();
        let mut consumers = Strings::new(py, &p.consumers.names);
        let mut topics = Strings::new(py, &self.topics);
        let assignment = PyDict::new(py);
        let loads = PyDict::new(py);
        for ((c, held), load) in o.assignment.iter().zip(&o.loads) {
            let id = consumers.get(*c);
            assignment.set_item(&id, PyList::new(py, held)?)?;
            loads.set_item(&id, *load)?;
        }
        let sorted = PyList::new(py, o.sorted.iter().map(|&c| consumers.get(c)))?;
        let owner = PyList::new(py, o.owner.iter().map(|&c| consumers.get(c)))?;
        let moved_from = PyList::new(py, o.moved_from.iter().map(|&c| consumers.get(c)))?;
        let rows = PyList::new(py, o.rows.iter().map(|&c| consumers.get(c)))?;
        let mut key = |(t, partition): (u32, i64)| (topics.get(t), partition);
        let columns = PyList::new(
            py,
            o.columns
                .iter()
                .map(|&j| match (j as usize).checked_sub(n) {
                    None => key(self.names.keys[j as usize]),
                    Some(g) => key(self.names.gone_keys[g]),
                }),
        )?;
        let cells = PyList::new(py, o.cells.iter().map(|&(r, c, v)| (r, c, v as i64)))?;
        PyTuple::new(
            py,
            [
                assignment.into_any(),
                sorted.into_any(),
                owner.into_any(),
                loads.into_any(),
                PyList::new(py, &o.moved)?.into_any(),
                moved_from.into_any(),
                o.rscore.into_pyobject(py)?.into_any(),
                PyList::new(py, &o.overloaded)?.into_any(),
                o.bins_used.into_pyobject(py)?.into_any(),
                outputs(py, &o.outputs, &mut consumers)?.into_any(),
                rows.into_any(),
                columns.into_any(),
                cells.into_any(),
            ],
        )
    }
}

fn outputs<'py>(
    py: Python<'py>,
    outputs: &Outputs,
    consumers: &mut Strings<'py, '_>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    match outputs {
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
            dict.set_item("budget", budget)?;
            dict.set_item(
                "overloaded_consumers",
                PyList::new(py, overloaded.iter().map(|&c| consumers.get(c)))?,
            )?;
        }
        Outputs::LeastLoaded {
            action,
            before,
            after,
            rate_capacity,
            lag_capacity,
        } => {
            dict.set_item("scale_action", action)?;
            dict.set_item("consumers_before", before)?;
            dict.set_item("consumers_after", after)?;
            dict.set_item("rate_capacity", rate_capacity)?;
            dict.set_item("lag_capacity", lag_capacity)?;
        }
    }
    Ok(dict)
}

/// An assignment request's JSON → (its other fields' JSON, for msgspec; its partitions, previous assignment
/// and members on arrays), or None where the reference must decode it (see input.rs).
#[pyfunction]
fn parse_assign<'py>(py: Python<'py>, body: &[u8]) -> Option<(Bound<'py, PyBytes>, Bulk)> {
    let (rest, input) = py.allow_threads(|| input::parse(body))?;
    Some((PyBytes::new(py, &rest), Bulk { input: Some(input) }))
}

/// The reference Problem's partitions (validated by it), previous assignment and members on arrays; None
/// where this core cannot order the consumer ids exactly as the reference does (non-ASCII ids, digit runs
/// with leading zeros). `lags`: None when the algorithm does not read them.
#[pyfunction]
#[pyo3(signature = (keys, rates, lags, previous, members, member_capacities))]
fn from_objects(
    keys: &Bound<'_, PyList>,
    rates: Vec<f64>,
    lags: Option<Vec<Option<f64>>>,
    previous: &Bound<'_, PyDict>,
    members: Option<&Bound<'_, PyList>>,
    member_capacities: &Bound<'_, PyDict>,
) -> PyResult<Option<Bulk>> {
    let mut topics = Topics::new();
    let parsed = keys
        .iter()
        .map(|key| topics.key(&key))
        .collect::<PyResult<Vec<_>>>()?;
    let lags = lags.unwrap_or_else(|| vec![None; parsed.len()]);
    let Some(mut input) = Input::new(topics.names, topics.ids, parsed, rates, lags) else {
        return Err(PyValueError::new_err("the partitions were not validated"));
    };
    if !previous_from_objects(&mut input, previous)? {
        return Ok(None);
    }
    if let Some(members) = members {
        let capacities: HashMap<String, f64> = member_capacities.extract()?;
        let names: Vec<String> = members.extract()?;
        let given = names
            .iter()
            .map(|m| (m.as_str(), capacities.get(m).copied()))
            .collect();
        if input.set_members(given).is_none() {
            return Ok(None);
        }
    }
    Ok(Some(Bulk { input: Some(input) }))
}

fn previous_from_objects(input: &mut Input, previous: &Bound<'_, PyDict>) -> PyResult<bool> {
    let mut names = Vec::with_capacity(previous.len());
    let mut counts = Vec::with_capacity(previous.len());
    let mut keys = vec![];
    let mut topics = Topics::new();
    for (consumer, held) in previous.iter() {
        let held = held.downcast_into::<PyList>()?;
        for key in held.iter() {
            keys.push(topics.key(&key)?);
        }
        names.push(consumer.downcast_into::<PyString>()?);
        counts.push(held.len());
    }
    // the keys' topic numbers are this call's: the input's own, looked up once per topic
    let ids: Vec<u32> = topics.names.iter().map(|t| input.topic(t)).collect();
    for key in keys.iter_mut() {
        key.0 = ids[key.0 as usize];
    }
    let consumers = names
        .iter()
        .zip(counts)
        .map(|(name, count)| Ok((name.to_str()?, count)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(input.set_previous(consumers, &keys).is_some())
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
    let mut topics = Topics::new();
    let mut parsed = Vec::with_capacity(keys.len());
    for key in keys.iter() {
        match key.downcast_exact::<PyTuple>() {
            Ok(t) if t.len() == 2 => {}
            _ => return false,
        }
        let Ok(k) = topics.key(&key) else {
            return false;
        };
        parsed.push(k);
    }
    if Index::new(&parsed, topics.names.len()).is_none() {
        return false;
    }
    let mut held_before = vec![];
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
            match topics.key(&key) {
                Ok(k) => held_before.push(k),
                _ => return false,
            }
        }
    }
    Index::new(&held_before, topics.names.len()).is_some()
}

#[pymodule]
fn groupfit_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Bulk>()?;
    m.add_class::<Solution>()?;
    m.add_function(wrap_pyfunction!(parse_assign, m)?)?;
    m.add_function(wrap_pyfunction!(from_objects, m)?)?;
    m.add_function(wrap_pyfunction!(valid, m)?)?;
    m.add("ALGORITHMS", ALGORITHMS.to_vec())?;
    Ok(())
}
