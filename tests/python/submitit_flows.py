"""submitit's own flows, unchanged, against the Slurm commands on PATH.

Run as `python submitit_flows.py FLOW FOLDER`; it prints `ok FLOW` and exits 0 when the flow
behaved as on Slurm 22.05, and fails with the reason otherwise. The e2e test
`tests/e2e/submitit.rs` runs it against labpool's `sbatch`, `sacct`, `scancel`, `scontrol` and
`srun`.
"""

import os
import sys
import time

import submitit

# A job that never produces a result must raise within this many seconds.
RAISES_WITHIN_S = 60


def add(a, b):
    return a + b


def die_if_one(x):
    if x == 1:
        # No result file, as when a task is killed.
        os._exit(3)
    return x


class Resumable(submitit.helpers.Checkpointable):
    """Sleeps past its limit on the first attempt; the signal checkpoints it (with `resumed`
    set), submitit requeues it, and the second attempt returns at once."""

    def __init__(self):
        self.resumed = False

    def __call__(self, value):
        if self.resumed:
            return f"resumed {value} after {os.environ.get('SLURM_RESTART_COUNT')} requeue(s)"
        self.resumed = True
        time.sleep(300)
        return "never requeued"


def executor(folder):
    ex = submitit.AutoExecutor(folder=folder)
    assert ex.cluster == "slurm", f"submitit chose {ex.cluster}, not slurm"
    # submitit's README example: one minute, which writes --signal=USR2@90.
    ex.update_parameters(timeout_min=1)
    return ex


def raises_soon(job, what):
    started = time.time()
    try:
        value = job.result()
    except submitit.core.utils.UncompletedJobError as e:
        took = time.time() - started
        assert took < RAISES_WITHIN_S, f"{what}: raised only after {took:.0f} s"
        print(f"{what}: raised after {took:.1f} s: {str(e).splitlines()[0]}")
        return
    raise AssertionError(f"{what}: returned {value!r} instead of raising")


def readme(folder):
    # The README's folder, one per job id ("log_test/%j"), which submitit makes just after
    # sbatch returns, as Hydra's default ".submitit/%j" is made.
    ex = executor(os.path.join(folder, "log_test", "%j"))
    jobs = [ex.submit(add, i, 7) for i in range(3)]
    results = [j.result() for j in jobs]
    assert results == [7, 8, 9], results
    for j in jobs:
        # The result comes a moment before the job ends, on Slurm as here.
        deadline = time.time() + 15
        while j.state != "COMPLETED":
            assert time.time() < deadline, (j.job_id, j.state)
            time.sleep(0.5)
        log = j.paths.stdout.read_text()
        assert "completed successfully" in log, log


def cancelled(folder):
    ex = executor(folder)
    job = ex.submit(time.sleep, 300)
    deadline = time.time() + 30
    while job.state != "RUNNING":
        assert time.time() < deadline, f"never running: {job.state}"
        time.sleep(0.5)
    job.cancel()
    raises_soon(job, "cancelled job")
    assert job.state.startswith("CANCELLED"), job.state


def array_death(folder):
    ex = executor(folder)
    jobs = ex.map_array(die_if_one, [0, 1])
    assert jobs[0].result() == 0
    raises_soon(jobs[1], "array task dead without a result")


def checkpoint(folder):
    ex = executor(folder)
    job = ex.submit(Resumable(), 42)
    started = time.time()
    value = job.result()
    assert value == "resumed 42 after 1 requeue(s)", value
    took = time.time() - started
    assert took < 60, f"finished only after {took:.0f} s"


FLOWS = {
    "readme": readme,
    "cancelled": cancelled,
    "array_death": array_death,
    "checkpoint": checkpoint,
}

if __name__ == "__main__":
    flow, folder = sys.argv[1], sys.argv[2]
    FLOWS[flow](folder)
    print(f"ok {flow}")
