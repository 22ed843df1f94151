"""Every RPC method delivered twice, and out of order (issue 15 item 1).

At-least-once delivery (a connection lost after the handler ran but
before the ack, a caller that asks again after a timeout) can deliver
any call or cast twice, and a message delayed in transit can arrive
after a later one. For every method the conductor and the compute
agents declare (numamig.wire.args), a row builds the state the method
acts on in an embedded deployment (two libvirt test-driver hosts,
SQLite), delivers the same raw message twice (or the earlier message
after the later one) and compares the database rows, every agent's
usage and every hypervisor's domains: the repeat must leave them as one
delivery did. The rows whose repeat has side effects run over RabbitMQ
too. A method added to a manager without a row fails
TableTest; one whose docstring does not say what a repeat does fails
tests/unit/test_wire.py.
"""

import json

import testscenarios

from numamig.compute import manager as compute_manager
from numamig.conductor import manager as conductor_manager
from numamig.conductor import records_manager
from numamig.objects import base as obj_base
from tests import base
from tests.fixtures import deployment
from tests.functional.redelivery import rows_compute
from tests.functional.redelivery import rows_conductor
from tests.functional.redelivery import world as world_mod

load_tests = testscenarios.load_tests_apply_scenarios

ROWS = rows_conductor.ROWS + rows_compute.ROWS
# The conductor's rows cover both its APIs' endpoints (the operators'
# and the agents' records).
MANAGERS = {'conductor': (conductor_manager.ConductorManager,
                          records_manager.RecordManager),
            'compute': (compute_manager.ComputeManager,)}


def declared_methods():
    """'<api>.<method>' of every method the managers declare for RPC."""
    return {f'{api}.{name}' for api, classes in MANAGERS.items()
            for cls in classes for klass in cls.__mro__
            for name, member in vars(klass).items()
            if hasattr(member, 'wire_args')}


def comparable(value):
    """An answer as plain data (objects as their primitives)."""
    if isinstance(value, obj_base.NumamigObject):
        return json.loads(json.dumps(value.obj_to_primitive(),
                                     sort_keys=True, default=str))
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    return value


def differences(one, other, path=''):
    """Paths where two snapshots differ, with both values."""
    if isinstance(one, dict) and isinstance(other, dict):
        found = []
        for key in sorted(set(one) | set(other), key=str):
            found += differences(one.get(key, '<absent>'),
                                 other.get(key, '<absent>'),
                                 f'{path}/{key}')
        return found
    if isinstance(one, list) and isinstance(other, list) and \
            len(one) == len(other):
        found = []
        for index, (a, b) in enumerate(zip(one, other, strict=True)):
            found += differences(a, b, f'{path}[{index}]')
        return found
    return [] if one == other else [f'{path}: {one!r:.300} -> {other!r:.300}']


class TableTest(base.TestCase):
    """The table covers every declared method, and only those."""

    def test_every_declared_method_has_a_row(self):
        covered = {f'{row.api}.{row.method}' for row in ROWS}
        self.assertEqual(set(), declared_methods() - covered,
                         "declared RPC methods without a redelivery row")
        self.assertEqual(set(), covered - declared_methods(),
                         "rows of methods nobody declares")

    def test_row_names_are_unique(self):
        names = [row.name for row in ROWS]
        self.assertEqual(len(names), len(set(names)))

    def test_the_side_effect_subset_runs_over_rabbitmq(self):
        over_rabbit = {f'{row.api}.{row.method}' for row in ROWS
                       if row.rabbit}
        self.assertEqual({
            'compute.build_instance', 'conductor.migration_context_set',
            'compute.drop_move_claim_at_destination',
            'conductor.migration_context_drop',
            'compute.post_live_migration_at_destination',
            'conductor.migration_complete', 'conductor.migration_set_status',
            'conductor.migration_abort', 'conductor.instance_delete',
            'compute.delete_instance', 'conductor.report_compute_node',
            'conductor.host_drain_start', 'conductor.host_drain_abort',
            # A resize the test driver refuses, and the change record.
            'compute.resize_virtio_mem', 'conductor.instance_memory_set',
            # An operator's resume of a postcopy-paused migration.
            'conductor.migration_resume', 'compute.resume_postcopy'},
            over_rabbit)


class RedeliveryTest(base.TestCase):
    """One row over one transport."""

    scenarios = [(f'{kind}:{row.name}', {'transport_kind': kind,
                                          'row': row})
                 for kind in ('inproc', 'rabbit') for row in ROWS
                 if kind == 'inproc' or row.rabbit]

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, world_mod.HOSTS, report_interval=3600,
            sweep_interval=3600))
        self.world = world_mod.World(self, fixture)

    def look(self):
        snapshot = self.world.snapshot()
        if self.row.extra is not None:
            snapshot['extra'] = self.row.extra(self.world)
        return snapshot

    def assert_same(self, expected, actual, what):
        found = differences(expected, actual)
        if found:
            self.fail(f"{self.row.name}: {what}:\n  " +
                      "\n  ".join(found[:12]))

    def test_delivered_again(self):
        row, world = self.row, self.world
        delivery = row.setup(world)
        world.settle()
        before = self.look()
        first = world.deliver(delivery)
        once = self.look()
        if row.stale:
            self.assert_same(before, once, f"the late message ({first}) "
                                           f"changed the state")
            return
        if row.changes:
            self.assertTrue(differences(before, once),
                            f"{row.name}: the first delivery ({first}) "
                            f"changed nothing: the row cannot fail")
        second = world.deliver(delivery)
        self.assert_same(once, self.look(),
                         f"the repeat ({second}; first {first}) did not "
                         f"have the effect of one")
        if row.same_answer:
            self.assertEqual(comparable(first), comparable(second),
                             f"{row.name}: the repeat got another answer")
