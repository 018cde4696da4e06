#!/usr/bin/env python3
"""Run Synergy's own simulator (msr-fiddle/synergy at commit 1bb2bed, checked
out outside this repository: its simulator/ directory is SIM) on a job set.

  run-synergy.py SIM replay REPLAY.CSV CLUSTER.INI fair|tune OUT.TSV
      FIFO with every job's CPUs and memory at its GPU-proportional fair share
      (fair) or Synergy-TUNE (tune), random placement (placement=False, as
      runner.py's benchmark() runs FIFO+fair and FIFO+tune), rounds of 300 s,
      every job measured (series_id_filter = all; rounds go on through idle
      gaps while jobs are still to arrive, where Synergy's replay would stop at
      the first empty round); writes per-job JCTs
      (id, model, gpus, submit, end, jct) and prints the average.
  run-synergy.py SIM generate SEED JOBS OUT.CSV
      Synergy's job generator (Workload.generate_next_job, synthetic branch) as
      runner.py's benchmark() drives it: random.seed(SEED), 9 jobs/hour, class
      split 20/70/10 (image/language/speech), each arrival booked before the
      next draw (JobArrivalEvent); writes the replay format.

Needs numpy (Debian's python3-numpy). Synergy's plotting, solver, NUMA and RPC
imports (pandas, matplotlib, cvxpy, numa, its deployment package) are not used
by these paths and are stubbed here; collections.Mapping is aliased for
Python >= 3.10.
"""
import collections
import collections.abc
import logging
import os
import random
import sys
import types


def setup(sim):
    sys.path.insert(0, sim)
    for m in ['pandas', 'matplotlib', 'matplotlib.pyplot', 'matplotlib.dates', 'cvxpy',
              'numa', 'deployment', 'deployment.runtime', 'deployment.runtime.rpc',
              'deployment.runtime.rpc.scheduler_server',
              'deployment.runtime.rpc.scheduler_client', 'deployment.helper']:
        sys.modules[m] = types.ModuleType(m)
    rpc = sys.modules['deployment.runtime.rpc']
    rpc.scheduler_server = sys.modules['deployment.runtime.rpc.scheduler_server']
    rpc.scheduler_client = sys.modules['deployment.runtime.rpc.scheduler_client']
    sys.modules['deployment.helper'].get_self_ip = lambda: '127.0.0.1'
    collections.Mapping = collections.abc.Mapping
    os.chdir(sim)
    logging.basicConfig(level=logging.WARNING)


def replay(trace, ini, mode, out):
    import runner
    random.seed(42)
    n = sum(1 for _ in open(trace))
    r = runner.Runner(cluster_job_log=None, scheduler='FIFO', jobs_per_hour=9,
                      series_id_filter=(0, n), exponential=True, placement=False,
                      fair=(mode == 'fair'), tune=(mode == 'tune'), simulate=True,
                      config_file=ini, trace=trace)
    rows = {}
    finish = r.finish_job

    def booked(job):
        rows[job.job_id] = (job.job_model.model_name, job.job_gpu_demand,
                            job.job_arrival_time, r.time)
        finish(job)
    r.finish_job = booked
    # Synergy's replay stops at the first round with no job in the cluster
    # (ScheduleEvent: trace mode and no runnable job); a trace with an idle gap
    # (Philly) would lose every job after it, so rounds go on while jobs are
    # still to arrive.
    from events.schedule_event import ScheduleEvent
    handle = ScheduleEvent.handleEvent

    def rounds_on(ev):
        handle(ev)
        if r.terminate and len(rows) + len(r.runnable_jobs) < n:
            r.terminate = False
            r.add_event(ScheduleEvent(r.get_time() + r.scheduler.round_duration, ev.scheduler))
    ScheduleEvent.handleEvent = rounds_on
    r.run_simulation()
    with open(out, 'w') as f:
        f.write('id\tmodel\tgpus\tsubmit\tend\tjct\n')
        for k in sorted(rows):
            m, g, a, e = rows[k]
            f.write('%d\t%s\t%d\t%.1f\t%.1f\t%.1f\n' % (k, m, g, a, e, e - a))
    jct = [v[3] - v[2] for v in rows.values()]
    print('%s %s: %d jobs, average JCT %.4f h' % (mode, trace, len(jct),
                                                   sum(jct) / len(jct) / 3600))


def generate(seed, jobs, out):
    from jobs.workload import Workload
    random.seed(seed)
    w = Workload(None, jobs_per_hour=9, model_class_split=(20, 70, 10),
                 per_server_size=[8, 24, 500, 500, 40], num_jobs_default=0)
    t = 0
    with open(out, 'w') as f:
        for _ in range(jobs):
            j = w.generate_next_job(t)
            t = j.job_arrival_time
            w.add_runnable_job(j.job_class_id)
            f.write('%d,%s,%s,%d,%d\n' % (j.job_id, j.job_model.model_name,
                                         j.job_arrival_time, j.job_total_iteration,
                                         j.job_gpu_demand))


def main(argv):
    if len(argv) == 7 and argv[2] == 'replay' and argv[5] in ('fair', 'tune'):
        paths = [os.path.abspath(p) for p in (argv[3], argv[4], argv[6])]
        setup(argv[1])
        replay(paths[0], paths[1], argv[5], paths[2])
    elif len(argv) == 6 and argv[2] == 'generate':
        out = os.path.abspath(argv[5])
        setup(argv[1])
        generate(int(argv[3]), int(argv[4]), out)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
