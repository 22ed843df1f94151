"""numamig-manage: operator commands, as ``numamig-manage CATEGORY ACTION``.

Each category is a class in ``numamig/cmd/manage_commands/``; its public
methods are the actions. Exit codes (numamig.cmd.common): 0 success or
nothing found, 1 a "no" answer, 3 problems found, 4 healed, 127 bad input
(nothing changed), 130 interrupted (Ctrl-C), 255 unexpected error.
"""

import contextlib
import importlib
import io
import sys

from oslo_config import cfg

from numamig import _backend
from numamig import version
from numamig.cmd import common
from numamig.conf import CONF

# category -> ("module:Class" under numamig.cmd.manage_commands, the
# first line of the class's docstring). Only the categories a command
# line names are imported: the others appear in --help by their summary,
# so that one category's imports (the NUMA engine, versioned objects and
# oslo.messaging, lxml) do not slow every other call. A unit test keeps
# the summaries equal to the docstrings.
CATEGORIES = {
    'numa': ('numa:NumaCommands',
             "Offline NUMA placement: dry runs without any service."),
    'db': ('db:DbCommands',
           "Schema of the conductor's database ([database] connection)."),
    'host': ('host:HostCommands',
             "Compute hosts: state, versions, NUMA topology and usage."),
    'instance': ('instance:InstanceCommands',
                 "Guests: create, adopt existing ones, list and show "
                 "placements."),
    'migration': ('migration:MigrationCommands',
                  "Live migrations: start (or dry-run), follow, inspect, "
                  "stop."),
    'audit': ('audit:AuditCommands',
              "Audits of pins and claims against the hosts' domain XML."),
    'heal': ('heal:HealCommands',
             "Repairs of records that outlived what they describe."),
}


def load_category(name):
    """Import and return the class of category ``name``."""
    module_name, _, cls = CATEGORIES[name][0].partition(':')
    module = importlib.import_module(
        f'numamig.cmd.manage_commands.{module_name}')
    return getattr(module, cls)


def _categories_for(argv):
    """{category: class, or its summary where argv does not name it}.

    Any argument equal to a category's name loads it (an option's value
    may be one too: loading a category too many is harmless, and the one
    chosen is always loaded). A shell completion script needs them all.
    """
    named = set(CATEGORIES) if '--shell_completion' in argv else set(argv)
    return {name: load_category(name) if name in named else summary
            for name, (_path, summary) in CATEGORIES.items()}


def main(argv=None):
    """The console script; ``argv`` (tests, the embedded job) keeps the
    process as it was for what runs next in it."""
    _backend.for_command_line()
    console, argv = argv is None, sys.argv[1:] if argv is None else argv
    category_opt = cfg.SubCommandOpt(
        'category', title='Command categories',
        help='Available categories',
        handler=common.add_command_parsers(_categories_for(argv)))
    CONF.register_cli_opt(category_opt)
    try:
        return _run(category_opt, argv)
    finally:
        # Leave CONF as found, so that main() can run again in one process
        # (tests, the embedded job).
        CONF.reset()
        CONF.unregister_opt(category_opt)
        if console:
            common.leave_objects_to_exit()


def _run(category_opt, argv):
    output_format = 'json' if common.wants_json(argv) else None
    try:
        _parse(argv)
    except cfg.Error as exc:
        return common.fail(exc, common.EXIT_BAD_INPUT, output_format)
    except _UsageError as exc:
        return common.fail(exc, common.EXIT_BAD_INPUT, output_format)
    fn = CONF.category.action_fn
    kwargs = common.action_kwargs(CONF.category)
    try:
        return fn(CONF.category.category_class(), **kwargs) or 0
    except KeyboardInterrupt:
        return common.fail("interrupted; anything the command had asked "
                           "the services to do goes on",
                           common.EXIT_INTERRUPTED, output_format)
    except Exception as exc:  # noqa: BLE001 - the CLI's last resort
        return common.fail(f"unexpected {type(exc).__name__}: {exc}",
                           common.EXIT_UNEXPECTED, output_format)


class _UsageError(Exception):
    """A command line argparse refused (unknown action, bad choice)."""


def _parse(argv):
    """Parse the command line; a refused one is one line, exit 127.

    argparse prints its usage and exits 2 on a bad command line, which
    the exit-code contract (and one line per error) do not allow; its
    output is kept for --help and --version, which exit 0.
    """
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            CONF(argv, project='numamig', version=version.version_string(),
                 default_config_files=_default_config_files())
    except SystemExit as exc:
        if exc.code in (0, None):
            sys.stderr.write(said.getvalue())
            raise
        last = (said.getvalue().strip().splitlines() or ['bad usage'])[-1]
        raise _UsageError(last.split(': error: ', 1)[-1]) from None
    sys.stderr.write(said.getvalue())


def _default_config_files():
    # Read /etc/numamig/numamig.conf when it exists; a missing file is fine
    # for actions that need no configuration (numa fit).
    return cfg.find_config_files(project='numamig')


if __name__ == '__main__':
    sys.exit(main())
