"""The MapReduce job of `corelane lab apps --apps mapreduce`: a PySpark driver that joins a
standalone cluster, waits for its executors, warms them up with a small run of the job, says
`ready`, waits for the lab's go file, runs the measured job and prints what it found.

The job: RECORDS generated records (k, v) with k = id * 2654435761 mod KEYS and
v = (id * 40503 + 17) mod 1000003, grouped by k (every key's records come from different map
partitions, so nearly every record crosses the shuffle), each group's count c and sum s;
then, over the groups, their number, the records counted and the checksum
sum((k mod 1009 + 1) * s + 7 * c), which the lab computes apart and compares.

Arguments: MASTER_URL DRIVER_HOST RECORDS KEYS PARTITIONS EXECUTORS GO_FILE.
Every line on stdout is one JSON object; Spark's own log goes to stderr.
"""

import json
import os
import sys
import time
import traceback
import urllib.request

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

WARMUP_RECORDS = 200_000
# Bounded waits: executors registering, the lab's go, the status store catching up.
EXECUTORS_WAIT_S = 120
GO_WAIT_S = 300
METRICS_WAIT_S = 180


def say(**fields):
    print(json.dumps(fields), flush=True)


def fail(message):
    say(error=message)
    sys.exit(1)


def job(spark, records, keys, partitions):
    rec = spark.range(0, records, 1, partitions).select(
        ((F.col("id") * 2654435761) % keys).alias("k"),
        ((F.col("id") * 40503 + 17) % 1000003).alias("v"),
    )
    groups = rec.groupBy("k").agg(F.count(F.lit(1)).alias("c"), F.sum("v").alias("s"))
    row = groups.agg(
        F.count(F.lit(1)).alias("groups"),
        F.sum("c").alias("records"),
        F.sum((F.col("k") % 1009 + 1) * F.col("s") + F.col("c") * 7).alias("checksum"),
    ).collect()[0]
    return {"groups": row["groups"], "records": row["records"], "checksum": row["checksum"]}


def wait_for_executors(sc, wanted):
    end = time.monotonic() + EXECUTORS_WAIT_S
    while time.monotonic() < end:
        if sc._jsc.sc().getExecutorIds().size() >= wanted:
            return
        time.sleep(0.05)
    have = sc._jsc.sc().getExecutorIds().size()
    fail(f"{have} of {wanted} executors registered within {EXECUTORS_WAIT_S} s")


def get_json(url):
    """The status API's answer, or None when it did not come in time (a busy machine: the
    caller asks again until its own deadline)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return json.load(answer)
    except TimeoutError:
        return None


def shuffle_bytes(sc, group):
    """Shuffle bytes written and read by the stages of the jobs of `group`, from the driver's
    status API, once every one of those jobs and stages is recorded as finished."""
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    end = time.monotonic() + METRICS_WAIT_S
    while time.monotonic() < end:
        all_jobs, all_stages = get_json(f"{api}/jobs"), get_json(f"{api}/stages")
        if all_jobs is None or all_stages is None:
            continue
        jobs = [j for j in all_jobs if j.get("jobGroup") == group]
        ids = {s for j in jobs for s in j["stageIds"]}
        stages = {s["stageId"]: s for s in all_stages if s["stageId"] in ids}
        done = jobs and all(j["status"] == "SUCCEEDED" for j in jobs)
        ran = [s for s in stages.values() if s["status"] != "SKIPPED"]
        if done and ran and all(s["status"] == "COMPLETE" for s in ran):
            written = sum(s["shuffleWriteBytes"] for s in ran)
            read = sum(s["shuffleReadBytes"] for s in ran)
            return written, read, len(ran)
        time.sleep(0.1)
    fail(f"the status API did not record group {group}'s jobs within {METRICS_WAIT_S} s")


def main():
    if len(sys.argv) != 8:
        fail("usage: spark_job.py MASTER_URL DRIVER_HOST RECORDS KEYS PARTITIONS EXECUTORS GO_FILE")
    master, host, records, keys, partitions, executors, go = sys.argv[1:]
    records, keys, partitions, executors = map(int, (records, keys, partitions, executors))
    spark = (
        SparkSession.builder.master(master)
        .appName("corelane-lab-mapreduce")
        .config("spark.driver.host", host)
        .config("spark.driver.bindAddress", host)
        .config("spark.driver.memory", "768m")
        .config("spark.executor.memory", "768m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(executors))
        .config("spark.sql.shuffle.partitions", str(partitions))
        # Both workers share one host here: by default each executor would read the other's
        # shuffle blocks from the local disk. The row measures the shuffle a cluster makes,
        # fetched over TCP from the other executor.
        .config("spark.shuffle.readHostLocalDisk", "false")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    sc = spark.sparkContext
    wait_for_executors(sc, executors)
    started = time.monotonic()
    sc.setJobGroup("warmup", "warm-up")
    job(spark, WARMUP_RECORDS, max(1, WARMUP_RECORDS // 2), partitions)
    say(ready=True, executors=executors, warmup_s=time.monotonic() - started)
    end = time.monotonic() + GO_WAIT_S
    while not os.path.exists(go):
        if time.monotonic() > end:
            fail(f"no go file {go} within {GO_WAIT_S} s")
        time.sleep(0.01)
    sc.setJobGroup("measured", "the measured job")
    started = time.monotonic()
    result = job(spark, records, keys, partitions)
    job_s = time.monotonic() - started
    say(done=True, job_s=job_s)
    written, read, stages = shuffle_bytes(sc, "measured")
    say(result=dict(result, job_s=job_s, shuffle_write_bytes=written,
                    shuffle_read_bytes=read, stages=stages))
    spark.stop()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # the lab reads stdout: the reason goes there, in one line
        fail(traceback.format_exc(limit=3).strip().replace("\n", " | ")[-2000:])
