#!/usr/bin/env bash
# A one-node Slurm 22.05 cluster on this host for benchmarks: munged, slurmctld and one slurmd
# with 2 fake GPUs (char devices with NVIDIA's major number; no driver needed). No database.
# Needs root; installs slurmctld, slurmd, slurm-client and munge when missing.
#   RUN=/tmp/labpool-bench-slurm (default)   ./start.sh
#   export SLURM_CONF=$RUN/etc/slurm.conf     # for every client command
# Derived from the single-host recipe in labpool's shared reference material.
set -euo pipefail
RUN=${RUN:-/tmp/labpool-bench-slurm}
HOST=$(hostname -s)
export SLURM_CONF=$RUN/etc/slurm.conf
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
waitfor() {
  local n=$1; shift
  for ((i = 0; i < n * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "timeout waiting for: $*" >&2; return 1
}

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi

mkdir -p "$RUN"/{etc,log,state,spool/gn1,munge,munge-key,dev/gn1,jobs}
chmod 755 "$RUN/munge"; chmod 700 "$RUN/munge-key"; chmod 1777 "$RUN/jobs"
for i in 0 1; do [ -e "$RUN/dev/gn1/nvidia$i" ] || mknod "$RUN/dev/gn1/nvidia$i" c 195 "$i"; done

cat >"$RUN/etc/slurm.conf" <<CONF
ClusterName=labpoolbench
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$RUN/munge/munge.socket.2
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$RUN/state
SlurmdSpoolDir=$RUN/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$RUN/log/slurmctld.log
SlurmdLogFile=$RUN/log/slurmd-%n.log
MpiDefault=none
ReturnToService=2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
MinJobAge=10
MaxJobCount=30000
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=gn1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17011 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=2000 Gres=gpu:rtx4090:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
cat >"$RUN/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=gn1 Name=gpu Type=rtx4090 File=$RUN/dev/gn1/nvidia[0-1]
CONF

[ -s "$RUN/munge-key/munge.key" ] || {
  dd if=/dev/urandom of="$RUN/munge-key/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$RUN/munge-key/munge.key"
}
alive "$RUN/munge/munged.pid" || munged --key-file="$RUN/munge-key/munge.key" --socket="$RUN/munge/munge.socket.2" \
  --pid-file="$RUN/munge/munged.pid" --log-file="$RUN/log/munged.log" --seed-file="$RUN/munge-key/munged.seed"
waitfor 10 bash -c "munge -S $RUN/munge/munge.socket.2 -n | unmunge -S $RUN/munge/munge.socket.2"
alive "$RUN/slurmctld.pid" || slurmctld
waitfor 20 scontrol ping
alive "$RUN/slurmd-gn1.pid" || slurmd -N gn1
waitfor 30 bash -c "[ \"\$(sinfo -h -N -t idle,mix,alloc -o %N | wc -l)\" -eq 1 ]"
echo "slurm ready: export SLURM_CONF=$SLURM_CONF"
