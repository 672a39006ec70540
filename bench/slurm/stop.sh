#!/usr/bin/env bash
# Stops what start.sh started, by PID file only. ./stop.sh [--wipe]
RUN=${RUN:-/tmp/labpool-bench-slurm}
stop() {
  local f=$1 want=$2 pid comm
  [ -s "$f" ] || return 0
  pid=$(cat "$f"); comm=$(ps -o comm= -p "$pid" 2>/dev/null || true)
  if [ -n "$comm" ] && [[ "$comm" == "$want"* ]]; then
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$f"
}
stop "$RUN/slurmd-gn1.pid" slurmd
stop "$RUN/slurmctld.pid" slurmctld
stop "$RUN/munge/munged.pid" munged
if [ "${1:-}" = --wipe ]; then rm -rf "$RUN"; fi
