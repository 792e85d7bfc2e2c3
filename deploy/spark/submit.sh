#!/usr/bin/env bash
# Submit the rates job to a Spark cluster:
#   SPARK_MASTER=spark://spark-master:7077 deploy/spark/submit.sh --topics orders --consumer-group orders \
#       --bootstrap-servers kafka:9092 --service-url http://groupfit:8000
# The groupfit wheel must be importable by the executors: ship it with --py-files (built by
# `pip wheel --no-deps . -w dist`) or run on the groupfit-spark image (deploy/spark/Dockerfile).
# Every option of `groupfit rates-job` works here; they also read GROUPFIT_RATES_* variables.
# Spark's Kafka connector: SPARK_KAFKA_JARS, a comma-separated list of its jars, goes to --jars (e.g. the jars
# deploy/kafka/pom.xml resolves for the installed PySpark: SPARK_KAFKA_JARS="$(groupfit spark-kafka-jars)");
# without it, spark-submit fetches SPARK_KAFKA_PACKAGES with --packages. SPARK_KAFKA_PACKAGES="" and no jars
# leave the connector out, for `--source python` (the job's own source). A standalone cluster runs Python
# drivers with SPARK_DEPLOY_MODE=client.
set -euo pipefail
: "${SPARK_MASTER:?set SPARK_MASTER, e.g. spark://spark-master:7077 or k8s://https://kubernetes.default.svc}"
jars="${SPARK_KAFKA_JARS:-}"
packages="${SPARK_KAFKA_PACKAGES-org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0}"
if [[ -n "$jars" ]]; then
  packages=""
fi
exec spark-submit \
  --master "$SPARK_MASTER" \
  --deploy-mode "${SPARK_DEPLOY_MODE:-cluster}" \
  --name groupfit-rates \
  ${jars:+--jars "$jars"} \
  ${packages:+--packages "$packages"} \
  --py-files "${GROUPFIT_WHEEL:-dist/groupfit-0.1.0-py3-none-any.whl}" \
  --conf spark.sql.shuffle.partitions=8 \
  "$(dirname "$0")/rates_job.py" --source kafka --master "$SPARK_MASTER" "$@"
