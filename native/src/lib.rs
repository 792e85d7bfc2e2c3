//! groupfit's compiled core. A request's partitions, previous assignment and members become arrays once
//! (a `Bulk`: read from the request's JSON, or from the reference's Problem); `Bulk.solve` runs one of the
//! algorithms of the table on them without the GIL, and the `Solution` writes the answer's JSON itself or
//! hands the outcome's parts to Python. `app/core` is the reference it must equal. docs/compiled-core.md maps
//! the modules.

mod algorithms;
mod answer;
mod bindings;
mod bins;
mod consumers;
mod fit;
mod hash;
mod input;
mod intern;
mod json;
mod least_loaded;
mod natural;
mod problem;
mod replay;
mod request;
mod search;
mod validate;
mod zones;

use pyo3::prelude::*;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn groupfit_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<bindings::Bulk>()?;
    m.add_class::<bindings::Solution>()?;
    m.add_class::<bindings::Stream>()?;
    m.add_class::<bindings::Replayed>()?;
    m.add_function(wrap_pyfunction!(bindings::parse_assign, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::from_objects, m)?)?;
    m.add_function(wrap_pyfunction!(bindings::valid, m)?)?;
    m.add("ALGORITHMS", bindings::algorithm_names())?;
    m.add("ALGORITHM_TABLE", bindings::algorithm_table(m.py())?)?;
    Ok(())
}
