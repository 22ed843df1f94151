"""numamig-status: is this deployment ready for NUMA-aware live migration?

``numamig-status upgrade check [--json]`` runs the checks of
numamig.upgradecheck through oslo.upgradecheck, so its table and its JSON
(``{"name": ..., "checks": [{"check", "result", "details"}]}``, result
0/1/2) are what deployment tooling parses for every OpenStack service.
Exit codes: 0 every check succeeded, 1 at least one warning, 2 at least
one failure, 255 a check could not run at all (a bug), the
configuration cannot be read or the command line is wrong; each of the
last three is one line on standard error, never a traceback. (argparse
answers a bad command line with 2, which would read as "not ready".)
"""

import contextlib
import io
import sys

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from numamig import _backend
from numamig.cmd import common
from numamig.conf import CONF

EXIT_UNEXPECTED = 255
_VERDICTS = {0: "ready", 1: "ready, with warnings", 2: "NOT ready"}


class UpgradeCommands(upgradecheck.UpgradeCommands):
    """Checks to run before and after upgrading numamig.

    Reads the database named by [database] connection and this node's
    configuration; changes nothing.
    """

    display_title = 'numamig upgrade check'

    def __init__(self, conf):
        self.conf = conf
        self.sources = None

    def check(self):
        # oslo.upgradecheck takes any word after 'upgrade' for 'check'.
        if self.conf.command.check != 'check':
            return common.fail(
                f"unknown action {self.conf.command.check!r} of "
                f"'upgrade'; the only one is 'check'", EXIT_UNEXPECTED,
                'json' if self.conf.command.json else None)
        # Imported here: the checks load the versioned objects and
        # oslo.messaging, which --help does not need.
        from numamig.db import api
        from numamig.upgradecheck import checks
        self.sources = checks.Sources(
            lambda: api.Database.from_config(self.conf, existing=True))
        self._upgrade_checks = tuple(
            (title, _bound(check)) for title, check in checks.CHECKS)
        try:
            code = super().check()
        except Exception as exc:  # noqa: BLE001 - the contract's 255
            return common.fail(
                f"unexpected {type(exc).__name__}: {exc}", EXIT_UNEXPECTED,
                'json' if self.conf.command.json else None)
        finally:
            self.sources.close()
        if not self.conf.command.json:
            print(f"Result: {_VERDICTS[code]} for NUMA-aware live "
                  f"migration.")
        return code


def _bound(check):
    """oslo.upgradecheck calls ``check(commands)``; numamig's checks take
    the configuration and the sources."""
    return lambda commands: check(commands.conf, commands.sources)


def main(argv=None):
    _backend.for_command_line()
    argv = sys.argv[1:] if argv is None else argv
    commands = UpgradeCommands(CONF)
    output_format = 'json' if '--json' in argv else None
    # argparse's usage text is held back: a bad command line is one line.
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            code = upgradecheck.main(
                CONF, 'numamig', commands, argv=argv,
                default_config_files=cfg.find_config_files(
                    project='numamig'))
        sys.stderr.write(said.getvalue())
        return code
    except cfg.Error as exc:
        sys.stderr.write(said.getvalue())
        return common.fail(exc, EXIT_UNEXPECTED, output_format)
    except SystemExit as exc:
        if exc.code in (0, None):  # --help, --version
            sys.stderr.write(said.getvalue())
            raise
        last = (said.getvalue().strip().splitlines() or ['bad usage'])[-1]
        return common.fail(
            f"{last.split(': error: ', 1)[-1]} (usage: numamig-status "
            f"[--config-file PATH] upgrade check [--json])",
            EXIT_UNEXPECTED, output_format)
    finally:
        # Leave CONF as found, so that main() can run again in a process.
        # oslo.upgradecheck keeps its sub-command option to itself; it is
        # found by the name it registers.
        CONF.reset()
        registered = CONF._opts.get('command')
        if registered is not None:
            CONF.unregister_opt(registered['opt'])
        if argv is sys.argv[1:]:  # the console script's process ends here
            common.leave_objects_to_exit()


if __name__ == '__main__':
    sys.exit(main())
