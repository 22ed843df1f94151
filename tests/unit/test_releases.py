"""Tests of numamig.releases: running a service as an old release."""

import logging

import fixtures
import testscenarios

from numamig import exception
from numamig import objects
from numamig import releases
from numamig import rpc
from numamig import service
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conf import CONF
from numamig.conf import testing as conf_testing
from numamig.objects import live_migrate_data
from numamig.objects import service as service_obj
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.objects import samples

load_tests = testscenarios.load_tests_apply_scenarios

OLD = releases.RELEASES[1]
NEW = releases.RELEASES[service_obj.SERVICE_VERSION]


class ReleaseTableTest(base.TestCase):

    def test_every_service_version_has_a_release(self):
        self.assertEqual(set(service_obj.SERVICE_VERSION_HISTORY),
                         set(releases.RELEASES))

    def test_history_names_what_each_release_serves(self):
        # The releases' tables and the history peers are capped from
        # agree, so that a peer is never sent what it refuses.
        for version, release in releases.RELEASES.items():
            # The conductor's: its APIs per audience where it has them
            # (release 2), else release 1's one API.
            per_audience = {service_obj.api_version_for(version, key)
                            for key in ('conductor_records_rpc',
                                        'conductor_operations_rpc')}
            conductor = per_audience.pop() if per_audience != {None} \
                else service_obj.api_version_for(version, 'conductor_rpc')
            self.assertEqual(set(), per_audience - {None})
            self.assertEqual(
                (release.compute_api_version, release.conductor_api_version),
                (service_obj.api_version_for(version, 'compute_rpc'),
                 conductor))
        # Every release serves release 1's conductor API, frozen at 1.1.
        self.assertEqual({'1.1'}, {
            service_obj.api_version_for(v, 'conductor_rpc')
            for v in releases.RELEASES})
        # A newer peer is served what this release's newest serves.
        self.assertEqual(
            compute_rpcapi.ComputeAPI.VERSION,
            service_obj.api_version_for(service_obj.SERVICE_VERSION + 1,
                                        'compute_rpc'))
        self.assertIsNone(service_obj.api_version_for(None, 'compute_rpc'))

    def test_upgrade_levels_may_name_a_release(self):
        # As nova's VERSION_ALIASES: a release stands for its version.
        self.assertEqual(
            ('1.0', '1.1', '1.1', '2.0'),
            (NEW.compute_version_cap('release-1'),
             NEW.compute_version_cap('release-2'),
             NEW.conductor_version_cap('release-1'),
             NEW.conductor_version_cap('release-2')))
        self.assertEqual('1.0', OLD.compute_version_cap('release-2'))

    def test_option_bound_follows_the_service_version(self):
        # conf/ cannot import objects/; this keeps the two in step.
        self.assertEqual(service_obj.SERVICE_VERSION,
                         conf_testing.NEWEST_SERVICE_VERSION)

    def test_old_release_speaks_api_1_0(self):
        self.assertEqual(('1.0', False, False),
                         (OLD.compute_api_version, OLD.numa_live_migration,
                          OLD.is_current))
        self.assertEqual('1.0', OLD.object_versions['LiveMigrateData'])

    def test_current_release_speaks_the_newest_api(self):
        self.assertEqual((compute_rpcapi.ComputeAPI.VERSION, True, None),
                         (NEW.compute_api_version, NEW.numa_live_migration,
                          NEW.object_versions))

    def test_old_methods_are_the_current_ones_but_the_drop(self):
        manager_methods = {name for name in dir(cbase.manager())
                           if name in OLD.compute_methods}
        self.assertEqual(OLD.compute_methods, manager_methods)
        self.assertNotIn('drop_move_claim_at_destination',
                         OLD.compute_methods)

    def test_option_refuses_version_0(self):
        self.assertRaises(ValueError, self.flags, group='testing',
                          pretend_service_version=0)

    def test_unknown_service_version(self):
        self.assertRaisesMessage(
            exception.InvalidConfiguration,
            "service version 7 is not one of this release's known "
            "versions [1, 2]", releases.for_service_version, 7)


class ComputeVersionCapTest(base.TestCase):
    """An old release never sends above its API; the current obeys caps."""

    scenarios = [
        ('old-uncapped', {'release': OLD, 'cap': None, 'expected': '1.0'}),
        ('old-capped-higher', {'release': OLD, 'cap': '1.1',
                               'expected': '1.0'}),
        ('old-capped-same', {'release': OLD, 'cap': '1.0',
                             'expected': '1.0'}),
        ('new-uncapped', {'release': NEW, 'cap': None, 'expected': None}),
        ('new-capped', {'release': NEW, 'cap': '1.0', 'expected': '1.0'}),
    ]

    def test_cap(self):
        self.assertEqual(self.expected,
                         self.release.compute_version_cap(self.cap))


class ConductorVersionCapTest(base.TestCase):
    """An old release never sends release 2's conductor APIs (2.0, with
    Migration 1.1)."""

    scenarios = [
        ('old-uncapped', {'release': OLD, 'cap': None, 'expected': '1.1'}),
        ('old-capped-higher', {'release': OLD, 'cap': '2.0',
                               'expected': '1.1'}),
        ('old-capped-lower', {'release': OLD, 'cap': '1.0',
                              'expected': '1.0'}),
        ('new-uncapped', {'release': NEW, 'cap': None, 'expected': None}),
        ('new-capped', {'release': NEW, 'cap': '1.1', 'expected': '1.1'}),
    ]

    def test_cap(self):
        self.assertEqual(self.expected,
                         self.release.conductor_version_cap(self.cap))


class ReleaseEndpointsTest(base.TestCase):
    """What the RPC dispatcher sees of an agent running as release 1."""

    def setUp(self):
        super().setUp()
        self.agent = cbase.manager()
        (self.endpoints,) = releases.endpoints_for(self.agent, OLD)

    def test_serves_api_1_0(self):
        self.assertEqual('1.0', self.endpoints.target.version)

    def test_hides_the_drop_of_the_new_release(self):
        # The dispatcher's hasattr() test: NoSuchMethod, as release 1 had.
        self.assertFalse(hasattr(self.endpoints,
                                 'drop_move_claim_at_destination'))

    def test_old_methods_reach_the_manager(self):
        self.assertEqual(self.agent.get_domain_xml,
                         self.endpoints.get_domain_xml)

    def test_private_names_stay_hidden(self):
        self.assertFalse(hasattr(self.endpoints, '_outgoing_job'))

    def test_current_release_dispatches_to_the_manager(self):
        self.assertEqual([self.agent],
                         releases.endpoints_for(self.agent, NEW))


class BackportedTest(base.TestCase):

    def test_answer_in_1_0_has_no_numa_fields(self):
        answer = releases.backported(samples.live_migrate_data(), '1.0')
        self.assertEqual('1.0', answer.VERSION)
        self.assertEqual((None, False, False),
                         (answer.dst_numa_info,
                          answer.src_supports_numa_live_migration,
                          answer.dst_supports_numa_live_migration))
        self.assertEqual('src', answer.source_host)
        sent = rpc.primitive_for(answer)
        self.assertEqual('1.0', sent['numamig_object.version'])
        for name in live_migrate_data.NUMA_FIELDS:
            self.assertNotIn(name, sent['numamig_object.data'])

    def test_original_untouched(self):
        lmd = samples.live_migrate_data()
        releases.backported(lmd, '1.0')
        self.assertEqual(objects.LiveMigrateData.VERSION, lmd.VERSION)
        self.assertIsNotNone(lmd.dst_numa_info)

    def test_fields_set_after_receipt_are_dropped(self):
        # Received as 1.0, then a 1.1 field set: the answer must still
        # hold only what 1.0 can carry.
        received = releases.backported(samples.live_migrate_data(), '1.0')
        received.src_supports_numa_live_migration = True
        answer = releases.backported(received, received.VERSION)
        self.assertFalse(answer.src_supports_numa_live_migration)
        self.assertNotIn('src_supports_numa_live_migration',
                         rpc.primitive_for(received)['numamig_object.data'])

    def test_current_version_keeps_everything(self):
        answer = releases.backported(samples.live_migrate_data(), '1.1')
        self.assertTrue(answer.src_supports_numa_live_migration)
        self.assertIsNotNone(answer.dst_numa_info)


class LogOldPathTest(base.TestCase):

    def test_message_names_host_migration_and_item(self):
        logs = self.useFixture(fixtures.FakeLogger(
            name='numamig.releases', level=logging.INFO))
        releases.log_old_path('dst', 'mig-1', releases.OLD_PATH_DEST_DROP,
                              'because')
        self.assertEqual("dst: migration mig-1: old path for the "
                         "destination claim drop: because\n", logs.output)


class ServiceVersionFromConfTest(base.TestCase):
    """The daemons' testing aid: [testing] pretend_service_version."""

    scenarios = [
        ('unset', {'option': None, 'expected': service_obj.SERVICE_VERSION,
                   'warned': False}),
        ('current', {'option': service_obj.SERVICE_VERSION,
                     'expected': service_obj.SERVICE_VERSION,
                     'warned': False}),
        ('older', {'option': 1, 'expected': 1, 'warned': True}),
    ]

    def test_version(self):
        logs = self.useFixture(fixtures.FakeLogger(name='numamig.service',
                                                   level=logging.WARNING))
        self.flags(group='testing', pretend_service_version=self.option)
        self.assertEqual(self.expected,
                         service.service_version_from_conf(CONF))
        self.assertEqual(self.warned,
                         'runs as an older release' in logs.output)
