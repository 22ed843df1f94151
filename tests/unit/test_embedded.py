"""The embedded deployment: its waits (woken by the conductor, not
polled) and its host definitions."""

import threading
import time
from unittest import mock

import fixtures

from numamig import embedded
from numamig import exception
from tests import base


def _migration(status, uuid='m-1'):
    return mock.Mock(uuid=uuid, status=status)


class WaitForMigrationTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dep = embedded.EmbeddedDeployment([], state_dir=self.useFixture(
            fixtures.TempDir()).path)
        self.statuses = ['running']
        self.dep.api = mock.Mock()
        self.dep.api.migration_get.side_effect = \
            lambda ctxt, uuid: _migration(self.statuses[-1], uuid)

    def test_an_end_heard_wakes_the_wait_at_once(self):
        def end_later():
            time.sleep(0.1)
            self.statuses.append('completed')
            self.dep.ends.heard(_migration('completed'))
        threading.Thread(target=end_later).start()
        started = time.monotonic()
        migration = self.dep.wait_for_migration('m-1', timeout=30)
        self.assertEqual('completed', migration.status)
        self.assertLess(time.monotonic() - started, embedded.SAFETY_LOOK_S)
        # One look before, one after the end: no polling in between.
        self.assertEqual(2, self.dep.api.migration_get.call_count)

    def test_another_migration_ending_does_not_wake_it(self):
        self.dep.ends.event_for('m-1')
        self.dep.ends.heard(_migration('completed', uuid='m-2'))
        self.assertFalse(self.dep.ends.event_for('m-1').is_set())

    def test_times_out_naming_the_status(self):
        with mock.patch.object(embedded, 'SAFETY_LOOK_S', 0.01):
            self.assertRaisesMessage(
                exception.MigrationError, 'm-1 still running after 0.05 s',
                self.dep.wait_for_migration, 'm-1', timeout=0.05)
        self.assertEqual({}, self.dep.ends._events)


class HostDefinitionTest(base.TestCase):

    def test_a_real_uri_drives_that_libvirtd_with_its_own_topology(self):
        host = embedded.HostDefinition(
            'real', uri='qemu+unix:///system?socket=/run/x.sock')
        settings = host.driver()._settings
        self.assertEqual(('qemu+unix:///system?socket=/run/x.sock', None,
                          'qemu', False),
                         (settings.uri, settings.capabilities_file,
                          settings.virt_type, settings.is_test_driver))

    def test_a_capabilities_file_is_a_test_driver_host(self):
        settings = embedded.HostDefinition(
            'a', 'numa-2cell-a.xml').driver()._settings
        self.assertTrue(settings.is_test_driver)
        self.assertTrue(settings.capabilities_file.endswith(
            'numa-2cell-a.xml'))

    def test_either_a_capabilities_file_or_a_uri(self):
        self.assertRaisesMessage(
            exception.Invalid, 'embedded host a needs either a capabilities '
            'file (a test-driver host) or the URI of a real libvirtd, not '
            'both', embedded.HostDefinition, 'a', 'numa-2cell-a.xml',
            uri='qemu:///system')
        self.assertRaisesMessage(
            exception.Invalid, 'not neither', embedded.HostDefinition, 'a')
