"""Controller mode (Landau et al. §V): groupfit decides how many consumers a group has and which partitions
each reads, and the controller moves partitions so that no two consumers ever read one partition at once.

- `protocol`: the control topic's messages. `ControlledConsumer` (`consumer`) wraps a confluent-kafka
  Consumer with manual, incremental assignment; between batches it applies commands from the control topic
  and acknowledges them: `stop` (commit, then unassign), `start` (assign from the committed offset), `sync`
  (report what it reads; sent to one consumer or to all, "*"), `quit` (exit, once it reads nothing).
- `Controller` (`loop`) runs sentinel → reassign → group management (§V-C): it reads the group's rates, asks
  POST /v1/assign when a consumer is over capacity, a partition is unowned or the period has passed, and
  applies the answer: for each moved partition, stop on the old consumer, wait for its acknowledgement, then
  start on the new one. Consumers the answer needs are created, empty ones deleted, through a
  `ConsumerProcesses` implementation (`processes`: `LocalProcesses` here; Kubernetes at deploy time).
- After a restart the controller first rebuilds the group's real state by asking every consumer (the
  Synchronize state) before it acts. Consumers an earlier controller started answer too and are kept: their
  partitions move with the same protocol, and once empty they are told to quit.
- `python -m groupfit_client.controller controller|consumer …` runs either side (`__main__`).
"""

from groupfit_client.controller.consumer import ControlledConsumer
from groupfit_client.controller.loop import Controller
from groupfit_client.controller.processes import ConsumerProcesses, LocalProcesses

__all__ = ["ConsumerProcesses", "ControlledConsumer", "Controller", "LocalProcesses"]
