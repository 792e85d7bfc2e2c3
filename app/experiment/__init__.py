"""`groupfit experiment`: seed 001's autoscaling experiment on a live Apache Kafka group (docs/experiment.md).

- `workload`: the workloads (the seed's first workload's stand-in, its skewed variant, Landau's stream), checked;
- `producer`: replays a workload onto a topic, each event carrying its production time;
- `run`: one run (topic, group sized by a strategy, producer, drain, stop) and its result;
- `controller`: Landau's controller mode as a run's group;
- `measure`: every event's latency, completeness, rebalances and pauses, replicas, from the processes' files;
- `optimal`: the seed's optimal autoscaler and overprovisioning count, computed;
- `model`: Landau's §VI-C latency model fed with a run;
- `suite`, `report`, `stack`, `commands`: the runs of the whole experiment, the HTML report, the servers, the CLI.
"""
