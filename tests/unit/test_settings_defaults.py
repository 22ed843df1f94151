"""A configuration default lives in one place: its option in numamig/conf.

The services used to restate their options' defaults (a settings dict of
defaults, dataclass field defaults, ``settings.get(name, default)``,
keyword defaults of the managers), and tests built from those ran with
other values than production. The services now build one frozen
settings object from CONF. This test fails when a default comes back
outside numamig/conf: a parameter default, a class field default, a
``.get(name, default)`` or a ``DEFAULT_<NAME>`` constant whose name is an
option's or a settings field's, in the modules that build and run the
services and in those of the libvirt driver's settings; and when a
settings class declares a default. ``None`` (not given) is not a
default.
"""

import ast
import dataclasses
import os

import numamig
from numamig.compute import settings as compute_settings
from numamig.conductor import settings as conductor_settings
from numamig.conf import opts
from numamig.convergence import recovery
from numamig.virt.libvirt import guard
from numamig.virt.libvirt import settings as lv_settings
from tests import base

_PACKAGE = os.path.dirname(numamig.__file__)
# The modules that build and run the services, and those holding the
# libvirt driver's settings.
SCANNED = ('service.py', 'embedded.py', 'conductor', 'compute',
           'scheduler/scheduler.py', 'virt/libvirt/settings.py',
           'virt/libvirt/guard.py', 'convergence/recovery.py')
SETTINGS_CLASSES = (conductor_settings.ConductorSettings,
                    compute_settings.ComputeSettings,
                    compute_settings.CPUPowerSettings,
                    lv_settings.LibvirtSettings, lv_settings.MigrationSettings,
                    guard.GuardSettings, recovery.Settings)
# (module, name): why a default there is not a restated one.
ALLOWED = {
    ('embedded.py', 'report_interval'):
        "the embedded tier's own pace (its tests ask for reports when "
        "they need them), deliberately slower than a daemon's",
    ('embedded.py', 'reserved_host_memory_mb'):
        "a test-driver host has no host OS to keep memory for",
    ('embedded.py', 'virt_type'):
        "an embedded host on a real libvirtd runs TCG guests, which every "
        "machine can run; a daemon's default is KVM",
    ('embedded.py', 'sqlite_synchronous'):
        "the embedded tier's database lives as long as its test run "
        "(EmbeddedDeployment's docstring)",
    ('service.py', 'workers'):
        "run()'s number of processes as its caller resolved it, not "
        "[conductor] workers (unset: one per CPU, resolved by "
        "numamig.cmd.conductor)",
}


# Settings fields no option sets, with the default they keep.
NOT_OPTIONS = {(guard.GuardSettings, 'python'): 'this interpreter'}


def setting_names():
    """Every numamig option's name and every settings field's name."""
    names = {opt.dest for _group, group_opts in opts.list_opts()
             for opt in group_opts}
    for cls in SETTINGS_CLASSES:
        names.update(field.name for field in dataclasses.fields(cls)
                     if (cls, field.name) not in NOT_OPTIONS)
    names.update(conductor_settings.VirtioMemSettings._fields)
    return names


def _is_default(node):
    return node is not None and not (
        isinstance(node, ast.Constant) and node.value is None)


def restated_defaults(tree, names):
    """(line, name, default source) of every default ``tree`` gives a
    name of ``names``."""
    found = []

    def add(node, name, default):
        if name in names and _is_default(default):
            found.append((node.lineno, name, ast.unparse(default)))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(
                    positional[len(positional) - len(args.defaults):],
                    args.defaults, strict=True):
                add(arg, arg.arg, default)
            for arg, default in zip(args.kwonlyargs, args.kw_defaults,
                                    strict=True):
                add(arg, arg.arg, default)
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and \
                        isinstance(stmt.target, ast.Name):
                    add(stmt, stmt.target.id, stmt.value)
        elif isinstance(node, ast.Call) and \
                isinstance(node.func, ast.Attribute) and \
                node.func.attr in ('get', 'setdefault', 'pop') and \
                len(node.args) == 2 and \
                isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            add(node, node.args[0].value, node.args[1])
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and \
                        target.id.startswith('DEFAULT_'):
                    add(stmt, target.id[len('DEFAULT_'):].lower(),
                        stmt.value)
    return found


def _modules():
    for entry in SCANNED:
        path = os.path.join(_PACKAGE, entry)
        if path.endswith('.py'):
            yield path
            continue
        for root, _dirs, files in os.walk(path):
            yield from (os.path.join(root, f) for f in sorted(files)
                        if f.endswith('.py'))


class OneDefaultTest(base.TestCase):

    def test_no_service_module_restates_a_default(self):
        names = setting_names()
        restated = []
        for path in _modules():
            module = os.path.relpath(path, _PACKAGE)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            restated.extend(
                f"numamig/{module}:{line}: {name} = {default}"
                for line, name, default in restated_defaults(tree, names)
                if (module, name) not in ALLOWED)
        self.assertEqual([], restated, "a default restated outside "
                         "numamig/conf; build the value from CONF "
                         "(numamig.service.*_settings_from_conf):\n" +
                         '\n'.join(restated))

    def test_the_settings_have_no_defaults(self):
        for cls in SETTINGS_CLASSES:
            defaulted = [f.name for f in dataclasses.fields(cls)
                         if (f.default is not dataclasses.MISSING or
                             f.default_factory is not dataclasses.MISSING)
                         and (cls, f.name) not in NOT_OPTIONS]
            self.assertEqual([], defaulted, cls.__name__)
        self.assertEqual(
            {}, conductor_settings.VirtioMemSettings._field_defaults)

    def test_each_way_of_restating_is_caught(self):
        source = '''
DEFAULT_MIGRATION_WORKERS = 8
DEFAULT_UNKNOWN = 1


class Worker:
    check_timeout: float = 60
    db: object = None


def start(host, report_interval=10, *, sweep_interval=10, other=3):
    return settings.get('migration_watchers', 16), d.get('x', 1)
'''
        found = restated_defaults(ast.parse(source), setting_names())
        self.assertEqual(
            [('check_timeout', '60'), ('migration_watchers', '16'),
             ('migration_workers', '8'), ('report_interval', '10'),
             ('sweep_interval', '10')],
            sorted((name, default) for _line, name, default in found))

    def test_every_allowance_still_names_a_default(self):
        names = setting_names()
        for module, name in ALLOWED:
            with open(os.path.join(_PACKAGE, module)) as f:
                found = restated_defaults(ast.parse(f.read()), names)
            self.assertIn(name, {n for _line, n, _d in found}, module)
