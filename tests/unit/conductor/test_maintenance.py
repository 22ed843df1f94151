"""Tests of numamig.conductor.maintenance: deletion and domain listing."""

from unittest import mock

import oslo_messaging as messaging

from numamig import exception
from numamig import fingerprint
from numamig import objects
from numamig.conductor import maintenance
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations
from tests.unit.compute import base as cbase
from tests.unit.conductor import base


class DeleteInstanceTest(base.ConductorTestCase):

    def test_destroys_on_the_host_then_drops_the_record(self):
        inst = self.create_instance()
        self.assertTrue(self.call('instance_delete', inst.uuid))
        (sent,) = self.compute_api.delete_instance.call_args[0][1:2]
        self.assertEqual((inst.uuid, 'deleting'),
                         (sent.uuid, sent.task_state))
        self.assertRaises(exception.InstanceNotFound, instances.get,
                          self.db, inst.uuid)

    def test_deleting_again_changes_nothing(self):
        inst = self.create_instance()
        self.call('instance_delete', inst.uuid)
        self.assertFalse(self.call('instance_delete', inst.uuid))
        self.assertEqual(1, self.compute_api.delete_instance.call_count)

    def test_refused_while_a_migration_is_in_progress(self):
        inst = self.create_instance()
        migration = migrations.create(self.db, cbase.migration(inst))
        self.assertRaisesMessage(exception.InstanceBusy, migration.uuid,
                                 self.call, 'instance_delete', inst.uuid)
        record = instances.get(self.db, inst.uuid).instance
        self.assertIsNone(record.task_state)
        self.compute_api.delete_instance.assert_not_called()

    def test_host_not_answering_leaves_the_record_as_it_was(self):
        inst = self.create_instance()
        self.compute_api.delete_instance.side_effect = \
            messaging.MessagingTimeout()
        self.assertRaises(messaging.MessagingTimeout, self.call,
                          'instance_delete', inst.uuid)
        record = instances.get(self.db, inst.uuid).instance
        self.assertEqual(('src', None), (record.host, record.task_state))

    def test_old_agent_is_named(self):
        inst = self.create_instance()
        self.compute_api.delete_instance.side_effect = \
            messaging.UnsupportedVersion('1.2')
        self.assertRaisesMessage(exception.Invalid, 'older than compute API',
                                 self.call, 'instance_delete', inst.uuid)

    def test_a_guest_being_deleted_cannot_migrate(self):
        inst = self.create_instance()
        instances.update(self.db, inst.uuid,
                         {'task_state': maintenance.DELETING})
        self.assertRaisesMessage(exception.InstanceBusy, 'being deleted',
                                 self.call, 'live_migrate_instance',
                                 inst.uuid)


class HostDomainsTest(base.ConductorTestCase):

    def test_lists_through_the_agent(self):
        self.compute_api.list_domains.return_value = ['d']
        self.assertEqual(['d'], self.call('host_domains', 'dst1'))

    def test_old_agent_falls_back_to_recorded_guests(self):
        inst = self.create_instance()
        self.compute_api.list_domains.side_effect = \
            messaging.UnsupportedVersion('1.2')
        self.compute_api.get_domain_xml.return_value = '<domain/>'
        (entry,) = self.call('host_domains', 'src')
        self.assertEqual((inst.uuid, '<domain/>', None),
                         (entry['uuid'], entry['live_xml'],
                          entry['persistent_xml']))

    def test_unknown_host(self):
        self.assertRaises(exception.HostNotFound, self.call, 'host_domains',
                          'nope')

    def test_domain_xml_of_a_guest_on_a_host_down_refused_at_once(self):
        # Before: the agent was asked and the caller (instance show)
        # waited its whole timeout.
        inst = self.create_instance()
        self.report('src', age_s=3600)
        exc = self.assertRaises(exception.ComputeHostDown, self.call,
                                'get_domain_xml', inst.uuid)
        self.assertIn('src is down', str(exc))
        self.compute_api.get_domain_xml.assert_not_called()


    def test_domain_xml_of_a_host_another_worker_heard_from(self):
        # Its reports reached another conductor worker only (the shipped
        # deployment's several workers): this one reads them first.
        inst = self.create_instance()
        self.conductor.cache.remove('src')
        compute_nodes.save_report(self.db, objects.ComputeNodeReport(
            host='src', hypervisor_uri='test:///src', hypervisor_type='test',
            topology=cbase.host_topology(), service_version=2,
            fingerprint=fingerprint.compute([]), reported_at=self.now))
        self.compute_api.get_domain_xml.return_value = '<domain/>'
        self.assertEqual('<domain/>', self.call('get_domain_xml', inst.uuid))


class RefreshUsageTest(base.ConductorTestCase):

    def test_the_agent_recomputes_and_its_report_is_answered(self):
        self.compute_api.refresh_usage.return_value = 'report'
        self.assertEqual('report', self.call('host_refresh_usage', 'dst1'))
        self.compute_api.refresh_usage.assert_called_once_with(
            mock.ANY, 'dst1', timeout=mock.ANY)

    def test_old_agent_is_named_with_what_happens_instead(self):
        self.compute_api.refresh_usage.side_effect = \
            messaging.UnsupportedVersion('1.4')
        self.assertRaisesMessage(
            exception.Invalid, 'older than compute API 1.4; it does so '
            'every [compute] update_resources_interval', self.call,
            'host_refresh_usage', 'dst1')

    def test_unknown_host(self):
        self.assertRaises(exception.HostNotFound, self.call,
                          'host_refresh_usage', 'nope')
        self.compute_api.refresh_usage.assert_not_called()


class DeleteHostTest(base.ConductorTestCase):
    """Forgetting a decommissioned host, never one still in use."""

    def _down(self, host):
        self.report(host, age_s=3600)

    def test_a_down_empty_host_is_forgotten(self):
        self._down('dst3')
        self.assertTrue(self.call('compute_node_delete', 'dst3'))
        self.assertRaises(exception.HostNotFound, compute_nodes.get,
                          self.db, 'dst3')
        self.assertRaises(exception.HostNotFound, self.conductor.cache.get,
                          'dst3')
        # Redelivered: nothing left to do, no error.
        self.assertFalse(self.call('compute_node_delete', 'dst3'))

    def test_a_reporting_host_is_refused(self):
        exc = self.assertRaises(exception.HostInUse, self.call,
                                'compute_node_delete', 'dst3')
        self.assertIn('stop numamig-compute there first', str(exc))
        compute_nodes.get(self.db, 'dst3')

    def test_a_host_with_guests_is_refused(self):
        guest = self.create_instance('src')
        self._down('src')
        exc = self.assertRaises(exception.HostInUse, self.call,
                                'compute_node_delete', 'src')
        self.assertIn(guest.uuid, str(exc))
        compute_nodes.get(self.db, 'src')


