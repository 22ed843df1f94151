"""libvirt's ``qemu`` hook for the migration guard (see guard.py).

libvirt runs the hook as ``<hook> <guest name> <operation>
<sub-operation> <extra>`` with the domain XML on standard input, for
every operation of every guest, synchronously. For ``migrate`` (an
incoming migration, sub-operation ``begin``) whatever the hook prints
replaces the XML (nothing: unchanged), and a non-zero exit refuses the
migration, its standard error becoming libvirt's error. For the other
operations libvirt ignores the output, but a failure stops a guest from
starting, or kills it on ``reconnect``: this hook always exits 0 for
them, whatever happens.

The shim the compute agent installs runs::

    python -m numamig.virt.libvirt.guard_hook --claims-file F \\
        --max-age S --when-unknown pass|refuse --deadline S \\
        [--log-file L] -- "$@"

It imports only the XML pipeline and the claims file reader (no
oslo.config, no RPC, no versioned objects), reads one local file, and
holds a deadline of its own: past ``--deadline`` seconds (a file system
that hangs) it gives the ``--when-unknown`` answer at once.
"""

import argparse
import signal
import sys

from numamig.virt.libvirt import guard

MAX_XML_BYTES = 4 * 1024 * 1024
EXIT_OK, EXIT_REFUSED = 0, 1


class DeadlinePassed(Exception):
    """Raised in the hook when its own deadline passes."""


def main(argv=None, stdin=None, stdout=None, stderr=None, now=None):
    """Run as libvirt's hook; return the exit status libvirt reads."""
    stdin = stdin or sys.stdin.buffer
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        settings = guard.GuardSettings(
            hook_path=None, claims_file=args.claims_file,
            max_age_s=args.max_age, when_unknown=args.when_unknown,
            log_file=args.log_file, deadline_s=args.deadline)
    except Exception as exc:  # noqa: BLE001 - never fail
        # libvirt's other operations must never fail because of a bad
        # shim; an incoming migration goes on unchecked, said on stderr.
        stderr.write(f"numamig migration guard: unusable arguments "
                     f"({exc}); the XML passes unchecked\n")
        return EXIT_OK
    guest, operation = (args.libvirt + ['-', '-'])[:2]
    if operation != 'migrate':
        return EXIT_OK
    verdict = _within_deadline(settings, stdin, now)
    _log(settings, guest, verdict, stderr)
    if verdict.action == guard.REFUSED:
        stderr.write(f"numamig migration guard: {verdict.reason}\n")
        return EXIT_REFUSED
    if verdict.action == guard.REWRITTEN:
        stdout.write(verdict.xml)
        stdout.flush()
    return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """Raises instead of printing a usage text and exiting."""

    def error(self, message):
        raise ValueError(message)


def _parser():
    parser = _Parser(
        prog='numamig migration guard', add_help=False,
        description="libvirt qemu hook of numamig's migration guard")
    parser.add_argument('--claims-file', required=True)
    parser.add_argument('--max-age', type=float, required=True)
    parser.add_argument('--when-unknown', choices=guard.WHEN_UNKNOWN,
                        default=guard.PASS)
    parser.add_argument('--deadline', type=float, default=5.0)
    parser.add_argument('--log-file')
    parser.add_argument('libvirt', nargs='*',
                        help="guest name, operation, sub-operation, extra")
    return parser


def _within_deadline(settings, stdin, now):
    """guard.decide on standard input, or the when_unknown verdict once
    the deadline passes (a timer signal interrupts whatever blocks)."""
    def expire(_signum, _frame):
        raise DeadlinePassed()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, settings.deadline_s)
    try:
        xml = stdin.read(MAX_XML_BYTES + 1)
        if len(xml) > MAX_XML_BYTES:
            return guard.unknown(settings, '(unread)',
                                 f"the domain XML is larger than "
                                 f"{MAX_XML_BYTES} bytes")
        return guard.decide(xml, settings, now)
    except DeadlinePassed:
        return guard.unknown(settings, '(undecided)',
                             f"no decision within the guard's deadline "
                             f"of {settings.deadline_s} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _log(settings, guest, verdict, stderr):
    """Append the decision to the guard's log (stderr when it has none
    or it cannot be opened: libvirt shows stderr when the hook fails)."""
    unwritten = guard.append_log(settings, guest, verdict)
    if unwritten:
        stderr.write(unwritten)


if __name__ == '__main__':
    sys.exit(main())
