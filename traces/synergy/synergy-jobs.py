#!/usr/bin/env python3
"""Job sets for the side-by-side check of synergy-tune with Synergy's simulator.

Converts between goldminer's trace (`# goldminer-trace v1`: submit, duration,
GPUs, vCPUs, class row of traces/profile-synergy.tsv) and the replay format of
Synergy's simulator (msr-fiddle/synergy, simulator/jobs/workload.py,
Workload.populate_from_trace: `id,model,arrival_s,iterations,gpus`, one job a
line, whose run at fair share is iterations x the model's iteration time).

  synergy-jobs.py from-jobs JOBS.TSV OUT.TSV   goldminer sim's jobs.tsv (class
      names, submits, trace runs) -> a goldminer trace whose durations are whole
      iterations of the model (so both simulators run the same work); GPU
      counts as Synergy's Philly parser takes them (helpers/
      parse_philly_trace_full.py, parse_jobs_full: a job of more than 16 GPUs
      is left out, one of a count other than 1, 2, 4, 8 or 16 runs on 1 GPU;
      its model zoo has no others)
  synergy-jobs.py from-replay REPLAY.CSV OUT.TSV   Synergy's replay format -> a
      goldminer trace
  synergy-jobs.py to-replay TRACE.TSV OUT.CSV   a goldminer trace -> the replay
      format (`#` lines skipped)

Iteration times: `iter_time` of simulator/models/NAME_1.py at commit 1bb2bed.
"""
import sys

ORDER = ['alexnet', 'res18', 'res50', 'mobilenet', 'shufflenet', 'gnmt',
         'transformer', 'lstm', 'm5', 'deepspeech']  # rows of profile-synergy.tsv
ITER = {'alexnet': 0.6, 'res18': 0.64, 'res50': 0.78, 'mobilenet': 0.71,
        'shufflenet': 0.615, 'gnmt': 0.12, 'transformer': 0.67, 'lstm': 0.011,
        'm5': 0.6, 'deepspeech': 0.757}


def write_trace(jobs, out):
    """jobs: (submit_s, model, iterations, gpus) in submit order."""
    with open(out, 'w') as f:
        f.write('# goldminer-trace v1\n')
        for sub, model, iters, gpus in jobs:
            f.write('%.1f\t%.3f\t%d\t%d\t%d\n' % (sub, iters * ITER[model], gpus,
                                                  3 * gpus, ORDER.index(model)))


def from_jobs(src):
    rows = [line.rstrip('\n').split('\t') for line in open(src)][1:]
    rows.sort(key=lambda x: int(x[0]))
    return [(float(x[4]), x[1], max(1, round(float(x[10]) / ITER[x[1]])),
             int(x[2]) if int(x[2]) in (1, 2, 4, 8, 16) else 1)
            for x in rows if int(x[2]) <= 16]


def from_replay(src):
    jobs = []
    for line in open(src):
        _, model, sub, iters, gpus = line.strip().split(',')
        jobs.append((float(sub), model, int(iters), int(gpus)))
    return jobs


def to_replay(src, out):
    with open(out, 'w') as f:
        i = 0
        for line in open(src):
            if line.startswith('#') or not line.strip():
                continue
            sub, dur, gpus, _, cls = line.split('\t')
            model = ORDER[int(cls)]
            f.write('%d,%s,%s,%d,%s\n' % (i, model, sub, round(float(dur) / ITER[model]),
                                          gpus))
            i += 1


def main(argv):
    if len(argv) != 4 or argv[1] not in ('from-jobs', 'from-replay', 'to-replay'):
        sys.stderr.write(__doc__)
        return 2
    if argv[1] == 'from-jobs':
        write_trace(from_jobs(argv[2]), argv[3])
    elif argv[1] == 'from-replay':
        write_trace(from_replay(argv[2]), argv[3])
    else:
        to_replay(argv[2], argv[3])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
