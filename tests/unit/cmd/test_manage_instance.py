"""numamig-manage instance create / adopt / list / show / delete."""

import json
from unittest import mock

from numamig import exception
from numamig.db import instances
from numamig.db import live_migratable
from numamig.scheduler import migratable
from tests.unit.cmd import cli_base


class ManageInstanceTestCase(cli_base.CLITestCase):

    def test_list(self):
        guest = self.add_instance('cn1', name='db-1')
        code, out, _ = self.run_cli('instance', 'list')
        self.assertEqual(0, code)
        self.assertIn(guest.uuid, out)
        self.assertIn('cells 0->0; 2 pinned vCPUs', out)
        self.add_report('other')
        _, out, _ = self.run_cli('instance', 'list', '--host', 'other')
        self.assertIn('No instance', out)

    def test_list_and_show_the_standing_live_migratable_answer(self):
        movable = self.add_instance('cn1', name='web-1')
        stuck = self.add_instance('cn1', name='db-1')
        unseen = self.add_instance('cn1', name='new-1')
        live_migratable.save(self.db, [
            (movable.uuid, migratable.Status(migratable.YES, (), 'cn2')),
            (stuck.uuid, migratable.Status(migratable.NO, (
                migratable.Reason(migratable.NO_HOST_FITS,
                                  'closest: cn2: too few pCPUs'),)))])
        _, out, _ = self.run_cli('instance', 'list')
        self.assertIn(' MOVABLE ', out)
        rows = {line.split()[1]: line.split()[6] for line in
                out.splitlines()[1:]}
        self.assertEqual({'web-1': 'yes', 'db-1': 'no', 'new-1': '-'},
                         rows)
        _, out, _ = self.run_cli('instance', 'show', stuck.uuid, '--no-xml')
        self.assertIn('  live-migratable: no, since ', out)
        self.assertIn('    no-host-fits: closest: cn2: too few pCPUs', out)
        _, out, _ = self.run_cli('instance', 'show', unseen.uuid,
                                 '--no-xml', '--format', 'json')
        self.assertIsNone(json.loads(out)['live_migratable'])
        _, out, _ = self.run_cli('instance', 'show', movable.uuid,
                                 '--no-xml', '--format', 'json')
        self.assertEqual(('yes', 'cn2'),
                         (json.loads(out)['live_migratable']['status'],
                          json.loads(out)['live_migratable']['witness']))

    def test_list_of_an_unknown_host_says_so(self):
        code, _, err = self.run_cli('instance', 'list', '--host', 'nope')
        self.assertEqual(127, code)
        self.assertIn('Compute host nope is not known', err)

    def test_show_records_only(self):
        guest = self.add_instance('cn1')
        code, out, _ = self.run_cli('instance', 'show', guest.uuid,
                                    '--no-xml')
        self.assertEqual(0, code)
        self.assertIn('vCPU 0->2 1->3', out)
        self.api.get_domain_xml.assert_not_called()

    def test_show_the_locality_watch(self):
        from tests.unit.cmd import test_manage_host
        guest = self.add_instance('cn1')
        other = self.add_instance('cn1')
        self.add_report('cn1', locality=test_manage_host._locality(
            guest.uuid))
        code, out, _ = self.run_cli('instance', 'show', guest.uuid,
                                    '--no-xml')
        self.assertEqual(0, code)
        self.assertIn('  locality: memory node 0 256 MiB, node 1 768 MiB; '
                      'vCPUs ran on node 0 x2; remote 75%; moved', out)
        _, out, _ = self.run_cli('instance', 'show', guest.uuid, '--no-xml',
                                 '--format', 'json')
        self.assertEqual(0.75, json.loads(out)['locality']['remote_share'])
        _, out, _ = self.run_cli('instance', 'show', other.uuid, '--no-xml')
        self.assertIn("locality: not seen at the watch's last look", out)

    def test_show_xml_agrees(self):
        guest = self.add_instance('cn1')
        self.api.get_domain_xml.return_value = cli_base.domain_xml(guest)
        code, out, _ = self.run_cli('instance', 'show', guest.uuid)
        self.assertEqual(0, code, out)
        self.assertIn('agrees with the records', out)

    def test_show_xml_differs(self):
        guest = self.add_instance('cn1')
        moved = cli_base.make_instance('cn1', uuid=guest.uuid)
        moved.numa_topology.cells[0].cpu_pinning = {0: 3, 1: 2}
        self.api.get_domain_xml.return_value = cli_base.domain_xml(moved)
        code, out, _ = self.run_cli('instance', 'show', guest.uuid,
                                    '--format', 'json')
        self.assertEqual(3, code)
        (diff,) = json.loads(out)['xml_check']['differences']
        self.assertIn('recorded pins 0->2 1->3, XML pins 0->3 1->2', diff)

    def test_show_of_a_guest_whose_domain_is_missing_is_one_line(self):
        # What the conductor passes on from the agent, as the wire
        # rebuilds it: before, ~90 lines of the agent's traceback.
        guest = self.add_instance('cn1')
        self.api.get_domain_xml.side_effect = \
            exception.keep_remote_message(cli_base.from_the_wire(
                exception.InstanceNotFound(instance_uuid=guest.uuid)))
        code, out, err = self.run_cli('instance', 'show', guest.uuid)
        self.assertEqual((0, ''), (code, err))
        self.assertIn("  domain XML not compared: host cn1 has no domain of "
                      "this guest (it is recorded there)\n", out)
        self.assertNotIn('Traceback', out)
        code, out, _ = self.run_cli('instance', 'show', guest.uuid,
                                    '--format', 'json')
        self.assertEqual({'compared': False,
                          'reason': 'host cn1 has no domain of this guest '
                                    '(it is recorded there)'},
                         json.loads(out)['xml_check'])

    def test_show_when_no_conductor_answers_is_one_line(self):
        guest = self.add_instance('cn1')
        self.api.get_domain_xml.side_effect = \
            exception.ConductorUnreachable(topic='numamig-conductor',
                                           url='rabbit://h:5672/',
                                           timeout='5')
        code, out, _ = self.run_cli('instance', 'show', guest.uuid,
                                    '--format', 'json')
        self.assertEqual(0, code)
        reason = json.loads(out)['xml_check']['reason']
        self.assertTrue(reason.startswith('No conductor answered on topic '
                                          'numamig-conductor'), reason)
        self.assertNotIn('ConductorUnreachable', reason)

    def test_show_unknown_and_malformed(self):
        self.assertEqual(127, self.run_cli('instance', 'show',
                                           cli_base.new_uuid())[0])
        code, _, err = self.run_cli('instance', 'show', 'nope')
        self.assertEqual(127, code)
        self.assertIn("'nope' is not a UUID, and no instance has that name",
                      err)
        code, out, _ = self.run_cli('instance', 'show', 'nope', '--format',
                                    'json')
        self.assertEqual((127, 127), (code, json.loads(out)['exit_code']))

    def test_show_and_delete_by_name(self):
        guest = self.add_instance('cn1', name='db-1')
        code, out, _ = self.run_cli('instance', 'show', 'db-1', '--no-xml',
                                    '--format', 'json')
        self.assertEqual(0, code, out)
        self.assertEqual(guest.uuid, json.loads(out)['uuid'])
        self.api.instance_delete.return_value = True
        code, out, _ = self.run_cli('instance', 'delete', 'db-1', '--format',
                                    'json')
        self.assertEqual(0, code, out)
        self.assertEqual(guest.uuid,
                         self.api.instance_delete.call_args[0][1])

    def test_a_name_none_has_or_several_share_is_bad_input(self):
        twins = [self.add_instance('cn1', name='web') for _ in range(2)]
        self.add_instance('cn1', name='db-1')
        self.api.instance_delete.reset_mock()
        for argv in (('show', 'web'), ('delete', 'web')):
            code, _, err = self.run_cli('instance', *argv)
            self.assertEqual(127, code, argv)
            self.assertIn("instance name 'web' is not unique", err)
            for twin in twins:
                self.assertIn(twin.uuid, err)
        code, out, err = self.run_cli('instance', 'delete', 'nobody',
                                      '--format', 'json')
        self.assertEqual(127, code)
        self.assertIn('no instance has that name', json.loads(out)['error'])
        code, _, err = self.run_cli('instance', 'show', 'x' * 300)
        self.assertEqual(127, code)
        self.assertIn('neither a UUID nor an instance name', err)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.api.instance_delete.assert_not_called()
        self.assertEqual(3, len(instances.get_all(self.db)))

    def test_create_on_a_host(self):
        created = cli_base.make_instance('cn1', name='new')
        self.api.instance_create.return_value = created
        code, out, _ = self.run_cli(
            'instance', 'create', '--host', 'cn1', '--vcpus', '2',
            '--memory', '1024', '--property', 'hw:cpu_policy=dedicated',
            '--name', 'new')
        self.assertEqual(0, code, out)
        _ctxt, sent, host = self.api.instance_create.call_args[0]
        self.assertEqual(('cn1', 'new', {'hw:cpu_policy': 'dedicated'}),
                         (host, sent.name, sent.extra_specs))
        self.assertIn('Instance new', out)

    def test_create_with_devices_sends_the_device_keys(self):
        self.api.instance_create.return_value = cli_base.make_instance()
        code, out, err = self.run_cli(
            'instance', 'create', '--auto', '--vcpus', '2', '--memory',
            '1024', '--property', 'hw:cpu_policy=dedicated', '--property',
            'pci_passthrough:alias=vf:1', '--property',
            'numamig:device_migration=refuse')
        self.assertEqual(0, code, err)
        sent = self.api.instance_create.call_args[0][1]
        self.assertEqual({'hw:cpu_policy': 'dedicated',
                          'pci_passthrough:alias': 'vf:1',
                          'numamig:device_migration': 'refuse'},
                         sent.extra_specs)

    def test_create_auto_passes_no_host(self):
        self.api.instance_create.return_value = cli_base.make_instance()
        code, _, _ = self.run_cli('instance', 'create', '--auto',
                                  '--vcpus', '2', '--memory', '1024')
        self.assertEqual(0, code)
        self.assertIsNone(self.api.instance_create.call_args[0][2])

    def test_create_no_host_takes_it(self):
        self.api.instance_create.side_effect = exception.InstanceBuildError(
            instance_uuid='x', reason='cn1: does not fit')
        code, _, err = self.run_cli('instance', 'create', '--auto',
                                    '--vcpus', '2', '--memory', '1024')
        self.assertEqual(1, code)
        self.assertIn('cn1: does not fit', err)

    def test_create_bad_input_sends_nothing(self):
        for argv, fragment in (
                (['--auto', '--host', 'cn1'], 'exactly one of'),
                (['--auto', '--property', 'cpu_policy=x'],
                 'numamig reads hw: extra specs and pci_passthrough:alias'),
                (['--auto', '--property', 'numamig:device_migration=maybe'],
                 'must be one of unplug, refuse'),
                (['--auto', '--property', 'hw:cpu_policy'], 'KEY=VALUE'),
                (['--auto', '--property', 'hw:cpu_policy=sometimes'],
                 'sometimes'),
                (['--auto', '--property', 'hw:numa_nodes=3'], 'numa')):
            code, _, err = self.run_cli('instance', 'create', '--vcpus', '2',
                                        '--memory', '1024', *argv)
            self.assertEqual(127, code, argv)
            self.assertIn(fragment, err)
        code, _, _ = self.run_cli('instance', 'create', '--auto',
                                  '--vcpus', '0', '--memory', '1024')
        self.assertEqual(127, code)
        self.api.instance_create.assert_not_called()
        self.assertEqual([], instances.get_all(self.db))

    def test_adopt(self):
        self.api.instance_adopt.return_value = [
            cli_base.make_instance('cn1', name='found')]
        code, out, _ = self.run_cli('instance', 'adopt', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('cn1: adopted 1 guest(s)', out)
        self.api.instance_adopt.return_value = []
        self.assertIn('no unknown NUMA guest',
                      self.run_cli('instance', 'adopt', 'cn1')[1])

    def test_adopt_unknown_or_down_host(self):
        self.api.instance_adopt.side_effect = exception.HostNotFound(
            host='cn9')
        self.assertEqual(127, self.run_cli('instance', 'adopt', 'cn9')[0])
        self.api.instance_adopt.side_effect = exception.ComputeHostDown(
            host='cn1', age=120, limit=60)
        self.assertEqual(1, self.run_cli('instance', 'adopt', 'cn1')[0])


class ManageInstanceDeleteTestCase(cli_base.CLITestCase):

    def test_delete(self):
        uuid = '11111111-2222-3333-4444-555555555555'
        self.api.instance_delete.return_value = True
        code, out, _ = self.run_cli('instance', 'delete', uuid)
        self.assertEqual(0, code)
        self.assertIn(f'Deleted instance {uuid}', out)
        self.api.instance_delete.assert_called_once_with(mock.ANY, uuid)

    def test_delete_again_is_not_an_error(self):
        self.api.instance_delete.return_value = False
        code, out, _ = self.run_cli(
            'instance', 'delete', '11111111-2222-3333-4444-555555555555',
            '--format', 'json')
        self.assertEqual((0, False), (code, json.loads(out)['deleted']))

    def test_delete_refused_while_migrating(self):
        uuid = '11111111-2222-3333-4444-555555555555'
        self.api.instance_delete.side_effect = exception.InstanceBusy(
            instance_uuid=uuid, action='deleted',
            reason='migration m is running')
        code, _, err = self.run_cli('instance', 'delete', uuid)
        self.assertEqual(127, code)
        self.assertIn('migration m is running', err)

    def test_malformed_uuid_sends_nothing(self):
        self.assertEqual(127, self.run_cli('instance', 'delete', 'x')[0])
        self.api.instance_delete.assert_not_called()
