"""`groupfit rates-job`: every option also from an environment variable GROUPFIT_RATES_<OPTION>;
`groupfit spark-kafka-jars`: Spark's Kafka connector for the installed PySpark, for spark-submit's --jars."""

from __future__ import annotations

import argparse
import logging
import os

OPTIONS = [
    # flag, env suffix, default, help
    ("--bootstrap-servers", "BOOTSTRAP_SERVERS", "127.0.0.1:9092", "Kafka bootstrap servers"),
    ("--topics", "TOPICS", None, "comma-separated topics to measure"),
    ("--consumer-group", "CONSUMER_GROUP", None, "consumer group whose lag to measure"),
    ("--service-url", "SERVICE_URL", "http://127.0.0.1:8000", "groupfit service"),
    ("--service-group", "SERVICE_GROUP", None, "group name in the service (default: the consumer group)"),
    ("--window-s", "WINDOW_S", "30", "sliding window length, seconds"),
    ("--slide-s", "SLIDE_S", "5", "window slide, seconds"),
    ("--trigger-s", "TRIGGER_S", "5", "micro-batch interval, seconds"),
    ("--checkpoint-dir", "CHECKPOINT_DIR", "checkpoints/rates", "where the query keeps its offsets"),
    ("--master", "MASTER", "local[*]", "Spark master (ignored under spark-submit, which sets it)"),
    (
        "--source",
        "SOURCE",
        "kafka",
        "kafka (Spark's Kafka connector), python (groupfit's Python Data Source) or logdirs (log-size deltas "
        "from DescribeLogDirs, no records read)",
    ),
    ("--starting-offsets", "STARTING_OFFSETS", "latest", "earliest or latest, for a new checkpoint"),
]


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    if command == "spark-kafka-jars":
        return
    for flag, env, default, help_text in OPTIONS:
        parser.add_argument(
            flag,
            default=os.environ.get(f"GROUPFIT_RATES_{env}", default),
            help=f"{help_text} (env GROUPFIT_RATES_{env}; default {default})",
        )


def run(args: argparse.Namespace) -> int:
    if args.command == "spark-kafka-jars":
        from app.pipeline.job import connector_jars

        print(",".join(connector_jars()))
        return 0
    from app.pipeline.job import SOURCES, JobOptions, log_progress, spark_session, start

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not args.topics:
        raise SystemExit("groupfit rates-job: --topics (or GROUPFIT_RATES_TOPICS) is required")
    if args.source not in SOURCES:
        raise SystemExit(f"groupfit rates-job: --source {args.source!r} is not one of {', '.join(SOURCES)}")
    service_group = args.service_group or args.consumer_group
    if not service_group:
        raise SystemExit("groupfit rates-job: give --service-group or --consumer-group")
    options = JobOptions(
        bootstrap_servers=args.bootstrap_servers,
        topics=[t for t in args.topics.split(",") if t],
        service_url=args.service_url,
        service_group=service_group,
        consumer_group=args.consumer_group,
        window_s=int(args.window_s),
        slide_s=int(args.slide_s),
        trigger_s=float(args.trigger_s),
        checkpoint_dir=args.checkpoint_dir,
        master=args.master,
        source=args.source,
        starting_offsets=args.starting_offsets,
    )
    spark = spark_session(options)
    query = start(spark, options)
    try:
        log_progress(query, options.trigger_s)
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()
    return 0
