"""simple_slurm's own flow, unchanged, against the Slurm commands on PATH: a parsable job
submitted through a here-document on sbatch's standard input, the queue read through squeue's
CSV format, one job cancelled with scancel and the rest with `scancel --me`.

Run as `python simple_slurm_flow.py`; it prints `ok` and exits 0 when all behaved as on Slurm.
"""

import time

from simple_slurm import Slurm


def wait_gone(slurm, job_id, within_s=30):
    deadline = time.time() + within_s
    while True:
        slurm.squeue.update_squeue()
        if job_id not in slurm.squeue.jobs:
            return
        assert time.time() < deadline, f"job {job_id} still queued: {slurm.squeue.jobs}"
        time.sleep(0.3)


s = Slurm(job_name="hello", output="hello-%j.out", parsable=True, time="0:05:00")
done = s.sbatch("echo hello-from-simple-slurm", verbose=False)
wait_gone(s, done)
out = open(f"hello-{done}.out").read()
assert "hello-from-simple-slurm" in out, out

long = Slurm(job_name="long", parsable=True)
first = long.sbatch("sleep 300", verbose=False)
second = long.sbatch("sleep 300", verbose=False)
s.squeue.update_squeue()
jobs = s.squeue.jobs
assert first in jobs and second in jobs, jobs
assert jobs[first]["NAME"] == "long", jobs[first]
s.scancel.cancel_job(first)
wait_gone(s, first)
s.squeue.update_squeue()
assert second in s.squeue.jobs, s.squeue.jobs
third = long.sbatch("sleep 300", verbose=False)
s.scancel.cancel_all()
wait_gone(s, second)
wait_gone(s, third)
print("ok")
