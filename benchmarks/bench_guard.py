"""Measure the migration guard's hook as libvirtd runs it.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_guard.py [--runs N]

libvirtd runs the ``qemu`` hook synchronously, inside every incoming
migration (and at every guest start, stop and reconnect), so its whole
run counts: a process spawned through the shim numamig installs, from
spawn to exit, with the domain XML on stdin. Measured, round after
round so that load elsewhere falls on every case alike:

* baseline: ``python -c pass`` and ``python -c 'import lxml.etree'``
  (the guard cannot start faster than the interpreter and its XML
  library);
* ``start``: an operation the guard ignores (every guest start pays it);
* ``migrate``, rewritten: a 2-cell guest copied by an old source, with
  the host's claims file holding 1 and 200 claims;
* ``migrate``, unchanged: the XML already matches the claim.

Prints p50/p95 per case and the target line (``migrate`` p50 below
0.25 s, and below the baseline plus 0.15 s).
"""

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time

# The script's own directory is on sys.path: its siblings import.
from bench_cli import percentile

from numamig.conf import CONF
from numamig.virt.libvirt import guard_claims
from numamig.virt.libvirt import guard_install
from numamig.virt.libvirt import settings as lv_settings

TARGET_P50_S = 0.25
TARGET_OVER_BASELINE_S = 0.15
HERE = os.path.dirname(os.path.abspath(__file__))
DOMAIN = os.path.join(HERE, '..', 'tests', 'fixtures', 'domains',
                      'numamig-pinned-2cell.xml')
GUEST = 'c0a1e000-0000-4000-8000-000000000001'


def claim(migration):
    return guard_claims.ClaimPlacement(
        migration, {0: [6], 1: [7], 2: [14], 3: [15]}, {0: [1], 1: [0]},
        [4, 12], [1], 1, {0: 2048, 1: 2048})


def install(directory, claims):
    """A shim in ``directory`` whose claims file holds ``claims`` claims
    (the guest's among them); returns its path."""
    settings = dataclasses.replace(
        lv_settings.guard_from_conf(CONF.libvirt),
        hook_path=os.path.join(directory, 'qemu.d', 'numamig'),
        claims_file=os.path.join(directory, 'claims.json'),
        log_file=os.path.join(directory, 'guard.log'))
    placements = {f'00000000-0000-4000-8000-{n:012d}': claim(f'm{n}')
                  for n in range(claims - 1)}
    placements[GUEST] = claim('m-guest')
    guard_claims.write(settings.claims_file, 'dst', placements)
    guard_install.install(settings, 'bench')
    return settings.hook_path


def cases(root):
    with open(DOMAIN, 'rb') as f:
        source = f.read()
    one = install(os.path.join(root, 'one'), 1)
    many = install(os.path.join(root, 'many'), 200)
    rewritten = subprocess.run([one, 'g', 'migrate', 'begin', '-'],
                               input=source, capture_output=True,
                               check=True).stdout
    return [
        ('python -c pass', [sys.executable, '-c', 'pass'], b''),
        ('python -c "import lxml.etree"',
         [sys.executable, '-c', 'import lxml.etree'], b''),
        ('hook start (ignored)', [one, 'g', 'start', 'begin', '-'], source),
        ('hook migrate, rewritten, 1 claim',
         [one, 'g', 'migrate', 'begin', '-'], source),
        ('hook migrate, rewritten, 200 claims',
         [many, 'g', 'migrate', 'begin', '-'], source),
        ('hook migrate, unchanged', [one, 'g', 'migrate', 'begin', '-'],
         rewritten),
    ]


def run_once(argv, stdin):
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=60, cwd='/')
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='bench-guard-') as root:
        measured = cases(root)
        times = {label: [] for label, _argv, _stdin in measured}
        for _round in range(args.runs):
            for label, argv, stdin in measured:
                times[label].append(run_once(argv, stdin))
    for label, values in times.items():
        print(f"{label:40s} p50 {statistics.median(values) * 1000:6.1f} ms"
              f"  p95 {percentile(values, 0.95) * 1000:6.1f} ms")
    baseline = statistics.median(times['python -c pass'])
    worst = max(statistics.median(v) for k, v in times.items()
                if k.startswith('hook migrate'))
    ok = worst < TARGET_P50_S and worst - baseline < TARGET_OVER_BASELINE_S
    print(f"target: hook migrate p50 < {TARGET_P50_S * 1000:.0f} ms and < "
          f"baseline + {TARGET_OVER_BASELINE_S * 1000:.0f} ms: worst "
          f"{worst * 1000:.1f} ms, baseline {baseline * 1000:.1f} ms -> "
          f"{'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
