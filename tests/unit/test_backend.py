"""numamig._backend: who chooses oslo.service's backend, and when.

Each case runs in a fresh interpreter: the test process itself chose the
threading backend (tests/__init__.py) and loaded eventlet long ago.
"""

import json
import os
import subprocess
import sys
import textwrap

from tests import base

# Printed by every probe: what the process loaded and chose.
REPORT = textwrap.dedent('''
    import json, sys
    backend = sys.modules.get('oslo_service.backend')
    kind = backend and backend.get_backend_type()
    print(json.dumps({
        'backend': kind.value if kind else None,
        'eventlet': sys.modules.get('eventlet') is not None,
        'oslo_messaging': 'oslo_messaging' in sys.modules,
        'loaded': sorted(m for m in sys.modules if m.startswith('numamig'))}))
''')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def probe(code):
    """Run ``code`` then REPORT in a new interpreter; return the report."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run(
        [sys.executable, '-c', textwrap.dedent(code) + REPORT], env=env,
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    if done.returncode != 0:
        raise AssertionError(f"probe failed ({done.returncode}): "
                             f"{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_main(module, argv):
    """Code running ``numamig.cmd.<module>.main(argv)`` (it may exit)."""
    return f'''
        import contextlib, io
        from numamig.cmd import {module} as cmd
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                cmd.main({argv!r})
            except SystemExit:
                pass
    '''


class PackageImportTestCase(base.TestCase):

    def test_import_numamig_chooses_nothing(self):
        found = probe('import numamig')
        self.assertEqual((None, False, False), (
            found['backend'], found['eventlet'], found['oslo_messaging']))


class DaemonsTestCase(base.TestCase):
    """The daemons choose threading before oslo_messaging is imported
    (strictly: had it come first, main() would have raised)."""

    def test_daemons_run_on_threading(self):
        for module in ('conductor', 'compute', 'embedded'):
            found = probe(run_main(module, ['--help']))
            self.assertEqual('threading', found['backend'], module)

    def test_daemons_do_not_load_eventlet(self):
        # What a started daemon imports, with the main()s' preparation.
        found = probe('''
            from numamig import _backend
            _backend.for_daemon()
            import numamig.service, numamig.conductor.manager
            import numamig.compute.manager
        ''')
        self.assertEqual(('threading', False, True), (
            found['backend'], found['eventlet'], found['oslo_messaging']))


class CommandLineTestCase(base.TestCase):

    def test_manage_help_loads_no_category_nor_rpc(self):
        found = probe(run_main('manage', ['--help']))
        self.assertFalse(found['eventlet'])
        self.assertFalse(found['oslo_messaging'])
        self.assertEqual([], [m for m in found['loaded']
                              if 'manage_commands.' in m])

    def test_status_help_loads_no_rpc(self):
        found = probe(run_main('status', ['--help']))
        self.assertEqual((None, False, False), (
            found['backend'], found['eventlet'], found['oslo_messaging']))

    def test_rpc_after_for_command_line_is_threading_without_eventlet(self):
        found = probe('''
            from numamig import _backend
            _backend.for_command_line()
            from numamig import rpc
        ''')
        self.assertEqual(('threading', False, True), (
            found['backend'], found['eventlet'], found['oslo_messaging']))

    def test_explicit_choice_wins_over_the_command_line_default(self):
        found = probe('''
            from numamig import _backend
            _backend.for_command_line()
            _backend.select_threading(strict=True)
            import oslo_messaging
        ''')
        self.assertEqual('threading', found['backend'])

    def test_eventlet_loaded_already_stays(self):
        found = probe('''
            import eventlet
            from numamig import _backend
            _backend.hide_eventlet()
        ''')
        self.assertTrue(found['eventlet'])


# Whether a module deferred by _backend.defer has run yet (a deferred
# one is a LazyLoader module until first used).
LOADED = textwrap.dedent('''
    import types
    def ran(name):
        module = sys.modules.get(name)
        return module is not None and type(module) is types.ModuleType
''')


class DeferTestCase(base.TestCase):
    """_backend.defer and without_yaml: a command line does not pay for
    what a library does at import time for features it never uses."""

    def test_command_line_defers_strutils_until_used(self):
        found = run_probe('''
            import sys
            from numamig import _backend
            _backend.for_command_line()
            from oslo_versionedobjects import fields
            before = ran('oslo_utils.strutils')
            # Used: loaded then, and works as ever.
            parsed = fields.FlexibleBoolean().coerce(None, 'b', 'yes')
            extra = {'before': before, 'parsed': parsed,
                     'after': ran('oslo_utils.strutils')}
        ''')
        self.assertEqual({'before': False, 'parsed': True, 'after': True},
                         found)

    def test_a_module_loaded_already_stays(self):
        found = run_probe('''
            import sys
            from oslo_utils import strutils
            from numamig import _backend
            _backend.defer('oslo_utils.strutils')
            extra = {'same': sys.modules['oslo_utils.strutils'] is strutils,
                     'ran': ran('oslo_utils.strutils')}
        ''')
        self.assertEqual({'same': True, 'ran': True}, found)

    def test_kombu_without_yaml(self):
        found = run_probe('''
            import sys
            from numamig import _backend
            with _backend.without_yaml():
                from kombu import serialization
            during = 'yaml' in sys.modules and sys.modules['yaml'] is not None
            body = serialization.dumps({'a': 1}, serializer='json')
            import yaml
            extra = {'during': during, 'json': body[2],
                     'yaml_after': yaml.safe_load('a: 1')}
        ''')
        self.assertEqual({'during': False, 'json': '{"a": 1}',
                          'yaml_after': {'a': 1}}, found)

    def test_yaml_loaded_already_stays(self):
        found = run_probe('''
            import sys
            import yaml
            from numamig import _backend
            with _backend.without_yaml():
                import kombu.serialization
            extra = {'same': sys.modules['yaml'] is yaml}
        ''')
        self.assertEqual({'same': True}, found)


def run_probe(code):
    """Run ``code`` (which sets ``extra``) in a new interpreter; return
    ``extra``."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    script = LOADED + textwrap.dedent(code) + '\nimport json\n' \
        'print(json.dumps(extra))\n'
    done = subprocess.run([sys.executable, '-c', script], env=env,
                          capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    if done.returncode != 0:
        raise AssertionError(f"probe failed ({done.returncode}): "
                             f"{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
