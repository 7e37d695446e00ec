#!/bin/bash
# The PSS (KiB, /proc/PID/smaps_rollup) of each process of an idle pool over time: the
# steady state, which bench/memory.rkt's reading 1.2 s after the last request can miss
# (a manager's heap settles within about 20 s of its start).
#   bench/pool-pss.sh LABEL TREE [WORKERS] [APP]
# TREE: a checkout whose fastcgi collection `raco fastcgi` runs (set PLTADDONDIR to an
# add-on folder where TREE/fastcgi is linked, to measure another tree than the installed
# one); APP: relative to TREE, examples/hello-raw.rkt by default. Prints one line per
# reading, at 6, 20 and 45 s after the pid file appeared; a unix socket under a new
# temporary folder; the pool is stopped after.
set -e
label=$1; tree=$2; workers=${3:-2}; app=${4:-examples/hello-raw.rkt}
d=$(mktemp -d)
raco fastcgi serve "$tree/$app" --listen "unix:$d/s.sock" --workers "$workers" \
     --pid-file "$d/p" --log-level error >"$d/log" 2>&1 &
for _ in $(seq 100); do [ -s "$d/p" ] && break; sleep 0.1; done
pid=$(cat "$d/p")
pss() { awk '/^Pss:/{print $2}' "/proc/$1/smaps_rollup"; }
for t in 6 20 45; do
  while [ $(($(date +%s) - $(stat -c %Y "$d/p"))) -lt $t ]; do sleep 0.2; done
  total=$(pss "$pid"); line="$label t=${t}s manager:$total"
  for ch in $(pgrep -P "$pid"); do
    v=$(pss "$ch"); total=$((total + v)); line="$line $(cut -c9- "/proc/$ch/comm"):$v"
  done
  echo "$line pool:$total"
done
kill "$pid"; sleep 1.5; rm -rf "$d"
