"""Declared RPC arguments: what fits, what is refused, and that every
endpoint the clients call is declared (and nothing else exposed)."""

import inspect
import re

import oslo_messaging as messaging

from numamig import exception
from numamig import objects
from numamig import rpc
from numamig import wire
from numamig.compute import manager as compute_manager
from numamig.compute import rpcapi as compute_rpcapi
from numamig.compute import rpcapi_postcopy
from numamig.conductor import manager as conductor_manager
from numamig.conductor import records_manager
from numamig.conductor import records_rpcapi
from numamig.conductor import rpcapi as conductor_rpcapi
from numamig.conductor import rpcclient
from tests import base

UUID = '9d0e1f2a-3b4c-4d5e-8f60-718293a4b5c6'


class Endpoint:
    wire_declared = True

    @wire.args(migration_uuid=wire.UUID, host=wire.HOST.or_none(),
               limit=wire.integer(1, 10))
    def lookup(self, ctxt, migration_uuid, limit, host=None):
        return (migration_uuid, limit, host)

    def helper(self, ctxt):
        return 'not for the wire'


class ArgsTestCase(base.TestCase):

    def refused(self, **kwargs):
        exc = self.assertRaises(messaging.ExpectedException,
                                Endpoint().lookup, None, **kwargs)
        refusal = exc.exc_info[1]
        self.assertIsInstance(refusal, exception.InvalidRPCArgument)
        return str(refusal)

    def test_fitting_arguments_reach_the_method(self):
        self.assertEqual((UUID, 3, None),
                         Endpoint().lookup(None, migration_uuid=UUID,
                                           limit=3))
        self.assertEqual((UUID, 3, 'h'), Endpoint().lookup(None, UUID, 3,
                                                           'h'))

    def test_each_misfit_names_the_method_and_argument(self):
        for kwargs, words in (
                ({'migration_uuid': 7, 'limit': 1}, ('migration_uuid',
                                                     'a UUID', 'int 7')),
                ({'migration_uuid': UUID, 'limit': 0}, ('limit', '1 to 10')),
                ({'migration_uuid': UUID, 'limit': True}, ('limit',)),
                ({'migration_uuid': UUID, 'limit': 1, 'host': 'x' * 300},
                 ('host', '255')),
                ({'migration_uuid': UUID}, ('limit', 'missing')),
                ({'migration_uuid': UUID, 'limit': 1, 'extra': 1},
                 ('extra', 'not an argument')),
                ({'migration_uuid': {'a': 1}, 'limit': 1}, ('dict',))):
            message = self.refused(**kwargs)
            self.assertIn('lookup', message)
            for word in words:
                self.assertIn(word, message)

    def test_declarations_must_match_the_signature(self):
        def undeclared(self, ctxt, a, b=None):
            pass
        self.assertRaises(TypeError, wire.args(a=wire.UUID), undeclared)

    def test_objects_are_told_from_dicts(self):
        kind = wire.obj('Instance')
        self.assertIsNone(kind.problem(objects.Instance()))
        self.assertIn('dict', kind.problem({'uuid': UUID}))
        self.assertIn('Migration', kind.problem(objects.Migration())
                      or 'Migration')

    def test_only_declared_methods_are_dispatched(self):
        policy = rpc.DeclaredOnlyPolicy()
        self.assertTrue(policy.is_allowed(Endpoint(), 'lookup'))
        self.assertFalse(policy.is_allowed(Endpoint(), 'helper'))
        self.assertFalse(policy.is_allowed(Endpoint(), '_secret'))

        class Plain:
            def echo(self, ctxt):
                pass
        self.assertTrue(policy.is_allowed(Plain(), 'echo'))


def _called_methods(modules, manager_cls):
    """The manager's methods rpcapi modules name in quotes: what their
    calls and casts send."""
    public = {name for name, _ in inspect.getmembers(
        manager_cls, inspect.isfunction) if not name.startswith('_')}
    source = ''.join(inspect.getsource(module) for module in modules)
    return set(re.findall(r"'(\w+)'", source)) & public


def _exposed(cls):
    return {name for name, member in inspect.getmembers(cls)
            if getattr(member, 'exposed', False)}


class EveryEndpointDeclaredTestCase(base.TestCase):

    def test_what_the_clients_call_is_declared_and_no_more(self):
        for manager_cls, rpcapi in (
                # Each conductor API's client calls its own endpoint (and
                # the ping every client sends through its link).
                (conductor_manager.ConductorManager,
                 (conductor_rpcapi, rpcclient)),
                (records_manager.RecordManager, (records_rpcapi,)),
                (compute_manager.ComputeManager,
                 (compute_rpcapi, rpcapi_postcopy))):
            called = _called_methods(rpcapi, manager_cls)
            exposed = _exposed(manager_cls)
            self.assertEqual(set(), called - exposed,
                             f"{manager_cls.__name__}: called, undeclared")
            self.assertEqual(set(), exposed - called,
                             f"{manager_cls.__name__}: exposed, never "
                             f"called by its client")


class EveryEndpointSaysWhatARepeatDoesTestCase(base.TestCase):
    """At-least-once delivery repeats any message: each endpoint's
    docstring says what a repeat does (doc/source/control-plane.rst,
    Redelivery), so a new one cannot skip the question."""

    def test_every_declared_method_says_what_a_repeat_does(self):
        silent = sorted(
            f'{manager_cls.__name__}.{name}'
            for manager_cls in (conductor_manager.ConductorManager,
                                records_manager.RecordManager,
                                compute_manager.ComputeManager)
            for name in _exposed(manager_cls)
            if 'Idempotent: a repeat' not in ' '.join(
                (inspect.getdoc(getattr(manager_cls, name)) or '').split()))
        self.assertEqual([], silent, "RPC methods whose docstring does not "
                                     "say 'Idempotent: a repeat ...'")
