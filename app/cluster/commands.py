"""`groupfit placement`: a replica placement plan from a JSON request (`--input`) or from a live cluster
(`--bootstrap-servers`), printed as the answer of POST /v1/placements; with `--execute` it is applied to the
cluster and waited for."""

from __future__ import annotations

import argparse
import sys

from app.core.placement.solver import solvers

DEFAULT_NETWORK = 125_000_000.0  # bytes/s: a 1 Gbit/s link


def byte_count(text: str) -> int:
    """A whole number of bytes on the command line, written 4000000000000 or 4e12."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", "-i", help="request JSON file (as POST /v1/placements takes), or - for stdin")
    source.add_argument("--bootstrap-servers", help="plan the live cluster at these brokers (host:port,…)")
    parser.add_argument("--indent", type=int, default=0, help="JSON indent (default 0: one line)")
    parser.add_argument("--reassignment-out", help="also write the plan as kafka-reassign-partitions JSON here")
    # only with --bootstrap-servers (a request file carries its own solver and options); None: not given
    live = parser.add_argument_group("with --bootstrap-servers")
    live.add_argument("--topics", help="comma-separated topics (default: every topic but the internal ones)")
    live.add_argument(
        "--solver",
        choices=sorted(solvers()),
        help="; ".join(f"{s.name}: {s.description}" for s in solvers().values()) + " (default: heuristic)",
    )
    live.add_argument("--objective", choices=["moves", "balance", "brokers"], help="default: moves")
    live.add_argument("--time-limit-ms", type=int, help="the exact solver's budget (default 1000)")
    live.add_argument("--max-bytes-moved", type=byte_count, help="most bytes the plan may copy")
    live.add_argument("--max-utilization", type=float, help="share of each capacity to use, (0, 1] (default 1)")
    live.add_argument("--disk-capacity", type=byte_count, help="bytes per broker (default: its log directories' total)")
    live.add_argument("--network-capacity", type=float, help="bytes/s per broker (default: 1.25e8, 1 Gbit/s)")
    live.add_argument("--execute", action="store_true", default=None, help="apply the plan and wait until done")
    live.add_argument("--throttle", type=float, help="replication throttle in bytes/s while the plan runs")
    live.add_argument("--timeout-s", type=float, help="how long --execute waits (default 600)")


LIVE_ONLY = (
    "topics",
    "solver",
    "objective",
    "time_limit_ms",
    "max_bytes_moved",
    "max_utilization",
    "disk_capacity",
    "network_capacity",
    "execute",
    "throttle",
    "timeout_s",
)


def run(args: argparse.Namespace) -> int:
    import msgspec

    from app.codec.placement import PlacementOptions, PlacementRequest
    from app.codec.wire import convert, decode, encode
    from app.service.placement import PlacementLimits, plan
    from app.settings import get_settings

    limits = PlacementLimits.of(get_settings())
    if args.input is not None:
        from app.cli import _read

        live_only = [f"--{name.replace('_', '-')}" for name in LIVE_ONLY if getattr(args, name) is not None]
        if live_only:
            print(
                f"groupfit placement: {', '.join(live_only)} go with --bootstrap-servers; a request file carries its "
                "own solver and options.",
                file=sys.stderr,
            )
            return 2

        body = sys.stdin.buffer.read() if args.input == "-" else _read(args.input)
        answer = plan(decode(msgspec.json.Decoder(PlacementRequest), body), limits)
    else:
        from app.cluster.kafka import ClusterError, execute, read_cluster

        given = {
            "objective": args.objective,
            "time_limit_ms": args.time_limit_ms,
            "max_bytes_moved": args.max_bytes_moved,
            "max_utilization": args.max_utilization,
        }
        options = convert({k: v for k, v in given.items() if v is not None}, PlacementOptions)
        topics = [t for t in (args.topics or "").split(",") if t]
        try:
            snapshot = read_cluster(
                args.bootstrap_servers,
                topics,
                args.disk_capacity,
                args.network_capacity or DEFAULT_NETWORK,
                args.solver or "heuristic",
                options,
            )
        except ClusterError as exc:
            print(f"groupfit placement: {exc}", file=sys.stderr)
            return 1
        for note in snapshot.notes:
            print(f"groupfit placement: {note}", file=sys.stderr)
        answer = plan(snapshot.request, limits)
    text = encode(answer)
    sys.stdout.buffer.write(msgspec.json.format(text, indent=args.indent) if args.indent else text)
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()
    if args.reassignment_out:
        with open(args.reassignment_out, "wb") as out:
            out.write(encode(answer.reassignment) + b"\n")
    if args.input is None and args.execute:
        current = {(p.topic, p.partition): p.replicas for p in snapshot.request.partitions}
        try:
            execute(
                args.bootstrap_servers,
                answer.reassignment.partitions,
                current,
                args.throttle,
                args.timeout_s or 600.0,
                report=lambda line: print(f"groupfit placement: {line}", file=sys.stderr),
            )
        except ClusterError as exc:
            print(f"groupfit placement: {exc}", file=sys.stderr)
            return 1
    return 0
