"""The `groupfit` command. Each subcommand lives beside the part it runs and is imported only when
used, so `groupfit assign` does not load Spark or the web stack."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from app.core.errors import AssignmentError, ErrorCode, GroupfitError

# name → (module with `add_arguments(parser)` and `run(args) -> int`, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "assign": ("app.cli", "compute one assignment from a JSON request and print the answer"),
    "algorithms": ("app.cli", "list the registered algorithms and their parameters"),
    "serve": ("app.main", "serve the HTTP API (embedded Redis unless REDIS_URL is set)"),
    "openapi": ("app.main", "write the API contract to openapi/openapi.json"),
    "generate-stream": ("app.sim.commands", "generate a rate stream (Landau et al. Eq. 15)"),
    "evaluate": ("app.sim.commands", "replay a stream through algorithms: consumers, Rscore, CBS, latency"),
    "report": ("app.sim.commands", "the paper's experiments as an HTML report with plots"),
    "demo": ("app.local.demo", "the whole stack on loopback without Docker, with a live view"),
    "autoscale": (
        "groupfit_client.autoscaler",
        "scale a consumer group's processes on its rates and lags (from the broker's offsets)",
    ),
    "rates-job": ("app.pipeline.commands", "the Spark job that measures partition rates and lags for the service"),
    "experiment": (
        "app.experiment.commands",
        "seed 001's autoscaling experiment on a live Apache Kafka group: runs, report, summary table",
    ),
    "spark-kafka-jars": (
        "app.pipeline.commands",
        "Spark's Kafka connector for the installed PySpark (resolved once with Maven), for spark-submit --jars",
    ),
    "placement": (
        "app.cluster.commands",
        'place partition replicas on brokers by disk and network capacity ("Constraint Based Kafka Partition '
        'Balancing"), from a file or a live cluster',
    ),
}


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "assign":
        parser.add_argument("--input", "-i", required=True, help="request JSON file, or - for standard input")
        parser.add_argument("--dense", action="store_true", help="add the dense delta matrix")
        parser.add_argument("--indent", type=int, default=0, help="JSON indent (default 0: one line)")
    if command == "algorithms":
        parser.add_argument(
            "--json", action="store_true", help="the registry with each parameter JSON schema and each trait"
        )


def run(args: argparse.Namespace) -> int:
    if args.command == "algorithms":
        return _algorithms(args.json)
    import msgspec

    from app.codec.assign_input import Limits, answer
    from app.settings import get_settings

    body = sys.stdin.buffer.read() if args.input == "-" else _read(args.input)
    text = answer(body, Limits.of(get_settings()), "dense" if args.dense else "sparse")
    sys.stdout.buffer.write(msgspec.json.format(text, indent=args.indent) if args.indent else text)
    sys.stdout.buffer.write(b"\n")
    return 0


def _algorithms(as_json: bool) -> int:
    import msgspec

    from app.codec.groups import algorithm_list
    from app.core import native
    from app.settings import get_settings

    listing = algorithm_list(native.choose(get_settings().core)).algorithms
    if as_json:
        print(msgspec.json.format(msgspec.json.encode(listing), indent=2).decode())
        return 0
    width = max(len(a.name) for a in listing)
    for a in listing:
        params = ", ".join(a.params.get("properties", {})) or "-"
        print(f"{a.name:<{width}}  {a.description}\n{'':<{width}}  params: {params}")
    return 0


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, f"cannot read {path}: {exc.strerror}.") from None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line, only the module of the command it names is imported (the others
    are listed by their help line), so `groupfit assign` starts without the web stack's and Spark's imports."""
    parser = argparse.ArgumentParser(prog="groupfit", description="Partition assignment for consumer groups.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = next((arg for arg in argv if not arg.startswith("-")), None) if argv is not None else None
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if argv is None or name == named:
            importlib.import_module(module).add_arguments(command, name)
        command.set_defaults(module=module)
    return parser


def tune_gc() -> None:
    """An assignment of 10^5 partitions allocates ~10^6 short-lived containers and creates no
    cycles; with the default thresholds the cyclic collector rescans the whole heap many times
    per request (measured: a third of the time). Collect far less often instead."""
    gc.set_threshold(100_000, 50, 100)


def main(argv: list[str] | None = None) -> int:
    tune_gc()
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        return importlib.import_module(args.module).run(args)
    except GroupfitError as exc:
        from app.codec.wire import error_body

        sys.stderr.buffer.write(error_body(exc) + b"\n")
        return 2
    except BrokenPipeError:  # `groupfit … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file or directory the command cannot use
        print(f"groupfit {args.command}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
