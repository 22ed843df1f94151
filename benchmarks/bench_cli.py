"""Measure the start-up of numamig's command-line tools.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cli.py [--runs N]

Every call an operator or a script makes pays the tool's start-up before
any work, so it is measured as the operator sees it: the wall time of a
whole process, from spawn to exit, of ``numamig-manage --help`` and
``numamig-status --help`` (and, for information, ``numamig-manage
migration start --help``, which loads the versioned objects and
oslo.messaging a real start needs). The baseline is a bare interpreter
(``python -c pass``) measured in the same run: the commands are run in
turn, round after round, so that load from other work on the machine
falls on all of them alike. Prints p50/p95 per command and the target
line (``numamig-manage --help`` p50 < 0.3 s).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGET_P50_S = 0.3
BIN = os.path.dirname(sys.executable)


def commands():
    """(label, argv) of the baseline and the measured commands."""
    manage = os.path.join(BIN, 'numamig-manage')
    status = os.path.join(BIN, 'numamig-status')
    return [('python -c pass', [sys.executable, '-c', 'pass']),
            ('numamig-manage --help', [manage, '--help']),
            ('numamig-status --help', [status, '--help']),
            ('numamig-manage migration start --help',
             [manage, 'migration', 'start', '--help'])]


def run_once(argv):
    """Seconds of one whole process; fails loudly if it fails."""
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          timeout=60)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(runs):
    """{label: [seconds]} of ``runs`` rounds, commands in turn."""
    cases = commands()
    for _label, argv in cases:
        run_once(argv)  # warm the page cache and .pyc files
    times = {label: [] for label, _ in cases}
    for _ in range(runs):
        for label, argv in cases:
            times[label].append(run_once(argv))
    return times


def report(times):
    """The lines to print: one per command, then the target."""
    base = statistics.median(times['python -c pass'])
    lines = [f"{'command':<40} {'p50':>8} {'p95':>8} {'p50/python':>11}"]
    for label, values in times.items():
        p50 = statistics.median(values)
        lines.append(f"{label:<40} {p50 * 1000:6.0f}ms "
                     f"{percentile(values, 0.95) * 1000:6.0f}ms "
                     f"{p50 / base:10.1f}x")
    manage = statistics.median(times['numamig-manage --help'])
    lines.append(f"target: numamig-manage --help p50 < "
                 f"{TARGET_P50_S * 1000:.0f} ms: {manage * 1000:.0f} ms "
                 f"(python -c pass {base * 1000:.0f} ms), "
                 f"{'met' if manage < TARGET_P50_S else 'NOT met'}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=20,
                        help="rounds of every command (default 20)")
    args = parser.parse_args(argv)
    print(f"{args.runs} rounds, commands in turn; wall time of the whole "
          f"process")
    for line in report(measure(args.runs)):
        print(line)


if __name__ == '__main__':
    main()
