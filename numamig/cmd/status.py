"""numamig-status: is this deployment ready for NUMA-aware live migration?

``numamig-status upgrade check`` runs the checks of numamig.upgradecheck
and prints one result per check. Exit codes (nova-status's contract):
0 every check succeeded, 1 at least one warning, 2 at least one failure,
255 a check could not run at all (a bug).
"""

import sys

from oslo_config import cfg

from numamig import _backend
from numamig.cmd import common
from numamig.conf import CONF

EXIT_UNEXPECTED = 255


class UpgradeCommands:
    """Checks to run before and after upgrading numamig."""

    @common.format_option
    def check(self, output_format='human'):
        """Check the schema, compute versions, RPC caps and configuration.

        Reads the database named by [database] connection and this node's
        configuration; changes nothing. Exit codes: 0 all checks passed;
        1 warnings (NUMA-aware live migration works but something is
        degraded or capped); 2 failures (act before relying on it);
        255 a check could not run (a bug).
        """
        # Imported here: the checks load the versioned objects and
        # oslo.messaging, which --help does not need.
        from numamig.db import api
        from numamig.upgradecheck import checks
        sources = checks.Sources(lambda: api.Database.from_config(CONF))
        try:
            results = checks.run(CONF, sources)
        finally:
            sources.close()
        data = {'checks': [{'check': title, 'result': r.name.lower(),
                            'code': r.code, 'details': r.details}
                           for title, r in results],
                'code': checks.worst(results)}
        common.print_output(data, output_format, _print_human)
        return data['code']


CATEGORIES = {'upgrade': UpgradeCommands}


def _print_human(data):
    width = max(len(c['check']) for c in data['checks'])
    print("numamig upgrade check")
    print("=" * 21)
    for entry in data['checks']:
        print(f"{entry['check']:<{width}}  {entry['result'].upper()}")
        if entry['details']:
            print(f"{'':<{width}}  {entry['details']}")
    verdict = {0: "ready", 1: "ready, with warnings",
               2: "NOT ready"}[data['code']]
    print(f"\nResult: {verdict} for NUMA-aware live migration.")


def main(argv=None):
    _backend.for_command_line()
    category_opt = cfg.SubCommandOpt(
        'category', title='Command categories', help='Available categories',
        handler=common.add_command_parsers(CATEGORIES))
    CONF.register_cli_opt(category_opt)
    try:
        return _run(sys.argv[1:] if argv is None else argv)
    finally:
        # Leave CONF as found, so that main() can run again in a process.
        CONF.reset()
        CONF.unregister_opt(category_opt)
        if argv is None:  # the console script's process ends here
            common.leave_objects_to_exit()


def _run(argv):
    try:
        CONF(argv, project='numamig',
             default_config_files=cfg.find_config_files(project='numamig'))
    except cfg.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNEXPECTED
    fn = CONF.category.action_fn
    kwargs = common.action_kwargs(CONF.category)
    try:
        return fn(CONF.category.category_class(), **kwargs)
    except Exception as exc:  # noqa: BLE001 - the contract's 255
        print(f"unexpected error: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return EXIT_UNEXPECTED


if __name__ == '__main__':
    sys.exit(main())
