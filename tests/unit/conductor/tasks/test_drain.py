"""The drain task: a drain started (the host disabled, every move
recorded), refused under another host's uuid, shown, and aborted (its
queued migrations cancelled, running ones only when asked). The passes
that carry it forward are test_drain_driver's."""

import oslo_messaging as messaging

from numamig import exception
from numamig.conductor import records
from numamig.conductor import settings
from numamig.conf import CONF
from numamig.db import drains
from numamig.db import instances
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.db import queue
from tests.unit.compute import base as cbase
from tests.unit.conductor import base

DRAIN = '6a1e0c3b-9f2d-4e7a-8b5c-1d2e3f4a5b6c'


class StartedDrainBase(base.ConductorTestCase):
    """A drain of src's two guests started; no test here."""

    def setUp(self):
        super().setUp()
        self.guests = [cbase.instance(host='src', pins=pins)
                       for pins in ({0: 2, 1: 10}, {0: 3, 1: 11})]
        for guest in self.guests:
            instances.create(self.db, guest)
        self.started = self.call('host_drain_start', 'src', DRAIN, 1)
        self.driver = self.conductor.drains

    def reserved(self, cache=None):
        """{instance uuid: host} of the reservations a cache holds."""
        cache = cache or self.conductor.cache
        return {r.instance_uuid: host for host in self.HOSTS
                for r in cache.get(host).reservations}

    def planned(self):
        return {m['instance_uuid']: m['planned_host']
                for m in self.started['moves']}

    def moves(self):
        return drains.get(self.db, DRAIN)['moves']

    def first_move_running(self):
        """Start the drain's first move (the limit is one at a time) and
        record it admitted, placed and running, as its source would."""
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        queue.admit(self.db, self.conductor.admission, 1)
        migrations.set_dest_host(self.db, migration.uuid,
                                 migration.requested_host)
        for status in ('queued', 'running'):
            records.set_status(self.worker, migration.uuid, status)
        return migration


class DrainLinkTest(base.ConductorTestCase):

    def test_the_drain_records_its_sources_link_rate(self):
        # The turn rule keeps dirtying guests' shares of this rate
        # (numamig.db.drains.start_moves); unknown (None) it does not.
        instances.create(self.db, cbase.instance(host='src',
                                                 pins={0: 2, 1: 10}))
        self.flags(migration_link_rates={'src': 300}, group='conductor')
        self.reconfigure(
            migration_links=settings.from_conf(CONF).migration_links)
        self.call('host_drain_start', 'src', DRAIN, 1)
        self.assertEqual(300, drains.get(self.db, DRAIN)['options'][
            'link_rate_mib'])


class DrainEstimateTest(base.ConductorTestCase):
    """The source samples the guests' dirty rates once, before the
    first move; the moves go by them and each under its policy."""

    MIB = 2 ** 20

    def start(self, rates, link_mib=32, parallel=2):
        """Drain src's two guests; ``rates`` (MiB/s) by the plan's order
        of their moves (or the failure the source answers with)."""
        guests = [cbase.instance(host='src', pins=pins)
                  for pins in ({0: 2, 1: 10}, {0: 3, 1: 11})]
        for guest in guests:
            instances.create(self.db, guest)
        if link_mib:
            self.flags(migration_link_rates={'src': link_mib},
                       group='conductor')
            self.reconfigure(
                migration_links=settings.from_conf(CONF).migration_links)
        started = self.call('host_drain_start', 'src', DRAIN, parallel)
        self.planned = [m['instance_uuid'] for m in started['moves']]
        if isinstance(rates, Exception):
            self.compute_api.sample_dirty_rates.side_effect = rates
        else:
            self.compute_api.sample_dirty_rates.return_value = {
                'guests': {u: {'dirty_rate': r * self.MIB,
                               'memory': 512 * self.MIB,
                               'method': 'page-sampling', 'reason': None}
                           for u, r in zip(self.planned, rates,
                                           strict=True)},
                'figures': {'downtime_ms': 500, 'timeout_s_per_gib': 0,
                            'timer_tiers': []}}
        self.conductor.drains.run_once()

    def second_move(self):
        """The first move's migration past its claim (as its source
        would record it); the next pass starts the second."""
        (migration,) = migrations.get_all(self.db)
        queue.admit(self.db, self.conductor.admission, 1)
        migrations.set_dest_host(self.db, migration.uuid,
                                 migration.requested_host)
        for status in ('queued', 'running'):
            records.set_status(self.worker, migration.uuid, status)
        self.conductor.drains.run_once()
        self.assertEqual(2, len(migrations.get_all(self.db)))

    def policies(self):
        return {m.instance_uuid: migration_satellites.get(
            self.db, m.uuid, ('convergence',))['convergence'].policy
            for m in migrations.get_all(self.db)}

    def test_sampled_once_before_the_first_move(self):
        # (The order the rates give: tests/functional/db/test_drains.)
        self.start([0, 12], link_mib=None, parallel=1)
        self.compute_api.sample_dirty_rates.assert_called_once()
        args = self.compute_api.sample_dirty_rates.call_args
        self.assertEqual('src', args.args[1])
        self.assertEqual(self.planned, args.args[2])
        self.assertEqual(1, args.kwargs['seconds'])
        # The source may answer from its background samples this young.
        self.assertEqual(CONF.conductor.drain_estimate_max_age,
                         args.kwargs['max_age'])
        self.assertEqual(600, args.kwargs['max_age'])
        estimate = drains.get(self.db, DRAIN)['options']['estimate']
        self.assertEqual(12 * self.MIB, estimate['guests'][
            self.planned[1]]['dirty_rate'])
        self.assertEqual(500, estimate['figures']['downtime_ms'])
        self.assertIsNone(estimate['reason'])
        self.conductor.drains.run_once()
        self.compute_api.sample_dirty_rates.assert_called_once()

    def test_a_guest_faster_than_the_link_runs_under_a_fallback(self):
        # 40 MiB/s against the whole 32 MiB/s: the default (timer)
        # never converges; never_pause (post-copy in its tiers) does.
        self.start([0, 40])
        self.second_move()
        self.assertEqual('never_pause', self.policies()[self.planned[1]])
        self.assertEqual(
            {self.planned[1]: {'name': 'never_pause', 'post_copy': True}},
            drains.get(self.db, DRAIN)['options']['policies'])

    def test_guests_that_converge_keep_their_policy(self):
        self.start([0, 6])
        self.second_move()
        self.assertEqual('timer', self.policies()[self.planned[1]])
        self.assertEqual({}, drains.get(self.db, DRAIN)['options'][
            'policies'])

    def assert_plan_order_kept(self, failure):
        self.start(failure, parallel=1)
        estimate = drains.get(self.db, DRAIN)['options']['estimate']
        self.assertEqual({}, estimate['guests'])
        self.assertIn('src', estimate['reason'])
        (migration,) = migrations.get_all(self.db)
        self.assertEqual(self.planned[0], migration.instance_uuid)
        self.assertEqual({self.planned[0]: 'timer'}, self.policies())

    def test_an_older_source_leaves_the_plan_as_it_was(self):
        self.assert_plan_order_kept(messaging.UnsupportedVersion('1.1'))

    def test_a_source_that_does_not_answer_leaves_the_plan(self):
        self.assert_plan_order_kept(messaging.MessagingTimeout('late'))


class DrainTaskTest(StartedDrainBase):

    def test_the_start_disables_the_host_and_records_every_move(self):
        self.assertEqual(('running', False, 100), (
            self.started['status'], self.started['was_disabled'],
            self.started['priority']))
        self.assertEqual({g.uuid for g in self.guests}, set(self.planned()))
        self.assertTrue(self.call('host_drain_show', host='src')['uuid'],
                        DRAIN)
        self.assertEqual(f"drain {DRAIN}", records.compute_nodes.maintenance(
            self.db)['src'].reason)
        self.assertIsNone(drains.get(self.db, DRAIN)['options'][
            'link_rate_mib'])

    def test_abort_cancels_the_queued_and_asks_sources_only_if_told(self):
        self.driver.run_once()
        (migration,) = migrations.get_all(self.db)
        aborted = self.call('host_drain_abort', 'src')
        self.assertEqual('aborting', aborted['status'])
        self.assertEqual('cancelled', migrations.get(
            self.db, migration.uuid).status)
        self.compute_api.live_migration_abort.assert_not_called()
        self.driver.run_once()
        data = self.call('host_drain_show', drain_uuid=DRAIN)
        self.assertEqual(('aborted', 2), (data['status'],
                                          data['report']['cancelled']))
        self.assertEqual({}, self.reserved())
        exc = self.assertRaises(exception.DrainNotFound, self.call,
                                'host_drain_abort', 'src')
        # Before: "No drain of host src is active is recorded."
        self.assertEqual("Host src has no active drain to abort; 'host "
                         "drain show src' shows its last one.", str(exc))

    def test_abort_running_asks_the_source(self):
        self.first_move_running()
        self.call('host_drain_abort', 'src')
        self.compute_api.live_migration_abort.assert_not_called()
        self.call('host_drain_abort', 'src', abort_running=True)
        self.compute_api.live_migration_abort.assert_called_once()

    def test_a_drain_of_another_host_under_the_same_uuid_is_refused(self):
        error = self.assertRaises(exception.Invalid, self.call,
                                  'host_drain_start', 'dst1', DRAIN, 1)
        self.assertIn(f"drain {DRAIN} is a drain of src", str(error))

    def test_show_needs_one_of_host_and_uuid(self):
        for kwargs in ({}, {'host': 'src', 'drain_uuid': DRAIN}):
            self.assertRaises(exception.Invalid, self.call,
                              'host_drain_show', **kwargs)
