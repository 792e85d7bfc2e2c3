"""Consume a topic with the groupfit assignor: the group leader asks groupfit for the assignment.

    python clients/python/examples/consume.py --bootstrap 127.0.0.1:9092 --topic events --group demo \
        --service http://127.0.0.1:8000 --identity consumer-1 --capacity 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from aiokafka import AIOKafkaConsumer
from groupfit_client.assignor import groupfit_assignor


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--service", default="http://127.0.0.1:8000")
    parser.add_argument("--identity", required=True, help="stable id of this member (survives restarts)")
    parser.add_argument("--capacity", type=float, required=True, help="bytes/s one consumer may be given")
    parser.add_argument("--algorithm", default="mwf")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    assignor = groupfit_assignor(args.service, args.group, args.identity, args.capacity, args.algorithm)
    consumer = AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        partition_assignment_strategy=(assignor,),
        session_timeout_ms=10_000,
    )
    await consumer.start()
    try:
        async for record in consumer:
            print(f"{record.topic}/{record.partition}@{record.offset}: {len(record.value or b'')} bytes")
    finally:
        await consumer.stop()


if __name__ == "__main__":
    asyncio.run(main())
