"""numamig-manage: operator commands, as ``numamig-manage CATEGORY ACTION``.

Each category is a class in ``numamig/cmd/manage_commands/``; its public
methods are the actions. Exit codes (numamig.cmd.common): 0 success or
nothing found, 1 a "no" answer, 3 problems found, 4 healed, 127 bad input
(nothing changed), 255 unexpected error.
"""

import importlib
import sys

from oslo_config import cfg

from numamig.cmd import common
from numamig.conf import CONF

# category -> "module:Class" under numamig.cmd.manage_commands. Imported
# lazily so that one category's heavy imports do not slow the others.
CATEGORY_PATHS = {
    'numa': 'numa:NumaCommands',
    'db': 'db:DbCommands',
    'host': 'host:HostCommands',
    'instance': 'instance:InstanceCommands',
    'migration': 'migration:MigrationCommands',
    'audit': 'audit:AuditCommands',
    'heal': 'heal:HealCommands',
}


def _load_categories():
    categories = {}
    for name, path in CATEGORY_PATHS.items():
        module_name, _, cls = path.partition(':')
        module = importlib.import_module(
            f'numamig.cmd.manage_commands.{module_name}')
        categories[name] = getattr(module, cls)
    return categories


def main(argv=None):
    categories = _load_categories()
    category_opt = cfg.SubCommandOpt(
        'category', title='Command categories',
        help='Available categories',
        handler=common.add_command_parsers(categories))
    CONF.register_cli_opt(category_opt)
    try:
        return _run(category_opt, sys.argv[1:] if argv is None else argv)
    finally:
        # Leave CONF as found, so that main() can run again in one process
        # (tests, the embedded job).
        CONF.reset()
        CONF.unregister_opt(category_opt)


def _run(category_opt, argv):
    try:
        CONF(argv, project='numamig',
             default_config_files=_default_config_files())
    except cfg.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return common.EXIT_BAD_INPUT
    fn = CONF.category.action_fn
    kwargs = common.action_kwargs(CONF.category)
    try:
        return fn(CONF.category.category_class(), **kwargs) or 0
    except Exception as exc:  # noqa: BLE001 - the CLI's last resort
        print(f"unexpected error: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return common.EXIT_UNEXPECTED


def _default_config_files():
    # Read /etc/numamig/numamig.conf when it exists; a missing file is fine
    # for actions that need no configuration (numa fit).
    return cfg.find_config_files(project='numamig')


if __name__ == '__main__':
    sys.exit(main())
