"""numamig-manage host list / show / export-topology."""

import json
from unittest import mock

from numamig import exception
from tests.unit.cmd import cli_base


class ManageHostTestCase(cli_base.CLITestCase):

    def test_list_without_hosts(self):
        code, out, _ = self.run_cli('host', 'list')
        self.assertEqual((0, "No compute host has reported yet.\n"),
                         (code, out))

    def test_list_shows_state_version_and_free_resources(self):
        self.add_report('cn1')
        self.add_instance('cn1')
        code, out, _ = self.run_cli('host', 'list')
        self.assertEqual(0, code)
        row = out.splitlines()[1].split()
        self.assertEqual(['cn1', 'up', '2'], row[:3])
        self.assertIn('c0 2/2 pCPU 1G 3/4', out)
        code, out, _ = self.run_cli('host', 'list', '--format', 'json')
        (host,) = json.loads(out)['hosts']
        self.assertEqual((1, 3), (host['instances'],
                                  host['cells']['0']['pages']['1048576']
                                  ['free']))

    def test_old_report_is_down(self):
        self.add_report('cn1', reported_at=cli_base.db_base.make_report(
            'x').reported_at)
        _, out, _ = self.run_cli('host', 'list', '--format', 'json')
        self.assertEqual('down', json.loads(out)['hosts'][0]['state'])

    def test_show_draws_cells_and_guests(self):
        self.add_report('cn1')
        guest = self.add_instance('cn1', name='web-1')
        code, out, _ = self.run_cli('host', 'show', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('cell 0  cores [0s 1s] [2. 3.]', out)
        self.assertIn(f'web-1 {guest.uuid}', out)
        self.assertIn('guest cell 0 -> host cell 0', out)

    def test_show_unknown_host_is_bad_input(self):
        code, out, err = self.run_cli('host', 'show', 'nowhere')
        self.assertEqual((127, ''), (code, out))
        self.assertIn('nowhere', err)

    def test_export_topology_json(self):
        self.add_report('cn1')
        code, out, _ = self.run_cli('host', 'export-topology', 'cn1',
                                    '--format', 'json')
        self.assertEqual(0, code)
        data = json.loads(out)
        self.assertEqual(('NodeResourceTopology', ['node-0', 'node-1']),
                         (data['kind'], [z['name'] for z in data['zones']]))

    def test_export_topology_human_is_a_table(self):
        self.add_report('cn1')
        code, out, _ = self.run_cli('host', 'export-topology', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('node-1   hugepages-1Gi', out)

    def test_unreachable_database_is_unexpected(self):
        self.write_config("[database]\nconnection = "
                          "postgresql+psycopg2://u:pw@127.0.0.1:1/x\n")
        code, _, err = self.run_cli('host', 'list')
        self.assertEqual(255, code)
        self.assertIn('127.0.0.1:1', err)


class HostDeleteTestCase(cli_base.CLITestCase):

    def test_deleted_through_the_conductor(self):
        self.add_report('old-1')
        self.api.compute_node_delete.return_value = True
        code, out, _ = self.run_cli('host', 'delete', 'old-1')
        self.assertEqual(0, code)
        self.assertIn('Host old-1 deleted.', out)
        self.api.compute_node_delete.assert_called_once_with(mock.ANY,
                                                             'old-1')

    def test_unknown_host_is_bad_input_and_asks_nothing(self):
        code, _, err = self.run_cli('host', 'delete', 'nope')
        self.assertEqual(127, code)
        self.assertIn('Compute host nope is not known', err)
        self.api.compute_node_delete.assert_not_called()

    def test_host_in_use_is_refused_in_one_line(self):
        self.add_report('src')
        self.api.compute_node_delete.side_effect = exception.HostInUse(
            host='src', reason='its agent still reports')
        code, _, err = self.run_cli('host', 'delete', 'src')
        self.assertEqual(127, code)
        self.assertEqual(['error: Compute host src cannot be deleted: its '
                          'agent still reports'], err.strip().splitlines())
