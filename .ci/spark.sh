#!/usr/bin/env bash
# Apache Spark for `corelane lab apps --apps mapreduce`: pyspark (which ships Spark's jars and
# the driver's Python side) pinned in a virtual environment at target/spark/venv, where the lab
# looks by default (`--spark-venv DIR` names another). Kept when it already holds the pinned
# version, so a CI run pays for the ~430 MB download once. Needs: python3 with venv and pip
# (Debian: python3-venv), a JRE to run it (openjdk-17-jre-headless; .ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.0.1
venv=target/spark/venv
python=/usr/bin/python3
[ -x "$python" ] || python=python3

stamp="$venv/.corelane-pyspark-version"
# The stamp is written last: a venv without it is a half-done install, made again.
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ] &&
  "$venv/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$version')" 2>/dev/null; then
  echo "spark: pyspark $version already in $venv"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! "$python" -m venv "$venv" ||
  ! "$venv/bin/pip" install -q --disable-pip-version-check "pyspark==$version"; then
  rm -rf "$venv"
  echo "spark: could not install pyspark==$version in $venv; lab apps will skip mapreduce" >&2
  exit 1
fi
echo "$version" >"$stamp"
echo "spark: pyspark $version installed in $venv"
