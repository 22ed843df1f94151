"""Enforce the package map of doc/source/architecture.rst by walking imports.

``cmd -> {conductor, compute} -> {scheduler, virt, db} -> {numa, objects}
-> conf``: a module may import downwards only. The rules below are the
ones a slip is most likely to break; each names the reason so a failure
says what to do instead. Imports anywhere in a module count, including
those inside functions.
"""

import ast
import os
import textwrap

import fixtures
import testscenarios

import numamig
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

# Standard or third-party modules that mean I/O, configuration or
# non-determinism: none belongs in the pure NUMA engine.
IO_MODULES = ('libvirt', 'sqlalchemy', 'alembic', 'oslo_db',
              'oslo_messaging', 'oslo_config', 'os', 'subprocess', 'socket',
              'shutil', 'pathlib', 'sqlite3', 'urllib', 'http', 'requests',
              'random')


class Rule:
    """What modules under ``subject`` (relative to the package) may import.

    :param allowed_own: if given, the only own-package modules allowed.
    :param forbidden: own-package modules (relative) or external top-level
        modules (absolute names, no package prefix) that are refused.
    """

    def __init__(self, subject, reason, allowed_own=None, forbidden=(),
                 forbidden_external=()):
        self.subject = subject
        self.reason = reason
        self.allowed_own = allowed_own
        self.forbidden = forbidden
        self.forbidden_external = forbidden_external

    def applies_to(self, package, module):
        name = f'{package}.{self.subject}'
        return module == name or module.startswith(name + '.')

    def refuses(self, package, imported):
        """Return True when a subject module must not import ``imported``."""
        own = imported == package or imported.startswith(package + '.')
        if own:
            if _under(imported, [f'{package}.{self.subject}']):
                return False
            if self.allowed_own is not None and not _under(
                    imported, [f'{package}.{m}' for m in self.allowed_own]):
                return True
            return _under(imported, [f'{package}.{m}'
                                     for m in self.forbidden])
        return _under(imported, self.forbidden_external)


def _under(name, prefixes):
    return any(name == p or name.startswith(p + '.') for p in prefixes)


RULES = [
    Rule('numa', 'numa/ is pure: it may use objects, exception, cpuspec '
                 'and pagesize only, and no I/O',
         allowed_own=('objects', 'exception', 'cpuspec', 'pagesize'),
         forbidden_external=IO_MODULES),
    Rule('convergence', 'convergence/ is pure: decisions from job '
                        'statistics, no I/O',
         allowed_own=('exception',), forbidden_external=IO_MODULES),
    Rule('objects', 'objects/ sits below every service package',
         forbidden=('numa', 'virt', 'db', 'compute', 'conductor',
                    'scheduler', 'cmd', 'rpc', 'service')),
    Rule('virt', 'virt/ knows libvirt and XML, nothing of RPC, the '
                 'database or the services',
         forbidden=('db', 'compute', 'conductor', 'rpc', 'cmd', 'service'),
         forbidden_external=('oslo_messaging', 'sqlalchemy')),
    Rule('conf', 'conf/ is the bottom layer',
         allowed_own=('cpuspec', 'pagesize', 'exception')),
    Rule('cpuspec', 'cpuspec is a leaf module', allowed_own=()),
    Rule('cpumodel', 'cpumodel is a leaf module', allowed_own=(),
         forbidden_external=IO_MODULES),
    Rule('pagesize', 'pagesize is a leaf module', allowed_own=()),
    Rule('exception', 'exception is a leaf module', allowed_own=()),
]


# Every package and top-level module of numamig (a "unit"; the two RPC
# client modules and the demo's command are units of their own, since
# the other side and the demo use them) with what it is and the units it
# may import. The map is the design's package map: a new unit fails the
# tests until it is placed here, an import outside the map fails naming
# the line, and the map itself must stay free of cycles.
LAYERS = {
    'exception': ('the error types; a leaf', ()),
    'cpuspec': ('CPU list syntax; a leaf', ()),
    'cpumodel': ('which CPU can run a guest\'s, baselines; pure, a leaf',
                 ()),
    'pagesize': ('page size syntax; a leaf', ()),
    'fingerprint': ('guest-set fingerprints; a leaf', ()),
    'attempts': ('how a request sent again shares its wait; a leaf', ()),
    'context': ('the request context; a leaf', ()),
    'version': ('the package version (pbr); a leaf', ()),
    'broker': ('whether the message broker answers', ('exception',)),
    'filemodes': ('modes of the files numamig writes; a leaf', ()),
    'log_brief': ('peers\' errors logged as their message',
                  ('exception',)),
    'library_notices': ('libraries\' alarming log records dropped or told '
                        'in one line; a leaf', ()),
    '_backend': ('the daemons\' oslo.service backend choice; a leaf', ()),
    'metrics': ('the daemons\' Prometheus endpoint', ('exception',)),
    'notifications': ('versioned notifications: payloads and the '
                      'conductor\'s notifier', ('objects', 'context')),
    'periodic': ('the services\' periodic jobs',
                 ('_backend', 'library_notices')),
    '__init__': ('the package; selects and loads nothing', ()),
    'conf': ('options', ('cpuspec', 'pagesize', 'exception')),
    'objects': ('versioned objects', ('exception', 'cpumodel')),
    'numa': ('the pure NUMA engine',
             ('objects', 'exception', 'cpuspec', 'pagesize')),
    'convergence': ('pure convergence policies, prediction and emulated '
                    'copy', ('exception',)),
    'virt': ('libvirt and domain XML', ('objects', 'exception', 'cpuspec',
                                        'cpumodel', 'convergence',
                                        # The distance table's defaults
                                        # and gaps (numa.distance).
                                        'numa')),
    'db': ('the conductor\'s records',
           ('objects', 'exception', 'filemodes',
            # A drain's turns share the link by the pure rule
            # (convergence.drain_link) inside the transaction that
            # admits the moves.
            'convergence')),
    'wire': ('declared RPC arguments, checked before any work',
             ('objects', 'exception')),
    'rpc': ('transport, serializer, clients',
            ('conf', 'context', 'exception', 'objects', 'library_notices',
             'metrics')),
    'rpc_inproc': ('the in-process transport driver', ()),
    'compute.rpcapi_postcopy': ('the compute client\'s post-copy resume '
                                'calls, mixed into its client',
                                ('exception',)),
    'compute.rpcapi': ('the client of the compute agents\' API',
                       ('rpc', 'exception', 'compute.rpcapi_postcopy',
                        'objects')),
    'conductor.api_versions': ('the conductor APIs\' version histories '
                               'and the objects each carries; a leaf', ()),
    'conductor.rpcclient': ('how a conductor client learns the '
                            'conductor\'s release and routes each API',
                            ('rpc', 'exception', 'conductor.api_versions',
                             'objects', 'context')),
    'conductor.records_rpcapi': ('the client of the agents\' records API',
                                 ('rpc', 'conductor.api_versions',
                                  'conductor.rpcclient')),
    'conductor.direct_rpc': ('the operations API\'s start call spoken '
                             'without oslo.messaging, for the command line',
                             ('broker', 'context', 'exception')),
    'conductor.rpcapi': ('the client of the operators\' operations API',
                         ('exception', 'conductor.api_versions',
                          'conductor.records_rpcapi',
                          'conductor.rpcclient')),
    'releases': ('what each release speaks',
                 ('compute.rpcapi', 'conductor.api_versions', 'rpc',
                  'objects', 'exception')),
    'scheduler': ('destination choice',
                  ('numa', 'fingerprint', 'cpumodel', 'conf', 'exception')),
    'scheduler.stored': ('stored reports built straight into the host '
                         'cache\'s frozen form (the conductor reads them '
                         'back)', ('scheduler', 'objects')),
    'scheduler.migratable': ('every guest\'s standing live-migratable '
                             'answer, kept from a Scheduler it is given; '
                             'pure', ('exception',)),
    'audit': ('pin and usage audits of hypervisors, reports and records',
              ('virt', 'db', 'numa', 'fingerprint', 'cpuspec',
               'exception')),
    'compute': ('the compute agent',
                ('compute.rpcapi', 'releases', 'numa', 'convergence',
                 'fingerprint', 'attempts', 'metrics',
                 'objects', 'context', 'cpuspec', 'exception')),
    'compute.previous_release': ('the flows of the release before, a '
                                 'testing aid; reached only through '
                                 'compute.flows',
                                 ('compute', 'releases')),
    'compute.flows': ('which release\'s flows an agent takes',
                      ('compute', 'compute.previous_release', 'releases')),
    'compute.manager': ('the compute agent\'s RPC endpoints; the flows '
                        'get an Agent, never this',
                        ('compute', 'compute.flows', 'compute.rpcapi',
                         'releases', 'wire', 'objects', 'exception')),
    'compute.metrics': ('the compute agent\'s metrics, from its own '
                        'tracker and domains',
                        ('metrics', 'audit', 'numa', 'compute')),
    'compute.settings': ('the compute agent\'s settings, built from '
                         'configuration', ()),
    'conductor': ('the conductor',
                  ('conductor.api_versions', 'releases', 'db', 'audit', 'numa',
                   'scheduler.migratable', 'scheduler.stored',
                   'convergence', 'attempts', 'metrics',
                   'objects', 'rpc', 'context', 'exception')),
    'conductor.records_manager': ('the conductor\'s records endpoint '
                                  '(the agents\' calls)',
                                  ('conductor', 'conductor.api_versions',
                                   'db', 'wire', 'objects', 'exception')),
    'conductor.manager': ('the conductor\'s operations endpoint and the '
                          'worker behind it; the flows get a Worker, '
                          'never this',
                          ('conductor', 'conductor.records_manager',
                           'conductor.api_versions', 'releases', 'db',
                           'wire', 'objects', 'context', 'exception')),
    'service': ('the daemons: wiring of managers, RPC and periodic work',
                ('compute.manager', 'compute.settings', 'compute.metrics',
                 'conductor.manager',
                 'conductor',
                 'compute.rpcapi', 'conductor.records_rpcapi',
                 'conductor.rpcapi', 'releases', 'scheduler', 'db', 'rpc',
                 'periodic', 'metrics', 'notifications', 'conf', 'context',
                 'objects',
                 'version', 'filemodes', 'log_brief', 'library_notices',
                 'convergence', 'exception')),
    'upgradecheck': ('numamig-status checks',
                     ('compute.rpcapi', 'conductor.api_versions', 'db',
                      'conf',
                      'objects', 'exception')),
    'embedded': ('a whole deployment in one process',
                 ('service', 'db', 'virt', 'rpc', 'conf',
                  'context', 'objects', 'exception')),
    'cmd': ('the operators\' commands (not the demo)',
            ('upgradecheck', 'service', 'broker', 'metrics', 'version',
             'scheduler',
             'audit', 'conductor.rpcapi', 'conductor.direct_rpc', 'db', 'virt',
             'numa', 'convergence',
             'rpc', 'conf', 'cpumodel',
             'context', 'objects', 'cpuspec', 'exception', '_backend',
             # The driver's reconnect attempts kept off the terminal.
             'library_notices')),
    'showcase': ('the demo', ('cmd', 'embedded', 'audit', 'virt', 'objects',
                              'cpuspec')),
    'cmd.embedded': ('the demo\'s command',
                     ('showcase', 'cmd', 'conf', '_backend')),
}


# The numamig units the third-party CI harness (the numamig_ci package,
# a distribution of its own) drives; numamig itself never imports the
# harness, and neither imports the tests' aids (tests/: fixtures, crash
# emulation), which no distribution installs.
HARNESS_USES = ('embedded', 'service', 'db', 'virt', 'numa', 'rpc', 'conf',
                'context', 'objects', 'cpuspec', 'exception', '_backend',
                'filemodes',
                # The CPU baseline the nested CPU scenario gives its guest
                # (what numamig-manage host cpu-baseline computes).
                'cpumodel')


def harness_violations(root):
    """Imports crossing the runtime/harness border the wrong way."""
    found = []
    for package, refused in (('numamig', lambda i: _under(
                                 i, ['numamig_ci', 'tests'])),
                             ('numamig_ci', lambda i: _under(i, ['tests']) or
                              i.startswith('numamig.') and
                              unit_of('numamig', i) not in HARNESS_USES)):
        for directory, _dirs, files in os.walk(os.path.join(root, package)):
            for filename in sorted(f for f in files if f.endswith('.py')):
                path = os.path.join(directory, filename)
                found.extend(
                    f'{os.path.relpath(path, root)}:{line}: imports '
                    f'{imported}' for line, imported in imports_of(root, path)
                    if refused(imported))
    return sorted(found)


def unit_of(package, module):
    """The LAYERS unit a dotted module name belongs to."""
    rel = module[len(package) + 1:] if module != package else '__init__'
    finer = [u for u in LAYERS if '.' in u and
             (rel == u or rel.startswith(u + '.'))]
    return finer[0] if finer else rel.split('.')[0]


def map_violations(root, package, layers=LAYERS):
    """'path:line: unit A imports unit B' for every import the map
    does not allow, and 'path: unit A is not in the map' for new units."""
    found = []
    for directory, _dirs, files in os.walk(os.path.join(root, package)):
        for filename in sorted(files):
            if not filename.endswith('.py'):
                continue
            path = os.path.join(directory, filename)
            rel_path = os.path.relpath(path, root)
            here = unit_of(package, module_name(root, path))
            if here not in layers:
                found.append(f'{rel_path}: unit {here} is not in LAYERS')
                continue
            for line, imported in imports_of(root, path):
                if not imported.startswith(package + '.'):
                    continue
                there = unit_of(package, imported)
                if there != here and there not in layers[here][1]:
                    found.append(f'{rel_path}:{line}: {here} '
                                 f'({layers[here][0]}) may not import '
                                 f'{imported} ({there})')
    return sorted(found)


def map_cycle(layers=LAYERS):
    """A cycle in the map as a list of units, or None."""
    state = {}

    def visit(unit, path):
        state[unit] = 'open'
        for dep in layers.get(unit, ('', ()))[1]:
            if state.get(dep) == 'open':
                return path[path.index(dep):] + [dep] if dep in path \
                    else [unit, dep]
            if dep not in state:
                cycle = visit(dep, path + [dep])
                if cycle:
                    return cycle
        state[unit] = 'done'
        return None

    for unit in sorted(layers):
        if unit not in state:
            cycle = visit(unit, [unit])
            if cycle:
                return cycle
    return None


def module_name(root, path):
    rel = os.path.relpath(path, root)[:-len('.py')]
    parts = rel.split(os.sep)
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts)


def _is_module(root, dotted):
    base_path = os.path.join(root, *dotted.split('.'))
    return os.path.isdir(base_path) or os.path.isfile(base_path + '.py')


def imports_of(root, path):
    """Yield (line, module) for every import in the file at ``path``."""
    module = module_name(root, path)
    is_package = path.endswith('__init__.py')
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _resolve_from(module, is_package, node)
            for alias in node.names:
                candidate = f'{source}.{alias.name}'
                # "from pkg import mod" imports the module pkg.mod.
                yield node.lineno, (candidate if _is_module(root, candidate)
                                    else source)


def _resolve_from(module, is_package, node):
    if not node.level:
        return node.module
    parts = module.split('.')
    if not is_package:
        parts = parts[:-1]
    parts = parts[:len(parts) - node.level + 1]
    return '.'.join(parts + ([node.module] if node.module else []))


def find_violations(root, package, rules=RULES):
    """Return 'path:line: module imports X (reason)' for every violation."""
    found = []
    for directory, _dirs, files in os.walk(os.path.join(root, package)):
        for filename in sorted(files):
            if not filename.endswith('.py'):
                continue
            path = os.path.join(directory, filename)
            module = module_name(root, path)
            rules_here = [r for r in rules if r.applies_to(package, module)]
            for line, imported in imports_of(root, path):
                for rule in rules_here:
                    if rule.refuses(package, imported):
                        found.append(
                            f'{os.path.relpath(path, root)}:{line}: '
                            f'{module} imports {imported} ({rule.reason})')
    return sorted(found)


class LayeringTest(base.TestCase):

    def test_numamig_respects_the_layers(self):
        root = os.path.dirname(os.path.dirname(numamig.__file__))
        violations = find_violations(root, 'numamig')
        self.assertEqual([], violations, '\n'.join(violations))

    def test_the_harness_stays_outside_the_runtime(self):
        root = os.path.dirname(os.path.dirname(numamig.__file__))
        violations = harness_violations(root)
        self.assertEqual([], violations, '\n'.join(violations))

    def test_numamig_follows_the_package_map(self):
        root = os.path.dirname(os.path.dirname(numamig.__file__))
        violations = map_violations(root, 'numamig')
        self.assertEqual([], violations, '\n'.join(violations))

    def test_every_module_logs_through_oslo_log(self):
        # The two tools that configure stdlib handlers for a terminal
        # (not daemons: oslo.log's setup does not apply) may import it,
        # library_notices, to filter libraries' loggers oslo.log cannot
        # name, and log_brief, a filter on the handlers oslo.log made
        # (it has no filter API of its own).
        allowed = {'numamig_ci/cmd.py', 'numamig/cmd/embedded.py',
                   'numamig/library_notices.py', 'numamig/log_brief.py'}
        root = os.path.dirname(os.path.dirname(numamig.__file__))
        found = []
        for package in ('numamig', 'numamig_ci'):
            for directory, _dirs, files in os.walk(os.path.join(root,
                                                                package)):
                for filename in files:
                    path = os.path.join(directory, filename)
                    rel = os.path.relpath(path, root)
                    if filename.endswith('.py') and rel not in allowed:
                        found += [f'{rel}:{line}' for line, name
                                  in imports_of(root, path)
                                  if name == 'logging']
        self.assertEqual([], found, "use: from oslo_log import log as "
                                    "logging")

    def test_the_package_map_has_no_cycle(self):
        self.assertIsNone(map_cycle())

    def test_the_package_map_names_only_units(self):
        for unit, (_what, allowed) in LAYERS.items():
            self.assertLessEqual(set(allowed), set(LAYERS), unit)


SYNTHETIC_TREE = ('pkg/__init__.py', 'pkg/exception.py', 'pkg/cpuspec.py',
                  'pkg/rpc.py', 'pkg/numa/__init__.py',
                  'pkg/objects/__init__.py', 'pkg/objects/base.py',
                  'pkg/virt/__init__.py', 'pkg/db/__init__.py',
                  'pkg/db/api.py', 'pkg/compute/__init__.py',
                  'pkg/conf/__init__.py')


class CheckerTest(base.TestCase):
    """The checker itself, on a synthetic package: one row per violation."""

    scenarios = [
        ('numa_imports_db',
         {'module': 'pkg/numa/fit.py', 'source': 'from pkg.db import api\n',
          'imported': 'pkg.db.api'}),
        ('numa_imports_os',
         {'module': 'pkg/numa/fit.py', 'source': 'import os.path\n',
          'imported': 'os.path'}),
        ('numa_imports_oslo_config_lazily',
         {'module': 'pkg/numa/fit.py',
          'source': 'def f():\n    from oslo_config import cfg\n',
          'imported': 'oslo_config'}),
        ('numa_relative_import_of_virt',
         {'module': 'pkg/numa/fit.py', 'source': 'from .. import virt\n',
          'imported': 'pkg.virt'}),
        ('numa_imports_package_rpc',
         {'module': 'pkg/numa/fit.py', 'source': 'from pkg import rpc\n',
          'imported': 'pkg.rpc'}),
        ('objects_imports_numa',
         {'module': 'pkg/objects/host.py', 'source': 'from pkg import numa\n',
          'imported': 'pkg.numa'}),
        ('objects_imports_compute',
         {'module': 'pkg/objects/host.py', 'source': 'import pkg.compute\n',
          'imported': 'pkg.compute'}),
        ('virt_imports_rpc',
         {'module': 'pkg/virt/driver.py', 'source': 'from pkg import rpc\n',
          'imported': 'pkg.rpc'}),
        ('virt_imports_db',
         {'module': 'pkg/virt/driver.py', 'source': 'import pkg.db.api\n',
          'imported': 'pkg.db.api'}),
        ('virt_imports_oslo_messaging',
         {'module': 'pkg/virt/driver.py',
          'source': 'import oslo_messaging as messaging\n',
          'imported': 'oslo_messaging'}),
        ('conf_imports_objects',
         {'module': 'pkg/conf/compute.py',
          'source': 'from pkg.objects import base\n',
          'imported': 'pkg.objects.base'}),
    ]

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        for rel in SYNTHETIC_TREE:
            self.write(rel, '')

    def write(self, rel, source):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write(textwrap.dedent(source))

    def test_violation_found(self):
        self.write(self.module, self.source)
        violations = find_violations(self.root, 'pkg')
        self.assertEqual(1, len(violations), violations)
        self.assertIn(f'imports {self.imported} (', violations[0])
        self.assertTrue(violations[0].startswith(self.module + ':'),
                        violations[0])


class PackageMapCheckerTest(base.TestCase):
    """The map checks themselves, on a synthetic package."""

    LAYERS = {'low': ('a leaf', ()), 'high': ('above low', ('low',)),
              '__init__': ('the package', ())}

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        for rel in ('pkg/__init__.py', 'pkg/low.py', 'pkg/high/__init__.py'):
            CheckerTest.write(self, rel, '')

    def test_allowed_import_passes(self):
        CheckerTest.write(self, 'pkg/high/a.py', 'from pkg import low\n')
        self.assertEqual([], map_violations(self.root, 'pkg', self.LAYERS))

    def test_upward_import_refused(self):
        CheckerTest.write(self, 'pkg/low.py',
                          'def f():\n    from pkg.high import a\n')
        found = map_violations(self.root, 'pkg', self.LAYERS)
        self.assertEqual(1, len(found), found)
        self.assertIn('pkg/low.py:2: low (a leaf) may not import '
                      'pkg.high (high)', found[0])

    def test_unit_missing_from_the_map(self):
        CheckerTest.write(self, 'pkg/new.py', '')
        self.assertEqual(['pkg/new.py: unit new is not in LAYERS'],
                         map_violations(self.root, 'pkg', self.LAYERS))

    def test_cycle_found(self):
        layers = dict(self.LAYERS, low=('a leaf', ('high',)))
        self.assertEqual(['high', 'low', 'high'], map_cycle(layers))


class CheckerAllowsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        for rel in SYNTHETIC_TREE:
            CheckerTest.write(self, rel, '')

    def test_allowed_imports_pass(self):
        CheckerTest.write(self, 'pkg/numa/fit.py', (
            'import itertools\n'
            'from pkg import exception\n'
            'from pkg.objects import base\n'
            'from pkg import cpuspec\n'
            'from pkg.numa import pages\n'
            'from . import fit\n'))
        CheckerTest.write(self, 'pkg/virt/driver.py',
                          'import lxml\nfrom pkg import objects\n')
        CheckerTest.write(self, 'pkg/compute/manager.py',
                          'from pkg import rpc\nfrom pkg.db import api\n')
        self.assertEqual([], find_violations(self.root, 'pkg'))
