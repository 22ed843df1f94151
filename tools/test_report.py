"""What a test run ran, tier by tier, and whether every skip was intended.

A green run must mean the tiers ran. A test that skips because the
machine lacks a package, a service or root turns a tier off without
failing anything, and the closing count (passed, failed, skipped) does
not say which tier went dark. This reads the run's subunit stream
(``stestr last --subunit``), prints per tier (unit, embedded,
multiprocess, real, nested) how many tests ran and skipped, and checks
every skip against ``tests/intended-skips.yaml``: the checked-in list of
opt-ins, each naming its tests, the reason they skip with, why they are
opt-in and how to run them. A skip that no entry explains fails the run;
so does an entry that names no test of the run (a stale entry would
silently allow whatever later takes its name).

    stestr last --subunit | \
        python tools/test_report.py tests/intended-skips.yaml

``--partial`` for a filtered run: its skips are checked, but an entry
need not name one of its tests.

Exit status: 0 every skip intended; 1 an unintended skip or a stale
entry; 2 the list cannot be read.
"""

import argparse
import collections
import re
import sys

from subunit import v2
import testtools
import yaml

# The first pattern a test id matches names its tier. Multiprocess: the
# daemons run as processes over RabbitMQ (and PostgreSQL); real: libvirtd
# and QEMU on this machine; nested: inside a multi-NUMA virtual machine.
TIERS = (
    ('nested', r'tests\.functional\.test_ci_nested\.'),
    ('real', r'tests\.functional\.(libvirt\.test_real_|'
             r'test_ci_local_libvirt\.)'),
    ('multiprocess', r'tests\.functional\.(faults\.|test_(broker_tls|'
                     r'ci_deployment|cli_broker|conductor_stop|daemon_start|'
                     r'deployment_files|drain_multiprocess|exit_codes|'
                     r'multiprocess|wait_on_abort)\.)'),
    ('embedded', r'tests\.functional\.'),
    ('unit', r'tests\.unit\.'),
)
TIER_NAMES = ('unit', 'embedded', 'multiprocess', 'real', 'nested', 'other')
ENTRY_KEYS = {'tests', 'reason', 'why', 'how'}


class SkipListError(Exception):
    """The intended-skip list is not what this tool reads (why: str)."""


def tier_of(test_id):
    for name, pattern in TIERS:
        if re.match(pattern, test_id):
            return name
    return 'other'


def load_intended(path):
    """The list's entries, each with compiled ``tests`` and ``reason``.

    :raises SkipListError: unreadable, or an entry without one of
        tests/reason/why/how, or a pattern that does not compile.
    """
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise SkipListError(f"{path}: {exc}") from None
    entries = (doc or {}).get('intended_skips') if isinstance(doc, dict) \
        else None
    if not isinstance(entries, list):
        raise SkipListError(f"{path}: expected a mapping with a list "
                            f"'intended_skips'")
    loaded = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or set(entry) != ENTRY_KEYS:
            raise SkipListError(
                f"{path}: entry {number} must have exactly the keys "
                f"{', '.join(sorted(ENTRY_KEYS))}")
        try:
            loaded.append(dict(entry, number=number,
                               tests_re=re.compile(entry['tests']),
                               reason_re=re.compile(entry['reason'])))
        except (re.error, TypeError) as exc:
            raise SkipListError(f"{path}: entry {number}: {exc}") from None
    return loaded


def read_results(source):
    """{test id: (status, skip reason or '')} of a subunit v2 stream.

    Each test's last final status counts (a retried or re-recorded
    test); ids stestr attaches to worker output are not tests.
    """
    results = {}

    def keep(test):
        status = test['status']
        if status in ('exists', 'inprogress', None):
            return
        reason = ''
        if 'reason' in test['details']:
            reason = test['details']['reason'].as_text().strip()
        elif status not in ('success', 'skip') and \
                'traceback' in test['details']:
            # A failure's last traceback line: the tail of CI's output
            # must say which test failed and why, not only how many.
            lines = test['details']['traceback'].as_text().strip()
            reason = lines.splitlines()[-1] if lines else ''
        results[test['id']] = (status, reason)

    result = testtools.StreamToDict(keep)
    result.startTestRun()
    try:
        v2.ByteStreamToStreamResult(source, non_subunit_name='stdout').run(
            result)
    finally:
        result.stopTestRun()
    return results


def judge(results, intended):
    """(per-tier counts, intended skips by entry, unintended skips,
    stale entries)."""
    counts = {name: collections.Counter() for name in TIER_NAMES}
    by_entry = collections.Counter()
    unintended = []
    matched = set()
    for test_id, (status, reason) in sorted(results.items()):
        tier = counts[tier_of(test_id)]
        if status == 'success':
            tier['passed'] += 1
        elif status == 'skip':
            tier['skipped'] += 1
        else:  # fail, uxsuccess: what stestr counts as failed
            tier['failed'] += 1
        for entry in intended:
            if entry['tests_re'].search(test_id):
                matched.add(entry['number'])
        if status != 'skip':
            continue
        entry = next((e for e in intended
                      if e['tests_re'].search(test_id)
                      and e['reason_re'].search(reason)), None)
        if entry is None:
            unintended.append((test_id, reason))
        else:
            by_entry[entry['number']] += 1
    stale = [e for e in intended if e['number'] not in matched]
    return counts, by_entry, unintended, stale


def render(counts, by_entry, unintended, stale, intended, out,
           failed=()):
    """The table, then every intended skip, failed test, unintended skip
    and stale entry, one line each.

    :param failed: [(test id, last line of its traceback)].
    """
    print(f"{'tier':<13}{'ran':>6}{'passed':>8}{'failed':>8}{'skipped':>9}",
          file=out)
    for name in TIER_NAMES:
        tier = counts[name]
        if name == 'other' and not sum(tier.values()):
            continue
        ran = tier['passed'] + tier['failed']
        print(f"{name:<13}{ran:>6}{tier['passed']:>8}{tier['failed']:>8}"
              f"{tier['skipped']:>9}", file=out)
    for entry in intended:
        if by_entry[entry['number']]:
            print(f"intended skip x{by_entry[entry['number']]}: "
                  f"{entry['why']} (to run: {entry['how']})", file=out)
    # Failures last: CI keeps the tail of a long run's output, and the
    # intended skips' explanations above would push them out of it.
    for test_id, last_line in failed:
        print(f"FAILED {test_id}: {last_line or '(no traceback)'}",
              file=out)
    for test_id, reason in unintended:
        print(f"UNINTENDED SKIP {test_id}: {reason or '(no reason given)'}",
              file=out)
    for entry in stale:
        print(f"STALE intended-skip entry {entry['number']}: no test of "
              f"this run matches {entry['tests']!r}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('intended', help='tests/intended-skips.yaml')
    parser.add_argument('--partial', action='store_true',
                        help='a filtered run: an entry naming none of its '
                             'tests is not stale')
    args = parser.parse_args(argv)
    try:
        intended = load_intended(args.intended)
    except SkipListError as exc:
        print(f"test_report: {exc}", file=sys.stderr)
        return 2
    results = read_results(sys.stdin.buffer)
    counts, by_entry, unintended, stale = judge(results, intended)
    if args.partial:
        stale = []
    failed = [(test_id, reason) for test_id, (status, reason)
              in sorted(results.items())
              if status not in ('success', 'skip')]
    render(counts, by_entry, unintended, stale, intended, sys.stdout,
           failed)
    return 1 if unintended or stale else 0


if __name__ == '__main__':
    sys.exit(main())
