//! The compiled algorithms, in one table: each name with its family and traits. The module's `ALGORITHMS`
//! and `ALGORITHM_TABLE` are this table, and `run` dispatches on it: nothing is read back out of a name.

use crate::answer::Names;
use crate::bins::Rule;
use crate::fit::{self, Budget, ConsumerOrder};
use crate::input::{Input, Labels};
use crate::least_loaded;
use crate::problem::{self, Outcome, Problem};

#[derive(Clone, Copy)]
pub enum Family {
    /// Any Fit (Landau et al. §II-B, §VI-A): partitions in request order, or largest first (`decreasing`).
    AnyFit { rule: Rule, decreasing: bool },
    /// Modified Any Fit (Algorithm 1, Table II), with the migration budget.
    ModifiedAnyFit { rule: Rule, order: ConsumerOrder },
    /// The lag-aware Least-Loaded autoscaler (Ezzeddine et al.).
    LeastLoaded,
}

pub struct Algorithm {
    pub name: &'static str,
    pub family: Family,
}

const fn any_fit(name: &'static str, rule: Rule, decreasing: bool) -> Algorithm {
    Algorithm {
        name,
        family: Family::AnyFit { rule, decreasing },
    }
}

const fn modified(name: &'static str, rule: Rule, order: ConsumerOrder) -> Algorithm {
    Algorithm {
        name,
        family: Family::ModifiedAnyFit { rule, order },
    }
}

/// Every algorithm this core runs (any other runs in the reference).
pub const TABLE: [Algorithm; 13] = [
    any_fit("nf", Rule::Next, false),
    any_fit("ff", Rule::First, false),
    any_fit("bf", Rule::Best, false),
    any_fit("wf", Rule::Worst, false),
    any_fit("nfd", Rule::Next, true),
    any_fit("ffd", Rule::First, true),
    any_fit("bfd", Rule::Best, true),
    any_fit("wfd", Rule::Worst, true),
    modified("mwf", Rule::Worst, ConsumerOrder::Cumulative),
    modified("mbf", Rule::Best, ConsumerOrder::Cumulative),
    modified("mwfp", Rule::Worst, ConsumerOrder::Max),
    modified("mbfp", Rule::Best, ConsumerOrder::Max),
    Algorithm {
        name: "least-loaded",
        family: Family::LeastLoaded,
    },
];

impl Algorithm {
    pub fn named(name: &str) -> Option<&'static Algorithm> {
        TABLE.iter().find(|a| a.name == name)
    }

    /// The family's name, as the table exported to Python says it.
    pub fn kind(&self) -> &'static str {
        match self.family {
            Family::AnyFit { .. } => "any-fit",
            Family::ModifiedAnyFit { .. } => "modified-any-fit",
            Family::LeastLoaded => "least-loaded",
        }
    }

    /// Its fit rule, for the bin-packing families.
    pub fn rule(&self) -> Option<Rule> {
        match self.family {
            Family::AnyFit { rule, .. } | Family::ModifiedAnyFit { rule, .. } => Some(rule),
            Family::LeastLoaded => None,
        }
    }

    /// Any Fit's order of the partitions: largest first, or as listed.
    pub fn decreasing(&self) -> Option<bool> {
        match self.family {
            Family::AnyFit { decreasing, .. } => Some(decreasing),
            _ => None,
        }
    }

    /// Modified Any Fit's order of the previous consumers.
    pub fn consumer_order(&self) -> Option<&'static str> {
        match self.family {
            Family::ModifiedAnyFit { order, .. } => Some(match order {
                ConsumerOrder::Cumulative => "cumulative",
                ConsumerOrder::Max => "max",
            }),
            _ => None,
        }
    }

    /// Whether it honours a migration budget (`max_rscore`, `max_moves`).
    pub fn budget(&self) -> bool {
        matches!(self.family, Family::ModifiedAnyFit { .. })
    }

    /// The parameters it reads: the caller gives every one (None for an optional one left out), as the
    /// reference's parameter model dumps them; this core holds no defaults.
    pub fn params(&self) -> &'static [&'static str] {
        match self.family {
            Family::AnyFit { .. } => &[],
            Family::ModifiedAnyFit { .. } => &["max_rscore", "max_moves"],
            Family::LeastLoaded => &[
                "mu",
                "w_sla",
                "f_up",
                "f_down",
                "rebalance_s",
                "plan_rebalance_lag",
            ],
        }
    }
}

/// An algorithm's parameters, read (bindings.rs) by its family.
pub enum Params {
    None,
    Budget(Budget),
    LeastLoaded(least_loaded::Params),
}

/// A request solved: the problem (with the consumers the algorithm minted), its outcome, and the names
/// to write them with.
pub struct Solved {
    pub problem: Problem,
    pub outcome: Outcome,
    pub names: Names,
}

/// Run `algorithm` on the request with capacity C and its parameters.
pub fn run(
    input: Input,
    algorithm: &Algorithm,
    capacity: f64,
    params: &Params,
) -> Result<Solved, String> {
    let (problem, labels, outcome) = solve(input, algorithm, capacity, params)?;
    let names = Names::new(labels, problem.consumers.ids.names());
    Ok(Solved {
        problem,
        outcome,
        names,
    })
}

/// The problem (with the consumers the algorithm minted), the partitions' labels and the outcome.
pub fn solve(
    input: Input,
    algorithm: &Algorithm,
    capacity: f64,
    params: &Params,
) -> Result<(Problem, Labels, Outcome), String> {
    let (mut p, labels) = input.into_problem(capacity);
    let placement = match (algorithm.family, params) {
        (Family::AnyFit { rule, decreasing }, Params::None) => {
            fit::any_fit(&mut p, rule, decreasing)
        }
        (Family::ModifiedAnyFit { rule, order }, Params::Budget(budget)) => {
            fit::modified_any_fit(&mut p, rule, order, budget)
        }
        (Family::LeastLoaded, Params::LeastLoaded(params)) => least_loaded::place(&mut p, params),
        _ => return Err(format!("{}: parameters of another family", algorithm.name)),
    };
    let outcome = problem::outcome(&p, placement)?;
    Ok((p, labels, outcome))
}
