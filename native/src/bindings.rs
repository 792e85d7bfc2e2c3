//! The Python face of the core (PyO3): `Bulk` (a request on arrays, solved once), `Solution` (its outcome,
//! written as the answer's JSON or handed to Python in parts), and the functions that fill a Bulk from a
//! request's JSON (`parse_assign`) or from the reference's Problem (`from_objects`), or check one (`valid`).
//! Everything Python hands over is read here; the work runs without the GIL, and a panic in it (a bug: no
//! input may cause one) comes back as a RuntimeError, an Exception the service answers, not a BaseException.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::algorithms::{self, Algorithm, Family, Params, Solved};
use crate::answer;
use crate::bins::{self, F};
use crate::fit::Budget;
use crate::input::Input;
use crate::intern::Interner;
use crate::least_loaded;
use crate::problem::Outputs;
use crate::replay;
use crate::request;
use crate::validate;

/// `work` run without the GIL; a panic in it as a RuntimeError.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.allow_threads(|| unwound(work)).map_err(|what| {
        PyRuntimeError::new_err(format!("the compiled core failed (a bug): {what}"))
    })
}

/// `work`'s result, or what it panicked with.
fn unwound<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(work)).map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    })
}

/// A request's partitions, previous assignment and members on arrays, ready to solve once.
#[pyclass(module = "groupfit_native")]
pub struct Bulk {
    input: Option<Input>,
}

impl Bulk {
    fn input(&self) -> PyResult<&Input> {
        self.input.as_ref().ok_or_else(spent)
    }
}

fn spent() -> PyErr {
    PyRuntimeError::new_err("this request was solved already")
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

    /// Each member given a capacity of its own → that capacity, in the members' order.
    #[getter]
    fn member_capacities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let input = self.input()?;
        let dict = PyDict::new(py);
        for &(c, capacity) in &input.own {
            dict.set_item(input.consumers.name(c), capacity)?;
        }
        Ok(dict)
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
        Ok(self.input()?.totals(rebalance_s, plan))
    }

    /// Take the racks of the previous consumers (without members: the request's `previous_racks`, or those
    /// stored with the group); `strict`: each must be a known consumer's (else only the known ones' are
    /// taken). False when this core cannot take them (then the reference must solve, and says what is wrong).
    fn set_racks(&mut self, racks: &Bound<'_, PyDict>, strict: bool) -> PyResult<bool> {
        let input = self.input.as_mut().ok_or_else(spent)?;
        let mut racks: Vec<(String, String)> = racks
            .extract::<HashMap<String, String>>()?
            .into_iter()
            .collect();
        racks.sort_unstable();
        if !strict {
            racks.retain(|(c, _)| input.consumers.get(c).is_some());
        }
        Ok(input
            .set_consumer_racks(racks.iter().map(|(c, r)| (c.as_str(), r.as_str())))
            .is_some())
    }

    /// Whether partitions were given without a rate (`fill_rates` takes their group's stored ones).
    #[getter]
    fn needs_rates(&self) -> PyResult<bool> {
        Ok(!self.input()?.unrated.is_empty())
    }

    /// The group's stored rates (the JSON of `PUT …/rates` as stored) onto the partitions given without a rate:
    /// (how many were, how many took a stored rate); None when this core cannot take them (then the reference
    /// must read them).
    fn fill_rates(&mut self, py: Python<'_>, stored: &[u8]) -> PyResult<Option<(usize, usize)>> {
        let input = self.input.as_mut().ok_or_else(spent)?;
        detached(py, || request::fill_rates(input, stored))
    }

    /// Take a previous assignment (a group's stored one: consumer → list of (topic, partition)); False when
    /// this core cannot take it (then the reference must solve).
    fn set_previous(&mut self, previous: &Bound<'_, PyDict>) -> PyResult<bool> {
        previous_from_objects(self.input.as_mut().ok_or_else(spent)?, previous)
    }

    /// Run `algorithm` (with C = `capacity` and `params`: every parameter it takes, as its model dumps
    /// them); the request is spent.
    fn solve(
        &mut self,
        py: Python<'_>,
        algorithm: &str,
        capacity: f64,
        params: &Bound<'_, PyDict>,
    ) -> PyResult<Solution> {
        let algorithm = Algorithm::named(algorithm).ok_or_else(|| {
            PyValueError::new_err(format!("the compiled core does not run {algorithm}"))
        })?;
        let read = read_params(algorithm, params)?;
        let input = self.input.take().ok_or_else(spent)?;
        let solved = detached(py, move || {
            algorithms::run(input, algorithm, capacity, &read)
        })?
        .map_err(PyRuntimeError::new_err)?;
        Ok(Solution {
            solved,
            params: params.clone().unbind(),
        })
    }
}

/// The names of the algorithms of the table, in its order (the module's `ALGORITHMS`).
pub fn algorithm_names() -> Vec<&'static str> {
    algorithms::TABLE.iter().map(|a| a.name).collect()
}

/// The table as Python reads it (the module's `ALGORITHM_TABLE`): for each algorithm its name, family
/// (`kind`), fit rule, whether Any Fit takes the partitions largest first, Modified Any Fit's order of the
/// consumers, whether it honours a migration budget, and the parameters it reads.
pub fn algorithm_table(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    algorithms::TABLE
        .iter()
        .map(|a| {
            let row = PyDict::new(py);
            row.set_item("name", a.name)?;
            row.set_item("kind", a.kind())?;
            row.set_item("fit", a.rule().map(|r| r.name()))?;
            row.set_item("decreasing", a.decreasing())?;
            row.set_item("consumer_order", a.consumer_order())?;
            row.set_item("budget", a.budget())?;
            row.set_item("params", PyTuple::new(py, a.params())?)?;
            Ok(row)
        })
        .collect()
}

/// A parameter's value that is a bug of the caller's, not of the request.
fn bug(algorithm: &Algorithm, what: String) -> PyErr {
    PyRuntimeError::new_err(format!(
        "{}: {what} (a bug: the caller hands every parameter over, as its model dumps them)",
        algorithm.name
    ))
}

/// `params` as `algorithm` reads them: every one it takes present (None for an optional one left out),
/// no other.
fn read_params(algorithm: &Algorithm, params: &Bound<'_, PyDict>) -> PyResult<Params> {
    let names = algorithm.params();
    for key in params.keys() {
        let key = key.extract::<String>()?;
        if !names.contains(&key.as_str()) {
            return Err(bug(algorithm, format!("parameter {key:?} is not one")));
        }
    }
    let value = |name: &str| -> PyResult<Bound<'_, PyAny>> {
        params
            .get_item(name)?
            .ok_or_else(|| bug(algorithm, format!("parameter {name:?} is missing")))
    };
    let optional = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        let v = value(name)?;
        Ok((!v.is_none()).then_some(v))
    };
    Ok(match algorithm.family {
        Family::AnyFit { .. } => Params::None,
        Family::ModifiedAnyFit { .. } => Params::Budget(Budget {
            max_rscore: optional("max_rscore")?.map(|v| v.extract()).transpose()?,
            max_moves: optional("max_moves")?.map(|v| count(&v)).transpose()?,
        }),
        Family::LeastLoaded => Params::LeastLoaded(least_loaded::Params {
            mu: optional("mu")?.map(|v| v.extract()).transpose()?,
            w_sla: value("w_sla")?.extract()?,
            f_up: value("f_up")?.extract()?,
            f_down: value("f_down")?.extract()?,
            rebalance_s: value("rebalance_s")?.extract()?,
            plan_rebalance_lag: value("plan_rebalance_lag")?.extract()?,
        }),
    })
}

/// A count (Python int, at least 0); one beyond 64 bits as the largest (no request holds that many).
fn count(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    match value.extract::<u64>() {
        Ok(n) => Ok(n),
        Err(_) if value.is_instance_of::<PyInt>() && value.gt(0)? => Ok(u64::MAX),
        Err(error) => Err(error),
    }
}

/// An algorithm's outcome, with what it takes to write it.
#[pyclass(module = "groupfit_native")]
pub struct Solution {
    solved: Solved,
    /// The parameters as given (a budget's caps are echoed as they came).
    params: Py<PyDict>,
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
    /// The answer's JSON as msgspec encodes AssignResponse (a sparse delta, or none without `delta`; version
    /// null); `outputs` and `group`: those fields already encoded.
    fn answer<'py>(
        &self,
        py: Python<'py>,
        algorithm: &str,
        lower_bound: i64,
        outputs: &[u8],
        group: &[u8],
        delta: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let extra = answer::Extra {
            algorithm,
            lower_bound,
            outputs,
            group,
            delta,
        };
        let s = &self.solved;
        let json = detached(py, || {
            answer::write(&s.problem, &s.outcome, &s.names, &extra)
        })?;
        Ok(PyBytes::new(py, &json))
    }

    /// What the store keeps of the version (JSON): the assignment, and each consumer's load.
    fn stored<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let s = &self.solved;
        let (assignment, loads) = detached(py, || {
            (
                answer::stored(&s.outcome, &s.names),
                answer::loads(&s.outcome, &s.names),
            )
        })?;
        Ok((PyBytes::new(py, &assignment), PyBytes::new(py, &loads)))
    }

    /// (consumers holding a partition, moves, their total rate, the `top` moves of the largest rate as
    /// (topic, partition, from, to, rate), consumers above their capacity, Rscore) for the group's history.
    fn summary<'py>(
        &self,
        py: Python<'py>,
        top: usize,
    ) -> PyResult<(usize, usize, f64, Bound<'py, PyList>, usize, f64)> {
        let (p, o, names) = (
            &self.solved.problem,
            &self.solved.outcome,
            &self.solved.names,
        );
        let moved_rate = o.moved.iter().fold(0.0, |s, &j| s + p.rates[j as usize]);
        let mut largest: Vec<usize> = (0..o.moved.len())
            .take(if top == 0 { 0 } else { usize::MAX })
            .collect();
        largest.sort_by_key(|&i| std::cmp::Reverse(F(p.rates[o.moved[i] as usize])));
        let mut consumers = Strings::new(py, p.consumers.ids.names());
        let mut topics = Strings::new(py, names.topics.names());
        let moves = PyList::empty(py);
        for &i in largest.iter().take(top) {
            let j = o.moved[i];
            let (t, partition) = names.keys[j as usize];
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
        let mut consumers = Strings::new(py, self.solved.problem.consumers.ids.names());
        self.outputs_dict(py, &mut consumers)
    }

    /// The outcome's parts, as app.core.assign.Outcome takes them: (assignment, consumers in id order, owner,
    /// loads, moved, moved_from, Rscore, overloaded, bins used, outputs, delta rows, columns, cells).
    fn parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (p, o, names) = (
            &self.solved.problem,
            &self.solved.outcome,
            &self.solved.names,
        );
        let n = p.rates.len();
        let mut consumers = Strings::new(py, p.consumers.ids.names());
        let mut topics = Strings::new(py, names.topics.names());
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
                    None => key(names.keys[j as usize]),
                    Some(g) => key(names.gone_keys[g]),
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
                self.outputs_dict(py, &mut consumers)?.into_any(),
                rows.into_any(),
                columns.into_any(),
                cells.into_any(),
                self.zones(py, &mut consumers)?,
            ],
        )
    }

    /// A zone-aware answer's racks: (the JSON of consumer → rack for those whose rack is known, stored with
    /// the version; the cross-zone rate), None for a request that is not zone-aware.
    fn racks<'py>(&self, py: Python<'py>) -> PyResult<Option<(Bound<'py, PyBytes>, f64)>> {
        let (o, zones) = (&self.solved.outcome, &self.solved.problem.zones);
        let (Some(report), Some(zones)) = (&o.zones, zones) else {
            return Ok(None);
        };
        let json = answer::racks(o, report, zones, &self.solved.names);
        Ok(Some((PyBytes::new(py, &json), report.total)))
    }
}

impl Solution {
    /// The zone report as app.core.assign.ZoneReport takes it: (consumer → rack or None, consumer →
    /// cross-zone rate), consumers in id order; None for a request that is not zone-aware.
    fn zones<'py>(
        &self,
        py: Python<'py>,
        consumers: &mut Strings<'py, '_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (o, zones) = (&self.solved.outcome, &self.solved.problem.zones);
        let (Some(report), Some(zones)) = (&o.zones, zones) else {
            return Ok(py.None().into_bound(py));
        };
        let mut slot = vec![0usize; self.solved.problem.consumers.len()];
        for (i, (c, _)) in o.assignment.iter().enumerate() {
            slot[*c as usize] = i;
        }
        let racks = PyDict::new(py);
        let cross = PyDict::new(py);
        for &c in &o.sorted {
            let (id, i) = (consumers.get(c), slot[c as usize]);
            let rack = report.racks[i];
            racks.set_item(
                &id,
                (rack >= 0).then(|| zones.names[rack as usize].as_str()),
            )?;
            cross.set_item(&id, report.cross[i])?;
        }
        Ok(PyTuple::new(py, [racks.into_any(), cross.into_any()])?.into_any())
    }

    fn outputs_dict<'py>(
        &self,
        py: Python<'py>,
        consumers: &mut Strings<'py, '_>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        match &self.solved.outcome.outputs {
            Outputs::None => {}
            Outputs::Budget {
                rscore,
                moves,
                refused,
                overloaded,
            } => {
                let given = self.params.bind(py);
                let budget = PyDict::new(py);
                budget.set_item("max_rscore", given.get_item("max_rscore")?)?;
                budget.set_item("max_moves", given.get_item("max_moves")?)?;
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
}

/// An assignment request's JSON → (its other fields' JSON, for msgspec; its partitions, previous assignment
/// and members on arrays), or None where the reference must decode it (see request.rs).
#[pyfunction]
pub fn parse_assign<'py>(
    py: Python<'py>,
    body: &[u8],
) -> PyResult<Option<(Bound<'py, PyBytes>, Bulk)>> {
    Ok(detached(py, || request::parse(body))?
        .map(|(rest, input)| (PyBytes::new(py, &rest), Bulk { input: Some(input) })))
}

/// A (topic, partition) tuple, its topic numbered in `topics`.
fn key(key: &Bound<'_, PyAny>, topics: &mut Interner) -> PyResult<(u32, i64)> {
    let tuple = key.downcast::<PyTuple>()?;
    let topic = tuple.get_borrowed_item(0)?;
    let partition: i64 = tuple.get_borrowed_item(1)?.extract()?;
    Ok((
        topics.id(topic.downcast::<PyString>()?.to_str()?),
        partition,
    ))
}

/// The reference Problem's partitions (validated by it), previous assignment and members on arrays; None
/// where this core cannot order the consumer ids exactly as the reference does (non-ASCII ids). `lags`:
/// None when the algorithm does not read them.
#[pyfunction]
#[pyo3(signature = (keys, rates, lags, previous, members, member_capacities, racks=None, consumer_racks=None))]
#[allow(clippy::too_many_arguments)]
pub fn from_objects(
    keys: &Bound<'_, PyList>,
    rates: Vec<f64>,
    lags: Option<Vec<Option<f64>>>,
    previous: &Bound<'_, PyDict>,
    members: Option<&Bound<'_, PyList>>,
    member_capacities: &Bound<'_, PyDict>,
    racks: Option<Vec<Vec<String>>>,
    consumer_racks: Option<HashMap<String, String>>,
) -> PyResult<Option<Bulk>> {
    let mut topics = Interner::default();
    let keys = keys
        .iter()
        .map(|k| key(&k, &mut topics))
        .collect::<PyResult<Vec<_>>>()?;
    let lags = lags.unwrap_or_else(|| vec![None; keys.len()]);
    let Some(mut input) = Input::new(topics, keys, rates, lags) else {
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
    if let Some(racks) = &racks {
        if input
            .set_partition_racks(|j| racks.get(j).map(Vec::as_slice))
            .is_none()
        {
            return Ok(None);
        }
    }
    let consumer_racks = consumer_racks.unwrap_or_default();
    let mut consumer_racks: Vec<(&String, &String)> = consumer_racks.iter().collect();
    consumer_racks.sort_unstable();
    if input
        .set_consumer_racks(
            consumer_racks
                .into_iter()
                .map(|(c, r)| (c.as_str(), r.as_str())),
        )
        .is_none()
    {
        return Ok(None);
    }
    Ok(Some(Bulk { input: Some(input) }))
}

fn previous_from_objects(input: &mut Input, previous: &Bound<'_, PyDict>) -> PyResult<bool> {
    let mut names = Vec::with_capacity(previous.len());
    let mut counts = Vec::with_capacity(previous.len());
    let mut keys = vec![];
    for (consumer, held) in previous.iter() {
        let held = held.downcast_into::<PyList>()?;
        for k in held.iter() {
            keys.push(key(&k, &mut input.topics)?);
        }
        names.push(consumer.downcast_into::<PyString>()?);
        counts.push(held.len());
    }
    let consumers = names
        .iter()
        .zip(counts)
        .map(|(name, count)| Ok((name.to_str()?, count)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(input.set_previous(consumers, &keys).is_some())
}

/// A stream of measurements on arrays (replay.rs), replayed through any compiled algorithm as often as asked.
#[pyclass(module = "groupfit_native", frozen)]
pub struct Stream {
    stream: replay::Stream,
}

/// A measurement's partition number as the reference reads it (`str.isdigit`, then `int`): ASCII digits that
/// fit 64 bits; None for anything else, which the reference then reads or refuses.
fn partition_number(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A rate as the reference takes it (`float(rate)`): a float, or an int of 64 bits.
fn rate(value: &Bound<'_, PyAny>) -> Option<f64> {
    if let Ok(f) = value.downcast_exact::<PyFloat>() {
        return Some(f.value());
    }
    let n: i64 = value.downcast_exact::<PyInt>().ok()?.extract().ok()?;
    Some(n as f64)
}

#[pymethods]
impl Stream {
    /// The measurements (each topic → {partition: rate}, partitions written as integers) on arrays; None where
    /// the reference must replay them: one it would refuse (and word the error for), or that this core reads
    /// otherwise (a partition beyond 64 bits, digits of another script).
    #[staticmethod]
    fn of_measurements(measurements: &Bound<'_, PyList>) -> PyResult<Option<Stream>> {
        let mut topics = Interner::default();
        let (mut keys, mut rates, mut counts) = (vec![], vec![], vec![]);
        for measurement in measurements.iter() {
            let start = keys.len();
            for (topic, partitions) in measurement.downcast_into::<PyDict>()?.iter() {
                let topic = topic.downcast_into::<PyString>()?;
                let topic = topic.to_str()?;
                if topic.is_empty() {
                    return Ok(None);
                }
                let t = topics.id(topic);
                for (partition, value) in partitions.downcast_into::<PyDict>()?.iter() {
                    let number = partition_number(partition.downcast_into::<PyString>()?.to_str()?);
                    let (Some(number), Some(value)) = (number, rate(&value)) else {
                        return Ok(None);
                    };
                    keys.push((t, number));
                    rates.push(value);
                }
            }
            counts.push(keys.len() - start);
        }
        Ok(replay::Stream::new(topics, &keys, &rates, &counts).map(|stream| Stream { stream }))
    }

    /// The measurements as arrays: measurement k lists `counts[k]` partitions — (topics[topic[i]],
    /// partition[i]) at rate[i] — after those of the measurements before it; None as `of_measurements`.
    #[staticmethod]
    fn of_arrays(
        py: Python<'_>,
        topics: Vec<String>,
        topic: PyBuffer<u32>,
        partition: PyBuffer<i64>,
        rate: PyBuffer<f64>,
        counts: PyBuffer<u64>,
    ) -> PyResult<Option<Stream>> {
        let mut names = Interner::default();
        for name in &topics {
            if name.is_empty() || names.id(name) as usize != names.len() - 1 {
                return Ok(None); // empty or named twice
            }
        }
        let topic = topic.to_vec(py)?;
        if topic.iter().any(|&t| t as usize >= topics.len()) {
            return Err(PyValueError::new_err("a topic index beyond the topics"));
        }
        let keys: Vec<(u32, i64)> = topic.into_iter().zip(partition.to_vec(py)?).collect();
        let counts: Vec<usize> = counts.to_vec(py)?.into_iter().map(|n| n as usize).collect();
        Ok(
            replay::Stream::new(names, &keys, &rate.to_vec(py)?, &counts)
                .map(|stream| Stream { stream }),
        )
    }

    /// The number of measurements.
    fn __len__(&self) -> usize {
        self.stream.measurements.len()
    }

    /// Per measurement, the totals the reference checks before it solves (`Bulk.totals`).
    fn totals(&self, rebalance_s: f64, plan: bool) -> Vec<(f64, f64, f64)> {
        self.stream
            .measurements
            .iter()
            .map(|m| m.totals(rebalance_s, plan))
            .collect()
    }

    /// The stream replayed through `algorithm` (C = `capacity`, `params` as `Bulk.solve` takes them), each
    /// measurement from the algorithm's previous assignment, without the GIL; `owners`: keep each partition's
    /// consumer and previous consumer too.
    fn replay(
        &self,
        py: Python<'_>,
        algorithm: &str,
        capacity: f64,
        params: &Bound<'_, PyDict>,
        owners: bool,
    ) -> PyResult<Replayed> {
        let algorithm = Algorithm::named(algorithm).ok_or_else(|| {
            PyValueError::new_err(format!("the compiled core does not run {algorithm}"))
        })?;
        let read = read_params(algorithm, params)?;
        let stream = &self.stream;
        let replayed = detached(py, || {
            replay::replay(stream, algorithm, capacity, &read, owners)
        })?
        .map_err(PyRuntimeError::new_err)?;
        let rates = if owners {
            stream
                .measurements
                .iter()
                .flat_map(|m| &m.rates)
                .copied()
                .collect()
        } else {
            vec![]
        };
        let counts = stream
            .measurements
            .iter()
            .map(|m| m.keys.len() as u64)
            .collect();
        Ok(Replayed {
            replayed,
            rates,
            counts,
        })
    }
}

/// A replay's figures per measurement and, when kept, its owners.
#[pyclass(module = "groupfit_native", frozen)]
pub struct Replayed {
    replayed: replay::Replayed,
    rates: Vec<f64>,
    counts: Vec<u64>,
}

/// Numbers as the bytes of a native-endian array (numpy reads them without a copy).
fn array_bytes<'py, T: Copy>(py: Python<'py>, values: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: T is a plain number type (u32, u64, f64): every byte of it is initialised.
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    PyBytes::new(py, bytes)
}

#[pymethods]
impl Replayed {
    /// Consumers holding a partition, per measurement.
    #[getter]
    fn consumers(&self) -> Vec<usize> {
        self.replayed.consumers.clone()
    }

    /// Rscore (Eq. 11), per measurement.
    #[getter]
    fn rscore(&self) -> Vec<f64> {
        self.replayed.rscore.clone()
    }

    /// Whether no consumer is above C but one holding a single partition, per measurement.
    #[getter]
    fn within_capacity(&self) -> Vec<bool> {
        self.replayed.within.clone()
    }

    /// Partitions that changed consumer, per measurement.
    #[getter]
    fn moves(&self) -> Vec<usize> {
        self.replayed.moves.clone()
    }

    /// (counts: u64 per measurement, rates: f64, owner: u32, previous: u32 (u32::MAX for a new partition), the
    /// consumer ids the owners number): the owners kept, each partition of each measurement in its listing
    /// order, as the bytes of native arrays.
    fn owners<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let r = &self.replayed;
        PyTuple::new(
            py,
            [
                array_bytes(py, &self.counts).into_any(),
                array_bytes(py, &self.rates).into_any(),
                array_bytes(py, &r.owner).into_any(),
                array_bytes(py, &r.previous).into_any(),
                PyList::new(py, r.names.names())?.into_any(),
            ],
        )
    }
}

/// Whether a problem's partitions and previous assignment are certainly valid (validate.rs), their values of
/// the exact types the reference's check assumes: rates floats, lags None or floats, keys (str, int) tuples,
/// previous consumers strings holding lists. False says only "let the reference check find what is wrong".
#[pyfunction]
pub fn valid(
    keys: &Bound<'_, PyList>,
    rates: &Bound<'_, PyList>,
    lags: &Bound<'_, PyList>,
    previous: &Bound<'_, PyDict>,
) -> bool {
    read_valid(keys, rates, lags, previous).unwrap_or(false)
}

fn read_valid(
    keys: &Bound<'_, PyList>,
    rates: &Bound<'_, PyList>,
    lags: &Bound<'_, PyList>,
    previous: &Bound<'_, PyDict>,
) -> Option<bool> {
    let float = |value: Bound<'_, PyAny>| Some(value.downcast_exact::<PyFloat>().ok()?.value());
    let pair = |value: &Bound<'_, PyAny>| {
        value
            .downcast_exact::<PyTuple>()
            .is_ok_and(|t| t.len() == 2)
    };
    let rates = rates.iter().map(float).collect::<Option<Vec<_>>>()?;
    let lags = lags
        .iter()
        .map(|l| {
            if l.is_none() {
                Some(None)
            } else {
                float(l).map(Some)
            }
        })
        .collect::<Option<Vec<_>>>()?;
    let mut topics = Interner::default();
    let mut read = |k: Bound<'_, PyAny>| pair(&k).then(|| key(&k, &mut topics).ok())?;
    let keys = keys.iter().map(&mut read).collect::<Option<Vec<_>>>()?;
    let mut names = vec![];
    let mut held = vec![];
    for (consumer, list) in previous.iter() {
        names.push(consumer.downcast_into_exact::<PyString>().ok()?);
        for k in list.downcast_exact::<PyList>().ok()?.iter() {
            held.push(read(k)?);
        }
    }
    let consumers = names
        .iter()
        .map(|name| name.to_str().ok())
        .collect::<Option<Vec<_>>>()?;
    Some(
        validate::partitions(&keys, topics.len(), &rates, &lags)
            && validate::previous(&consumers, &held, topics.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::unwound;

    #[test]
    fn a_panic_comes_back_as_its_message() {
        assert_eq!(unwound(|| 7), Ok(7));
        let index = 5;
        assert_eq!(
            unwound(|| [1, 2][index]),
            Err("index out of bounds: the len is 2 but the index is 5".to_string())
        );
    }
}
