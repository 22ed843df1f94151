"""Tests of numamig.compute.domains: listing and deleting guests."""

from unittest import mock

from numamig import exception
from numamig.compute import domains
from tests import base
from tests.unit.compute import base as cbase


class ListDomainsTest(base.TestCase):

    def test_every_domain_with_both_xmls_and_unreadable_ones_named(self):
        agent = cbase.agent(guests={'u2': 'b', 'u1': 'a'})
        xml = {('u1', False): '<live/>', ('u1', True): '<kept/>'}

        def get_xml(uuid, persistent=False):
            if uuid == 'u2':
                raise exception.InstanceNotFound(instance_uuid=uuid)
            return xml[(uuid, persistent)]
        agent.driver.get_domain_xml.side_effect = get_xml
        listed = domains.list_domains(agent)
        self.assertEqual(['u1', 'u2'], [d['uuid'] for d in listed])
        self.assertEqual(('<live/>', '<kept/>', None),
                         (listed[0]['live_xml'], listed[0]['persistent_xml'],
                          listed[0]['error']))
        self.assertIn('u2', listed[1]['error'])


class DeleteInstanceTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.inst = cbase.instance(host=cbase.HOST, pins={0: 2, 1: 10})
        self.agent = cbase.agent(instances=[self.inst])

    def test_destroys_releases_and_reports(self):
        self.assertTrue(domains.delete_instance(self.agent, None, self.inst))
        self.agent.driver.destroy.assert_called_once_with(self.inst.uuid)
        self.assertEqual(set(), cbase.pinned(
            self.agent.tracker.usage_topology()))
        self.agent.conductor_api.report_compute_node.assert_called_once()

    def test_missing_domain_still_releases_the_usage(self):
        self.agent.driver.list_guests.return_value = {}
        self.assertFalse(domains.delete_instance(self.agent, None,
                                                 self.inst))
        self.agent.driver.destroy.assert_not_called()
        self.assertEqual(set(), self.agent.tracker.instance_uuids())

    def test_refused_while_migrating_from_here(self):
        self.agent.outgoing.register(mock.Mock(
            instance=self.inst, migration=mock.Mock(uuid='m')))
        self.assertRaises(exception.MigrationError, domains.delete_instance,
                          self.agent, None, self.inst)
        self.agent.driver.destroy.assert_not_called()
