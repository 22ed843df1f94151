"""numamig.rpc's one write into another library, held to that library.

oslo.messaging has no option for the first slice its AMQP pollers wait
in, so numamig.rpc._calm_amqp_polling raises a private constant of its
driver (doc/source/control-plane.rst says what that saves). These tests
read the installed library's own code and fail when the workaround would
silently stop working or start doing something else: the constant gone
or renamed, its default changed, or the driver reading it other than at
each wait. Then look again at the workaround and at oslo.messaging's
upper bound in requirements.txt, which pins the versions checked here.
"""

import ast
import importlib.metadata as md
import inspect
import os

import fixtures
from oslo_messaging._drivers import amqpdriver
from packaging import requirements as pkg_requirements
from packaging import version as pkg_version

import numamig
from numamig import rpc
from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(numamig.__file__)))
# Where the driver reads the constant, each time one of its pollers (the
# RPC listener, the reply waiter, the acknowledgement thread at stop)
# starts or restarts a wait.
READ_AT_EACH_WAIT = {'MessageOperationsHandler._process_in_background',
                     'AMQPListener.__init__', 'AMQPListener.poll',
                     'ReplyWaiter.poll'}
# The library's value, the 1 ms slices measured in doc/source/
# control-plane.rst.
LIBRARY_DEFAULT_S = 0.001


def _pinned_requirement(name):
    with open(os.path.join(ROOT, 'requirements.txt'),
              encoding='utf-8') as handle:
        for line in handle:
            line = line.split('#', 1)[0].strip()
            if line and pkg_requirements.Requirement(line).name == name:
                return pkg_requirements.Requirement(line)
    raise AssertionError(f"{name} is not in requirements.txt")


def _reads(tree, name):
    """(qualified function name, whether in a default argument) for each
    read of module global ``name``; '' for module or class level."""
    found = []

    def visit(node, scope, in_default=False):
        if isinstance(node, ast.Name) and node.id == name and \
                isinstance(node.ctx, ast.Load):
            found.append((scope, in_default))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for default in node.args.defaults + [
                    d for d in node.args.kw_defaults if d is not None]:
                visit(default, scope, in_default=True)
            inner = f'{scope}.{node.name}' if scope else node.name
            for child in node.body:
                visit(child, inner)
            return
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                visit(child, node.name)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, scope, in_default)

    visit(tree, '')
    return found


class AMQPPollingPinTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = ast.parse(inspect.getsource(amqpdriver))

    def test_the_installed_library_is_within_the_pin(self):
        req = _pinned_requirement('oslo.messaging')
        self.assertTrue(any(s.operator in ('<', '<=', '==', '~=')
                            for s in req.specifier),
                        f"no upper bound on {req}: the workaround holds "
                        f"for the versions these tests checked only")
        installed = pkg_version.Version(md.version('oslo.messaging'))
        self.assertIn(installed, req.specifier)

    def test_the_constant_is_the_library_default_below_numamig_slice(self):
        values = [node.value.value for node in self.tree.body
                  if isinstance(node, ast.Assign) and
                  isinstance(node.value, ast.Constant) and
                  any(isinstance(t, ast.Name) and
                      t.id == rpc.AMQP_POLL_CONSTANT
                      for t in node.targets)]
        self.assertEqual([LIBRARY_DEFAULT_S], values,
                         f"oslo_messaging._drivers.amqpdriver."
                         f"{rpc.AMQP_POLL_CONSTANT} changed")
        self.assertLess(LIBRARY_DEFAULT_S, rpc.AMQP_FIRST_POLL_S)

    def test_the_driver_reads_it_at_each_wait(self):
        reads = _reads(self.tree, rpc.AMQP_POLL_CONSTANT)
        # Read at call time by these functions only: none keeps its own
        # copy (a default argument, a class attribute, another global)
        # made before numamig raised it.
        self.assertEqual([], [r for r in reads if r[1] or not r[0]])
        self.assertEqual(READ_AT_EACH_WAIT, {scope for scope, _ in reads})

    def test_a_transport_raises_it(self):
        self.useFixture(fixtures.MonkeyPatch(
            f'oslo_messaging._drivers.amqpdriver.{rpc.AMQP_POLL_CONSTANT}',
            LIBRARY_DEFAULT_S))
        rpc._calm_amqp_polling()
        self.assertEqual(rpc.AMQP_FIRST_POLL_S,
                         getattr(amqpdriver, rpc.AMQP_POLL_CONSTANT))

    def test_a_library_without_it_is_left_alone(self):
        self.useFixture(fixtures.MonkeyPatch(
            f'oslo_messaging._drivers.amqpdriver.{rpc.AMQP_POLL_CONSTANT}',
            fixtures.MonkeyPatch.delete))
        rpc._calm_amqp_polling()
        self.assertFalse(hasattr(amqpdriver, rpc.AMQP_POLL_CONSTANT))


class RabbitDefaultsPinTest(base.TestCase):
    """numamig.conf.opts gives a rabbit option numamig's default through
    oslo.config's public set_defaults, on the option list of the rabbit
    driver's private module (the library's list_opts hands out copies).
    set_defaults ignores a name it does not find: without this test a
    renamed option or a moved list would lose numamig's default
    silently."""

    def test_the_option_is_where_numamig_sets_its_default(self):
        from oslo_messaging._drivers import impl_rabbit
        self.assertIn('rabbit_interval_max',
                      [opt.name for opt in impl_rabbit.rabbit_opts])
