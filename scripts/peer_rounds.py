#!/usr/bin/python3
"""The figures of a bench_peer.sh window: per model, the median over rounds of each round's ratio epstack / ONNX
Runtime (run median, with the rounds' range; run p90; create median), the medians of both engines' run medians, and
the geometric mean of the run ratios (what issue 18's targets are read from).

Usage: scripts/peer_rounds.py DIR...   (DIR: a bench_peer.sh output folder holding lib.N.jsonl and ort.N.jsonl)
"""
import glob
import json
import math
import os
import statistics
import sys


def records(path):
    with open(path) as f:
        return {r['model']: r for r in (json.loads(line) for line in f if line.strip())}


def main(dirs):
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for d in dirs:
        rounds = sorted(glob.glob(os.path.join(d, 'lib.[0-9]*.jsonl')))
        if not rounds:
            print(f'peer_rounds: no lib.N.jsonl in {d}', file=sys.stderr)
            return 1
        by_model = {}
        for lib_file in rounds:
            ort_file = os.path.join(d, os.path.basename(lib_file).replace('lib.', 'ort.', 1))
            if not os.path.exists(ort_file):
                continue
            lib, ort = records(lib_file), records(ort_file)
            for m, a in lib.items():
                b = ort.get(m)
                if b is None or not a['run_ms'].get('median') or not b['run_ms'].get('median'):
                    continue
                r = by_model.setdefault(m, {'run': [], 'p90': [], 'create': [], 'ms': [], 'ort_ms': []})
                r['run'].append(a['run_ms']['median'] / b['run_ms']['median'])
                r['p90'].append(a['run_ms']['p90'] / b['run_ms']['p90'])
                if a['create_ms'].get('median') and b['create_ms'].get('median'):
                    r['create'].append(a['create_ms']['median'] / b['create_ms']['median'])
                r['ms'].append(a['run_ms']['median'])
                r['ort_ms'].append(b['run_ms']['median'])
        print('%s (%d rounds): the median of the rounds\' ratios epstack / ONNX Runtime' % (d, len(rounds)))
        print('  %-18s %6s %12s %6s %7s %11s %9s' % ('model', 'run', '(range)', 'p90', 'create', 'epstack ms', 'ORT ms'))
        logs = []
        for m, r in by_model.items():
            run = statistics.median(r['run'])
            logs.append(math.log(run))
            create = '%7.3f' % statistics.median(r['create']) if r['create'] else '%7s' % '-'
            spread = '(%.2f-%.2f)' % (min(r['run']), max(r['run']))
            print('  %-18s %6.3f %12s %6.3f %s %11.3f %9.3f' % (m, run, spread, statistics.median(r['p90']), create,
                                                            statistics.median(r['ms']), statistics.median(r['ort_ms'])))
        if logs:
            print(f'  geometric mean of the run ratios {math.exp(sum(logs) / len(logs)):.3f}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
