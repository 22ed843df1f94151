"""numamig-manage audit pins: findings from domain XML, grouped."""

import json

from numamig.db import instances
from numamig.db import migrations
from tests.unit.cmd import cli_base


class ManageAuditTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.add_report('src')
        self.xml = {}
        self.persistent = {}
        self.api.get_domain_xml.side_effect = \
            lambda ctxt, uuid: self.xml[uuid]
        self.api.host_domains.side_effect = self.host_domains

    def host_domains(self, ctxt, host):
        return [{'uuid': uuid, 'name': f'dom-{uuid[:4]}', 'live_xml': xml,
                 'persistent_xml': self.persistent.get(uuid, xml),
                 'error': None} for uuid, xml in self.xml.items()]

    def guest(self, pins, **overrides):
        instance = cli_base.make_instance('src', **overrides)
        instance.numa_topology.cells[0].cpu_pinning = pins
        instance = instances.create(self.db, instance).instance
        self.xml[instance.uuid] = cli_base.domain_xml(instance)
        self.report_as_recorded()
        return instance

    def test_nothing_found(self):
        self.guest({0: 2, 1: 3})
        code, out, _ = self.run_cli('audit', 'pins')
        self.assertEqual((0, "Audited src: nothing found.\n"), (code, out))

    def test_pcpus_pinned_twice(self):
        first = self.guest({0: 2, 1: 3})
        second = self.guest({0: 2, 1: 3})
        code, out, _ = self.run_cli('audit', 'pins', '--format', 'json')
        self.assertEqual(3, code)
        (group,) = json.loads(out)['groups']
        self.assertEqual('pcpu-pinned-twice', group['kind'])
        self.assertEqual({first.uuid, second.uuid},
                         set(group['findings'][0]['instance_uuids']))

    def test_xml_differs_and_unreadable(self):
        guest = self.guest({0: 2, 1: 3})
        other = cli_base.make_instance('src', uuid=guest.uuid)
        other.numa_topology.cells[0].cpu_pinning = {0: 3, 1: 2}
        self.xml[guest.uuid] = cli_base.domain_xml(other)
        code, out, _ = self.run_cli('audit', 'pins')
        self.assertEqual(3, code)
        self.assertIn("domain XML differs from numamig's records (1)", out)
        self.xml[guest.uuid] = '<domain'
        code, out, _ = self.run_cli('audit', 'pins')
        self.assertIn('domain XML that could not be read', out)

    def test_leaked_claim_is_reported(self):
        guest = self.guest({0: 2, 1: 3})
        mig = migrations.create(self.db, cli_base.make_migration(
            guest.uuid, dest_host='dst'))
        instances.set_migration_context(
            self.db, guest.uuid, cli_base.make_context(guest, mig.uuid))
        migrations.set_status(self.db, mig.uuid, 'error')
        code, out, _ = self.run_cli('audit', 'pins')
        self.assertEqual(3, code)
        self.assertIn('claims held by migrations no longer in progress', out)
        self.assertIn('which is error', out)

    def test_unknown_host(self):
        code, _, err = self.run_cli('audit', 'pins', '--host', 'nope')
        self.assertEqual(127, code)
        self.assertIn('nope', err)

    def test_unrecorded_guest_sharing_pcpus_is_found(self):
        recorded = self.guest({0: 2, 1: 3})
        stranger = cli_base.make_instance('src')
        stranger.numa_topology.cells[0].cpu_pinning = {0: 3, 1: 2}
        self.xml[stranger.uuid] = cli_base.domain_xml(stranger)
        code, out, _ = self.run_cli('audit', 'pins', '--format', 'json')
        self.assertEqual(3, code)
        (group,) = json.loads(out)['groups']
        self.assertEqual('pcpu-pinned-twice', group['kind'])
        self.assertEqual({recorded.uuid, stranger.uuid},
                         set(group['findings'][0]['instance_uuids']))

    def test_persistent_definition_differing_is_found(self):
        guest = self.guest({0: 2, 1: 3})
        other = cli_base.make_instance('src', uuid=guest.uuid)
        other.numa_topology.cells[0].cpu_pinning = {0: 3, 1: 2}
        self.persistent[guest.uuid] = cli_base.domain_xml(other)
        code, out, _ = self.run_cli('audit', 'pins')
        self.assertEqual(3, code)
        self.assertIn('persistent definition differs', out)

    def test_recorded_guest_missing_on_its_host(self):
        guest = self.guest({0: 2, 1: 3})
        del self.xml[guest.uuid]
        code, out, _ = self.run_cli('audit', 'pins')
        self.assertEqual(3, code)
        self.assertIn('whose hypervisor has no domain for it', out)
        # Missing, not unreadable: there is no XML to read.
        self.assertIn('guests recorded on a host that has no domain for '
                      'them (1)', out)
        self.assertNotIn('could not be read', out)

    def test_capped_conductor_reads_recorded_guests_one_by_one(self):
        self.api.can_operate.return_value = False
        self.guest({0: 2, 1: 3})
        self.assertEqual(0, self.run_cli('audit', 'pins')[0])
        self.api.host_domains.assert_not_called()
