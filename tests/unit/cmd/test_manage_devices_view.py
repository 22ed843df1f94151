"""How migration show words the destination's verification of a guest's
passed-through devices."""

import json

from numamig.cmd.manage_commands import devices_view as dv
from numamig.db import migration_satellites
from numamig.db import migrations
from tests import base
from tests.unit.cmd import cli_base

NIC = {'alias': 'nic', 'address': '0000:82:00.0', 'guest_cell': '1',
       'cell_nodes': '1', 'device_node': '1', 'plugged': 'yes',
       'local': 'yes'}
GPU = {'alias': 'gpu', 'address': '0000:03:00.0', 'guest_cell': '0',
       'cell_nodes': '0,1', 'device_node': None, 'plugged': 'no',
       'local': 'no'}
VF = {'alias': 'vf', 'address': '0000:83:00.1', 'guest_cell': '1',
      'cell_nodes': '1', 'device_node': '0', 'plugged': 'yes',
      'local': 'no'}


class DevicesViewTestCase(base.TestCase):

    def test_typed_view_and_one_line_per_device(self):
        data = dv.view({'host': 'dst', 'devices': [NIC, GPU, VF]})
        self.assertEqual(
            {'host': 'dst', 'all_local': False, 'devices': [
                {'alias': 'nic', 'address': '0000:82:00.0',
                 'guest_cell': 1, 'cell_nodes': [1], 'device_node': 1,
                 'plugged': True, 'local': True},
                {'alias': 'gpu', 'address': '0000:03:00.0',
                 'guest_cell': 0, 'cell_nodes': [0, 1],
                 'device_node': None, 'plugged': False, 'local': False},
                {'alias': 'vf', 'address': '0000:83:00.1',
                 'guest_cell': 1, 'cell_nodes': [1], 'device_node': 0,
                 'plugged': True, 'local': False}]}, data)
        self.assertEqual(
            ['devices verified on dst: 2 of 3 NOT plugged or not local',
             '  nic 0000:82:00.0 of guest cell 1 (host nodes 1): plugged, '
             'on node 1',
             '  gpu 0000:03:00.0 of guest cell 0 (host nodes 0,1): NOT '
             'plugged',
             '  vf 0000:83:00.1 of guest cell 1 (host nodes 1): plugged, '
             'on node 0: NOT local'], dv.lines(data))

    def test_nothing_verified_prints_nothing(self):
        self.assertIsNone(dv.view(None))
        self.assertIsNone(dv.view({'host': None, 'devices': []}))
        self.assertEqual([], dv.lines(None))


class ShowDevicesTestCase(cli_base.CLITestCase):
    """Recorded through the conductor's database code, read back by
    numamig-manage: the satellite record's round trip."""

    def test_text_and_json(self):
        guest = self.add_instance('src')
        mig = migrations.create(self.db, cli_base.make_migration(
            guest.uuid, status='running', dest_host='dst'))
        self.assertTrue(migration_satellites.record_devices(
            self.db, mig.uuid, 'dst', [NIC]))
        code, out, _ = self.run_cli('migration', 'show', mig.uuid)
        self.assertEqual(0, code)
        self.assertIn('  devices verified on dst: all 1 plugged and local '
                      'to their guest cells\n'
                      '    nic 0000:82:00.0 of guest cell 1 (host nodes 1): '
                      'plugged, on node 1\n', out)
        code, out, _ = self.run_cli('migration', 'show', mig.uuid,
                                    '--format', 'json')
        self.assertEqual(0, code)
        shown = json.loads(out)['devices']
        self.assertEqual(('dst', True, 1, True),
                         (shown['host'], shown['all_local'],
                          shown['devices'][0]['device_node'],
                          shown['devices'][0]['local']))

    def test_json_null_when_nothing_verified(self):
        guest = self.add_instance('src')
        mig = migrations.create(self.db, cli_base.make_migration(guest.uuid))
        code, out, _ = self.run_cli('migration', 'show', mig.uuid,
                                    '--format', 'json')
        self.assertIsNone(json.loads(out)['devices'])
        self.assertNotIn('devices verified', self.run_cli(
            'migration', 'show', mig.uuid)[1])
