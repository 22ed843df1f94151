"""numamig-embedded: the one-command main job (no server, broker, hypervisor).

Starts a conductor and three compute agents in this process on SQLite,
the in-process RPC transport and libvirt test-driver hosts with the
shipped multi-cell capabilities, reproduces the three problems of the
NUMA-aware live migration spec, migrates each guest and prints what
happened. Exit codes: 0 every check held; 1 a check failed; 255 the job
could not run (a bug or a broken installation).
"""

import argparse
import json
import logging
import sys
import tempfile
import traceback

from numamig import _backend
from numamig.cmd import common

EXIT_UNEXPECTED = 255


def _parser():
    parser = argparse.ArgumentParser(
        prog='numamig-embedded', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--format', dest='output_format', default='human',
                        choices=['human', 'json'],
                        help="Output for people (default) or JSON.")
    parser.add_argument('--state-dir', default=None,
                        help="Keep the SQLite database here (default: a "
                             "temporary directory, removed at the end).")
    parser.add_argument('--drain', action='store_true',
                        help="Run the drain showcase instead: a host "
                             "emptied by a plan that one guest at a time "
                             "would not find.")
    parser.add_argument('--debug', action='store_true',
                        help="Show the services' logs, and the traceback "
                             "if the job cannot run.")
    return parser


def main(argv=None):
    # The job runs the services in this process: choose their backend
    # before anything imports oslo_messaging (numamig._backend).
    _backend.select_threading(strict=True)
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.debug else logging.ERROR,
        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    if args.drain:
        return _drain(args)
    try:
        outcomes, final = _run(args.state_dir)
    except Exception as exc:  # noqa: BLE001 - the job's last resort
        if args.debug:
            traceback.print_exc()
        print(f"error: the main job could not run: {type(exc).__name__}: "
              f"{exc}", file=sys.stderr)
        return EXIT_UNEXPECTED
    from numamig.showcase import job
    if args.output_format == 'json':
        print(json.dumps(job_json(outcomes), indent=2, sort_keys=True))
    else:
        print('\n'.join(job.render(outcomes, final)))
    return common.EXIT_OK if all(o.passed for o in outcomes) \
        else common.EXIT_NO


def _drain(args):
    """The drain showcase (numamig.showcase.drain_job)."""
    from numamig.conf import CONF
    from numamig.showcase import drain_job
    CONF([], project='numamig', default_config_files=[])
    try:
        with tempfile.TemporaryDirectory(prefix='numamig-drain-') as tmp:
            outcome = drain_job.run(state_dir=args.state_dir or tmp)
    except Exception as exc:  # noqa: BLE001 - the job's last resort
        if args.debug:
            traceback.print_exc()
        print(f"error: the drain showcase could not run: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_UNEXPECTED
    if args.output_format == 'json':
        print(json.dumps({
            'passed': outcome.passed, 'drain': outcome.drain,
            'checks': [c._asdict() for c in outcome.checks]},
            indent=2, sort_keys=True, default=str))
    else:
        print('\n'.join(drain_job.render(outcome)))
    return common.EXIT_OK if outcome.passed else common.EXIT_NO


def _run(state_dir):
    from numamig.conf import CONF
    from numamig.showcase import job
    # No configuration file: the embedded job must behave the same on any
    # machine, whatever /etc/numamig holds.
    CONF([], project='numamig', default_config_files=[])
    if state_dir:
        return job.run(state_dir=state_dir)
    with tempfile.TemporaryDirectory(prefix='numamig-main-') as tmp:
        return job.run(state_dir=tmp)


def job_json(outcomes):
    """The outcomes as a JSON-ready dict (for --format json)."""
    from numamig.showcase import job
    return {
        'verdict': job.verdict(outcomes),
        'passed': all(o.passed for o in outcomes),
        'scenarios': [{
            'number': o.scenario.number, 'title': o.scenario.title,
            'guest': o.scenario.mover, 'source': o.before.host,
            'dest': o.scenario.dest, 'status': o.migration.status,
            'before': common.plain(o.before.numa_topology),
            'after': common.plain(o.after.numa_topology),
            'checks': [c._asdict() for c in o.checks],
            'passed': o.passed} for o in outcomes],
    }


if __name__ == '__main__':
    sys.exit(main())
