"""RPC round trips of each operator command and read, from a new client.

Splitting the conductor's API by audience (issue 35) must not make any
command dearer: an operator's client asks the conductor its service
version once (``ping``), then each command or read is one call. Counted
here on the embedded tier over fake:// against a conductor of this
release and one running as release 1, for every command numamig-manage
sends; an answer that is an error (a drain that does not exist, an
abort of a finished migration) costs the same one round trip.
"""

import collections
import threading
from unittest import mock

import oslo_messaging as messaging
from oslo_messaging.rpc import client as rpc_client
from oslo_utils import uuidutils
import testscenarios

from numamig import exception
from numamig import objects
from tests import base
from tests.fixtures import deployment

load_tests = testscenarios.load_tests_apply_scenarios

HOSTS = ('host-a', 'host-b')


class Counter:
    """Counts the calls and casts sent to the conductor (on any of its
    topics) by any RPC client of the process; the conductor's own calls
    to the agents are not the operator's."""

    def __init__(self, names, this_thread_only=False):
        self.topics = {names.conductor_topic, names.conductor_agent_topic}
        # The operator's own calls: not the agents' that a command makes
        # the conductor ask for (a host's report during refresh-usage).
        self.thread = threading.get_ident() if this_thread_only else None
        self.counts = collections.Counter()
        self._lock = threading.Lock()
        self._patches = [
            mock.patch.object(rpc_client._BaseCallContext, kind,
                              self._counted(kind, getattr(
                                  rpc_client._BaseCallContext, kind)))
            for kind in ('call', 'cast')]

    def _counted(self, kind, original):
        def counted(cctxt, ctxt, method, **kwargs):
            if cctxt.target.topic in self.topics and self.thread in (
                    None, threading.get_ident()):
                with self._lock:
                    self.counts[kind, method] += 1
            return original(cctxt, ctxt, method, **kwargs)
        return counted

    def __enter__(self):
        for patch in self._patches:
            patch.start()
        return self

    def __exit__(self, *exc_info):
        for patch in self._patches:
            patch.stop()


# Each operator command: (name, the client's method, its arguments given
# the test's guest and migration, whether a conductor of release 1 has
# it). What numamig-manage sends (numamig/cmd/manage_commands).
def _commands(test):
    guest, migration = test.guest.uuid, test.migration.uuid
    return [
        ('migration show', 'migration_get', (migration,), {}, True),
        ('migration list', 'migration_get_all', (), {}, True),
        ('instance show', 'instance_get', (guest,), {}, True),
        ('instance list', 'instance_get_all', (), {}, True),
        ('host list', 'compute_node_get_all', (), {}, True),
        ('host claims', 'instance_get_claims_on_host', ('host-a',), {},
         True),
        ('migration dry-run', 'live_migration_dry_run', (guest,), {},
         True),
        ('instance xml', 'get_domain_xml', (guest,), {}, True),
        ('host domains', 'host_domains', ('host-a',), {}, True),
        ('claims heal --dry-run', 'heal_claims', (), {'dry_run': True},
         True),
        ('migration abort', 'migration_abort', (migration,), {}, True),
        ('migration force-complete', 'migration_force_complete',
         (migration,), {}, True),
        ('migration start', 'live_migrate_instance', (guest, 'host-b'),
         {}, True),
        ('host drain plan', 'host_drain_plan', ('host-a',), {}, False),
        ('host drain show', 'host_drain_show', ('host-a',), {}, False),
        ('host defragment plan', 'host_defragment_plan',
         (2, 1024, {'hw:cpu_policy': 'dedicated'}), {}, False),
        ('host disable', 'host_set_disabled', ('host-b', False), {},
         False),
        ('host refresh-usage', 'host_refresh_usage', ('host-a',), {},
         False),
        ('migration resume', 'migration_resume', (migration,), {}, False),
        ('host delete', 'compute_node_delete', ('host-a',), {}, False),
    ]


class OperatorRoundTripsTest(base.TestCase):

    scenarios = [('release-2 conductor', {'conductor_version': 2}),
                 ('release-1 conductor', {'conductor_version': 1})]

    def setUp(self):
        super().setUp()
        from numamig import embedded
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in HOSTS]
        self.dep = self.useFixture(deployment.DeploymentFixture(
            'fake', hosts,
            conductor_service_version=self.conductor_version)).deployment
        ctxt = self.dep.context
        self.guest = self.dep.api.instance_create(ctxt, objects.Instance(
            uuid=uuidutils.generate_uuid(), name='trips', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), 'host-a')
        # A migration that ended: abort, force-complete and resume are
        # refused, each after its one round trip.
        migration = self.dep.api.live_migrate_instance(ctxt,
                                                       self.guest.uuid,
                                                       'host-b')
        self.migration = self.dep.wait_for_migration(migration.uuid)
        self.guest = self.dep.api.instance_get(ctxt, self.guest.uuid)

    def new_client(self):
        """An operator's client as numamig-manage builds one: nothing
        known of the conductor yet."""
        return self.dep.names.conductor_api(self.dep._transport, timeout=30)

    def test_each_command_is_a_ping_and_one_call(self):
        trips = {}
        for name, method, args, kwargs, release_1 in _commands(self):
            if self.conductor_version == 1 and not release_1:
                continue
            api = self.new_client()
            with Counter(self.dep.names, this_thread_only=True) as counter:
                try:
                    getattr(api, method)(self.dep.context, *args, **kwargs)
                except (exception.NumamigException,
                        messaging.ExpectedException):
                    pass
            trips[name] = sum(n for (kind, _), n in counter.counts.items()
                              if kind == 'call')
            self.assertEqual({('call', 'ping'): 1, ('call', method): 1},
                             dict(counter.counts), name)
        print(f"\nround trips per operator command (conductor of release "
              f"{self.conductor_version}): {trips}")


class MigrationRoundTripsTest(base.TestCase):
    """One migration, request to completed: at most 8 calls (the
    benchmark's target, benchmarks/bench_migration_trips.py)."""

    def test_one_migration(self):
        from numamig import embedded
        hosts = [embedded.HostDefinition(name, 'numa-2cell-a.xml')
                 for name in HOSTS]
        dep = self.useFixture(deployment.DeploymentFixture(
            'fake', hosts)).deployment
        guest = dep.api.instance_create(dep.context, objects.Instance(
            uuid=uuidutils.generate_uuid(), name='trips', project_id='demo',
            vcpus=2, memory_mb=1024,
            extra_specs={'hw:cpu_policy': 'dedicated'}), 'host-a')
        ended = threading.Event()
        dep.conductor.manager.add_end_listener(lambda m: ended.set())
        with Counter(dep.names) as counter:
            migration = dep.api.live_migrate_instance(dep.context,
                                                      guest.uuid, 'host-b')
            self.assertTrue(ended.wait(60))
        calls = {m: n for (kind, m), n in counter.counts.items()
                 if kind == 'call'}
        print(f"\nround trips of one migration: {sum(calls.values())} "
              f"{calls}")
        self.assertLessEqual(sum(calls.values()), 8, calls)
        self.assertEqual('completed', dep.api.migration_get(
            dep.context, migration.uuid).status)
