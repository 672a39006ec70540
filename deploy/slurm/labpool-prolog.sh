#!/bin/sh
# labpool's Slurm Prolog: the second line of defence of data-aware placement over Slurm.
#
# labpool releases a job only once its datasets are staged on the node it chose. Should a job
# be started anyway (released by hand, or its node's cache wiped meanwhile), this Prolog
# refuses it: a labpool job's comment is `labpool:<job>:<attempt>;pool=<id>;data=DIR,DIR`, and
# every DIR must have its `DIR.complete` marker (written by labpool's node cache last, after
# every file is synced) on this node. Jobs that are not labpool's pass untouched.
#
# Install on every node: copy to /etc/slurm/labpool-prolog.sh (root-owned, 0755) and set
#   Prolog=/etc/slurm/labpool-prolog.sh
# in slurm.conf. Slurm drains a node whose Prolog fails, which is what a node that starts jobs
# without their data needs: an admin's look. The job ends without running.
set -u
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
comment=$(scontrol show job "$SLURM_JOB_ID" -o 2>/dev/null | sed -n 's/.* Comment=\([^ ]*\).*/\1/p')
case "$comment" in
  labpool:*) ;;
  *) exit 0 ;;
esac
data=$(printf '%s\n' "$comment" | tr ';' '\n' | sed -n 's/^data=//p')
[ -n "$data" ] || exit 0
old_ifs=$IFS
IFS=','
for dir in $data; do
  if [ ! -e "$dir.complete" ]; then
    echo "labpool prolog: job $SLURM_JOB_ID needs $dir, which is not complete on $(hostname); not starting it" >&2
    exit 1
  fi
done
IFS=$old_ifs
exit 0
