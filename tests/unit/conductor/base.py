"""A conductor on a real SQLite database with a mocked compute client.

Hosts report through the conductor as agents would; the compute RPC
client is a mock, so each test says what the destinations answer.
"""

import dataclasses
import datetime
from unittest import mock

import oslo_messaging as messaging
from oslo_utils import timeutils

from numamig import fingerprint
from numamig import objects
from numamig.conductor import manager
from numamig.conductor import records
from numamig.conductor import settings
from numamig.conf import CONF
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import queue
from numamig.scheduler import host_state
from numamig.scheduler import scheduler
from tests import base
from tests.fixtures import database
from tests.unit.compute import base as cbase


class ConductorTestCase(base.TestCase):

    HOSTS = ('src', 'dst1', 'dst2', 'dst3')

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(database.SQLiteDatabase()).db
        self.now = timeutils.utcnow(with_timezone=True)
        cache = host_state.HostStateCache(clock=lambda: self.now,
                                          reservation_timeout=300,
                                          service_down_time=60)
        self.compute_api = mock.Mock(name='compute_api')
        # The destinations ask the source themselves (the way before API
        # 1.3) unless a test says otherwise.
        self.compute_api.supports_conductor_checks.return_value = False
        # The production settings but a shorter wait for destinations.
        self.flags(rpc_response_timeout_migration=5)
        self.conductor = manager.ConductorManager(
            self.db, cache, scheduler.Scheduler(cache), self.compute_api,
            settings.from_conf(CONF))
        for host in self.HOSTS:
            self.report(host)

    def new_worker(self):
        """(cache, manager) of another conductor worker on the same
        database, with the reports loaded: what a restart leaves."""
        cache = host_state.HostStateCache(clock=lambda: self.now,
                                          reservation_timeout=300,
                                          service_down_time=60)
        restarted = manager.ConductorManager(
            self.db, cache, scheduler.Scheduler(cache), self.compute_api,
            self.conductor.worker.settings)
        restarted.load_reports()
        return cache, restarted

    def report(self, host, topology=None, hypervisor_type='test',
               service_version=2, age_s=0, cpu=None, migration_guard=None,
               guest_cpus=()):
        report = objects.ComputeNodeReport(
            host=host, hypervisor_uri=f'test:///{host}',
            hypervisor_type=hypervisor_type,
            topology=topology or cbase.host_topology(),
            service_version=service_version,
            fingerprint=fingerprint.compute([]),
            reported_at=self.now - datetime.timedelta(seconds=age_s),
            cpu=cpu, migration_guard=migration_guard,
            guest_cpus=list(guest_cpus))
        if age_s:
            # A host last heard of age_s ago; the cache keeps the newest
            # report, so forget the fresh one setUp made (in the database
            # too: workers sync their caches from it).
            compute_nodes.delete(self.db, host)
            compute_nodes.save_report(self.db, report)
            self.conductor.cache.remove(host)
            self.conductor.cache.update(
                report, received_at=report.reported_at)
        else:
            records.save_report(self.worker, report)

    @property
    def worker(self):
        """What the conductor's flows get."""
        return self.conductor.worker

    def reconfigure(self, **changes):
        """Give the conductor's flows other parts (Worker fields) or
        settings (ConductorSettings fields)."""
        worker = self.conductor.worker
        parts = {name: changes.pop(name) for name in list(changes)
                 if name in {f.name for f in dataclasses.fields(worker)}}
        if changes:
            parts['settings'] = dataclasses.replace(worker.settings,
                                                    **changes)
        self.conductor.worker = dataclasses.replace(worker, **parts)

    def call(self, method, *args, **kwargs):
        """Call a conductor endpoint as the RPC dispatcher would.

        ``expected_exceptions`` wraps an endpoint's contract errors for
        the dispatcher; unwrap them as a remote caller would see them.
        """
        # The agents' calls are the records endpoint's, the operators'
        # the manager's own.
        endpoint = self.conductor.records if hasattr(
            type(self.conductor.records), method) else self.conductor
        try:
            return getattr(endpoint, method)(None, *args, **kwargs)
        except messaging.ExpectedException as exc:
            raise exc.exc_info[1]

    def migrate(self, instance_uuid, dest_host=None, **kwargs):
        """Request a migration, then run it as a migration thread would,
        its errors raised to the test."""
        migration = self.call('live_migrate_instance', instance_uuid,
                              dest_host, **kwargs)
        admitted = queue.admit(self.db, self.conductor.admission, 1)
        self.assertEqual([migration.uuid], admitted)
        return self.conductor.execute_admitted(migration.uuid)

    def create_instance(self, host='src', **kwargs):
        inst = cbase.instance(host=host, pins={0: 2, 1: 10}, **kwargs)
        instances.create(self.db, inst)
        return inst

    def answer_with(self, *answers):
        """Destinations answer check_can_live_migrate_destination in turn.

        Each answer is an exception to raise, or True for a
        LiveMigrateData carrying the host's name.
        """
        answers = list(answers)

        def check(ctxt, instance, host, migration, limits, timeout=None,
                  source_data=None):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return objects.LiveMigrateData(
                instance_uuid=instance.uuid, source_host=instance.host,
                dest_host=host, migration_uuid=migration.uuid)
        self.compute_api.check_can_live_migrate_destination.side_effect = \
            check
