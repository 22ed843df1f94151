"""Seed stestr with the durations of the slowest tests.

stestr spreads tests over its workers by the durations it recorded in
earlier runs; a fresh checkout (and CI's) has none, so it deals them out
in turn, and the few tests that take minutes (the nested and real tiers,
the fault suite) may share one worker: measured, 25.4 minutes for one
worker against 19.9 for the other. ``tools/slow-tests.txt`` lists those
tests with a measured duration; loaded into the fresh repository before
the run (tools/dev.sh), they are placed first, longest first, each on
the worker with the least so far.

    python tools/stestr_times.py tools/slow-tests.txt | stestr load
    stestr last --subunit | python tools/stestr_times.py --list 10

The second form prints the tests of the last run that took at least N
seconds, in the file's format (seconds, then the test id), to refresh it.
A stale entry only makes the hint less exact; an entry for a test that
no longer exists is ignored by stestr.
"""

import argparse
import datetime
import sys

from subunit import v2

EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def read_hints(path):
    """[(seconds, test id)] of the file; blank lines and # comments
    skipped.

    :raises ValueError: a line that is not 'SECONDS TEST_ID'.
    """
    hints = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            seconds, _, test_id = line.partition(' ')
            try:
                hints.append((float(seconds), test_id.strip()))
            except ValueError:
                raise ValueError(f"{path}:{number}: expected 'SECONDS "
                                 f"TEST_ID', got {line!r}") from None
    return hints


def write_stream(hints, out):
    """A subunit v2 stream in which each test passed in its seconds."""
    stream = v2.StreamResultToBytes(out)
    for seconds, test_id in hints:
        stream.status(test_id=test_id, test_status='inprogress',
                      timestamp=EPOCH)
        stream.status(test_id=test_id, test_status='success',
                      timestamp=EPOCH + datetime.timedelta(seconds=seconds))


def list_slow(source, minimum):
    """(seconds, test id) of the tests in a subunit stream that took at
    least ``minimum`` seconds, slowest first."""
    started, found = {}, []

    class Collect:
        def status(self, test_id=None, test_status=None, timestamp=None,
                   **_kwargs):
            if test_id is None or timestamp is None:
                return
            if test_status == 'inprogress':
                started[test_id] = timestamp
            elif test_status == 'success' and test_id in started:
                seconds = (timestamp - started[test_id]).total_seconds()
                if seconds >= minimum:
                    found.append((seconds, test_id))

    v2.ByteStreamToStreamResult(source).run(Collect())
    return sorted(found, reverse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('hints', nargs='?',
                        help='the file of SECONDS TEST_ID lines')
    parser.add_argument('--list', type=float, metavar='SECONDS',
                        help='read a subunit stream on stdin and print its '
                             'tests that took at least SECONDS')
    args = parser.parse_args(argv)
    if args.list is not None:
        for seconds, test_id in list_slow(sys.stdin.buffer, args.list):
            print(f"{seconds:.0f} {test_id}")
        return 0
    if not args.hints:
        parser.error("give the hints file, or --list SECONDS")
    try:
        hints = read_hints(args.hints)
    except (OSError, ValueError) as exc:
        print(f"stestr_times: {exc}", file=sys.stderr)
        return 2
    write_stream(hints, sys.stdout.buffer)
    return 0


if __name__ == '__main__':
    sys.exit(main())
