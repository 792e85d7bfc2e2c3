"""A consumer process the autoscaler test starts (`--consumer-command`): an aiokafka consumer with the groupfit
assignor (its identity is `--id`) that spends `--ms-per-event` on each event (so μ = 1000 / ms events/s, without
burning a core: it sleeps), commits after each batch, and leaves its group on SIGTERM. It appends "<id> <pid> up"
and "<id> <pid> left" to `--log`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from groupfit_client.assignor import enforce_if_due, groupfit_assignor


async def consume(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    assignor = groupfit_assignor(
        args.service,
        args.group,
        args.id,
        capacity=args.capacity,
        algorithm=args.algorithm,
        params=json.loads(args.params),
    )
    consumer = AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.id,
        partition_assignment_strategy=(assignor,),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    with open(args.log, "a") as log:
        log.write(f"{args.id} {os.getpid()} up\n")
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=20)
            events = sum(len(records) for records in batches.values())
            if events:
                await asyncio.sleep(events * args.ms_per_event / 1000)  # the work: μ events/s
                # a rebalance may have taken the partitions meanwhile: their next owner reads those events again
                with contextlib.suppress(KafkaError):
                    await consumer.commit()
            enforce_if_due(consumer)
    finally:
        await consumer.stop()  # commits nothing more; leaves the group at once
        with open(args.log, "a") as log:
            log.write(f"{args.id} {os.getpid()} left\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--id", "--bootstrap", "--topic", "--group", "--service", "--log"):
        parser.add_argument(name, required=True)
    parser.add_argument("--capacity", type=float, required=True)
    parser.add_argument("--algorithm", default="least-loaded")
    parser.add_argument("--params", default="{}")
    parser.add_argument("--ms-per-event", type=float, default=20.0)
    asyncio.run(consume(parser.parse_args()))


if __name__ == "__main__":
    main()
