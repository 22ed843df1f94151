"""numamig-manage host list / show / export-topology."""

import io
import json
from unittest import mock

from numamig import exception
from numamig import objects
from numamig.cmd.manage_commands import _drain_run_output
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

    def test_show_and_export_list_pci_devices(self):
        topology = cli_base.db_base.make_host_topology()
        topology.pci_devices = [
            objects.HostPCIDevice(address='0000:81:00.0', vendor_id='8086',
                                  product_id='1572', dev_type='type-PF',
                                  numa_node=1),
            objects.HostPCIDevice(address='0000:81:02.0', vendor_id='8086',
                                  product_id='154c', dev_type='type-VF',
                                  parent_addr='0000:81:00.0', numa_node=1,
                                  instance_uuid='g1'),
            objects.HostPCIDevice(address='0000:81:02.1', vendor_id='8086',
                                  product_id='154c', dev_type='type-VF',
                                  parent_addr='0000:81:00.0', numa_node=1),
            objects.HostPCIDevice(address='0000:05:00.0', vendor_id='10de',
                                  product_id='20b5', dev_type='type-PCI')]
        self.add_report('cn1', topology=topology)
        code, out, _ = self.run_cli('host', 'show', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('PCI devices (4, 2 free; per node free/total: 1: 1/3, '
                      '-: 1/1):', out)
        self.assertIn('0000:81:02.0 8086:154c type-VF of 0000:81:00.0 node '
                      '1: held by g1', out)
        self.assertIn('0000:81:00.0 8086:1572 type-PF node 1: blocked', out)
        self.assertIn('0000:05:00.0 10de:20b5 type-PCI node -: free', out)
        _, out, _ = self.run_cli('host', 'show', 'cn1', '--format', 'json')
        self.assertEqual({'1': {'total': 3, 'free': 1},
                          '-': {'total': 1, 'free': 1}},
                         json.loads(out)['pci_per_node'])
        entries = json.loads(out)['pci_devices']
        self.assertEqual([False, False, True, True],
                         [e['free'] for e in entries])
        _, out, _ = self.run_cli('host', 'export-topology', 'cn1',
                                 '--format', 'json')
        doc = json.loads(out)
        zone = doc['zones'][1]
        self.assertIn({'name': 'pci-8086-154c', 'capacity': '2',
                       'allocatable': '2', 'available': '1'},
                      zone['resources'])
        self.assertIn({'name': 'pci-8086-1572', 'capacity': '1',
                       'allocatable': '1', 'available': '0'},
                      zone['resources'])
        self.assertIn({'name': 'pci.unaffined.10de-20b5', 'value': '1/1'},
                      doc['attributes'])
        self.assertNotIn('pci', json.dumps(doc['zones'][0]))

    def test_show_marks_assumed_distances(self):
        # The report's cells carry no distance table: placement assumes
        # local 10, remote 20, and host show says so.
        self.add_report('cn1')
        code, out, _ = self.run_cli('host', 'show', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('distances 0:10* 1:20*', out)
        self.assertIn('distances marked * are assumed', out)
        _, out, _ = self.run_cli('host', 'show', 'cn1', '--format', 'json')
        self.assertEqual({'table': {'0': {'0': 10, '1': 20},
                                    '1': {'0': 20, '1': 10}},
                          'assumed': True}, json.loads(out)['distances'])
        topology = cli_base.db_base.make_host_topology()
        for cell in topology.cells:
            cell.distances = {0: 10 if cell.id == 0 else 21,
                              1: 10 if cell.id == 1 else 21}
        self.add_report('cn2', topology=topology)
        _, out, _ = self.run_cli('host', 'show', 'cn2')
        self.assertIn('distances 0:10 1:21', out)
        self.assertNotIn('assumed', out)
        _, out, _ = self.run_cli('host', 'show', 'cn2', '--format', 'json')
        self.assertFalse(json.loads(out)['distances']['assumed'])

    def test_show_names_the_reported_cpu(self):
        self.add_report('cn1', cpu=_cpu('EPYC', ['ss'], ['EPYC', 'qemu64']))
        self.add_report('old')
        code, out, _ = self.run_cli('host', 'show', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('CPU: EPYC, host-model EPYC (+1 features), 2 usable '
                      'models', out)
        code, out, _ = self.run_cli('host', 'show', 'cn1', '--format',
                                    'json')
        self.assertEqual(['EPYC', 'qemu64'],
                         json.loads(out)['cpu']['custom_models'])
        code, out, _ = self.run_cli('host', 'show', 'old')
        self.assertIn('CPU: not reported (an agent of release 1)', out)

    def test_show_gives_the_cpu_power_state_per_cell(self):
        self.add_report('cn1', cpu_power=objects.CPUPowerState(
            strategy='cpu_state', failed={7}, cells=[
                objects.CPUPowerCell(id=0, managed={1, 2, 3},
                                     powered_down={2, 3}),
                objects.CPUPowerCell(id=1, managed={5, 6, 7},
                                     powered_down={5, 6})]))
        self.add_report('gov', cpu_power=objects.CPUPowerState(
            strategy='governor', governor_low='powersave'))
        self.add_report('off', cpu_power=objects.CPUPowerState(
            strategy='off'))
        self.add_report('old')
        code, out, _ = self.run_cli('host', 'show', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('CPU power management: cpu_state (unused dedicated '
                      'pCPUs offline)', out)
        self.assertIn('cell 0: powered down 2-3 of managed 1-3', out)
        self.assertIn('cell 1: powered down 5-6 of managed 5-7', out)
        self.assertIn('could not set pCPUs 7', out)
        _, out, _ = self.run_cli('host', 'show', 'cn1', '--format', 'json')
        power = json.loads(out)['cpu_power']
        self.assertEqual(('cpu_state', [7], [2, 3]),
                         (power['strategy'], power['failed'],
                          power['cells']['0']['powered_down']))
        _, out, _ = self.run_cli('host', 'show', 'gov')
        self.assertIn('governor (unused dedicated pCPUs governor '
                      'powersave)', out)
        _, out, _ = self.run_cli('host', 'show', 'off')
        self.assertIn('CPU power management: off', out)
        _, out, _ = self.run_cli('host', 'show', 'old')
        self.assertIn('CPU power management: not reported', out)
    def test_show_the_locality_watch(self):
        self.add_report('old')
        guest = self.add_instance('cn1', name='web-1')
        self.add_report('cn1', locality=_locality(guest.uuid))
        self.add_report('off', locality=objects.HostLocality(policy='off'))
        code, out, _ = self.run_cli('host', 'show', 'cn1')
        self.assertEqual(0, code)
        self.assertIn('Locality watch: policy act, looked', out)
        self.assertIn('remote memory 75% of the guests\' memory; moved 1 '
                      'guests, 65536 pages', out)
        self.assertIn(f'  web-1 {guest.uuid}: memory node 0 256 MiB, node 1 '
                      f'768 MiB; vCPUs ran on node 0 x2; remote 75%; moved '
                      f'(remote share 75% above 50% for 3 intervals: memory '
                      f'to node 0)', out)
        _, out, _ = self.run_cli('host', 'show', 'cn1', '--format', 'json')
        shown = json.loads(out)['locality']
        self.assertEqual((0.75, 'move', {'0': 256, '1': 768}),
                         (shown['remote_share'], shown['guests'][0]['state'],
                          shown['guests'][0]['memory_mb']))
        _, out, _ = self.run_cli('host', 'show', 'off')
        self.assertIn('Locality watch: off ([locality] policy)', out)
        _, out, _ = self.run_cli('host', 'show', 'old')
        self.assertIn('Locality watch: not reported', out)

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

    def test_export_topology_marks_assumed_costs(self):
        # As host show marks assumed distances: JSON names them in the
        # zone's costs.assumed attribute, the table with a *.
        topology = cli_base.db_base.make_host_topology()
        for cell in topology.cells:
            cell.distances = {}
        self.add_report('cn1', topology=topology)
        _, out, _ = self.run_cli('host', 'export-topology', 'cn1')
        self.assertIn('node-0   costs node-0:10* node-1:20*', out)
        self.assertIn('costs marked * are assumed', out)
        _, out, _ = self.run_cli('host', 'export-topology', 'cn1',
                                 '--format', 'json')
        zone = json.loads(out)['zones'][1]
        self.assertEqual([20, 10], [c['value'] for c in zone['costs']])
        self.assertIn({'name': 'costs.assumed', 'value': 'node-0,node-1'},
                      zone['attributes'])
        topology = cli_base.db_base.make_host_topology()
        for cell in topology.cells:
            cell.distances = {0: 10 if cell.id == 0 else 21,
                              1: 10 if cell.id == 1 else 21}
        self.add_report('cn2', topology=topology)
        _, out, _ = self.run_cli('host', 'export-topology', 'cn2')
        self.assertIn('node-1   costs node-0:21 node-1:10', out)
        self.assertNotIn('assumed', out)

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


class HostMaintenanceTestCase(cli_base.CLITestCase):

    def test_disable_through_the_conductor(self):
        self.add_report('cn1')
        self.api.host_set_disabled.return_value = {
            'host': 'cn1', 'disabled': True,
            'disabled_at': '2026-12-01T10:00:00+00:00',
            'reason': 'new DIMMs'}
        code, out, _ = self.run_cli('host', 'disable', 'cn1', '--reason',
                                    'new DIMMs')
        self.assertEqual((0, 'Host cn1 disabled since '
                             '2026-12-01T10:00:00+00:00: new DIMMs\n'),
                         (code, out))
        self.api.host_set_disabled.assert_called_once_with(
            mock.ANY, 'cn1', True, reason='new DIMMs')

    def test_enable(self):
        self.add_report('cn1')
        self.api.host_set_disabled.return_value = {
            'host': 'cn1', 'disabled': False, 'disabled_at': None,
            'reason': None}
        code, out, _ = self.run_cli('host', 'enable', 'cn1', '--format',
                                    'json')
        self.assertEqual((0, False), (code, json.loads(out)['disabled']))
        self.api.host_set_disabled.assert_called_once_with(
            mock.ANY, 'cn1', False)

    def test_bad_input_asks_nothing(self):
        self.add_report('cn1')
        for argv, said in (
                (('disable', 'nope', '--reason', 'x'),
                 'Compute host nope is not known'),
                (('disable', 'cn1', '--reason', ' '),
                 '--reason must be 1 to 255 characters'),
                (('disable', 'cn1', '--reason', 'x' * 256),
                 '--reason must be 1 to 255 characters, got 256'),
                (('disable', 'cn1'), 'the following arguments are '
                                     'required: --reason'),
                (('enable', 'nope'), 'Compute host nope is not known')):
            code, out, err = self.run_cli('host', *argv)
            self.assertEqual((127, ''), (code, out), argv)
            self.assertEqual(1, len(err.strip().splitlines()), err)
            self.assertIn(said, err)
        self.api.host_set_disabled.assert_not_called()

    def test_list_and_show_give_the_state_and_reason(self):
        from numamig.db import compute_nodes
        self.add_report('cn1')
        self.add_report('cn2')
        compute_nodes.set_disabled(self.db, 'cn2', 'firmware update')
        _, out, _ = self.run_cli('host', 'list')
        cn1, cn2 = out.splitlines()[1:]
        self.assertNotIn('DISABLED', cn1)
        self.assertTrue(cn2.endswith('DISABLED: firmware update'), cn2)
        _, out, _ = self.run_cli('host', 'list', '--format', 'json')
        rows = {r['host']: r for r in json.loads(out)['hosts']}
        self.assertEqual((False, True, 'firmware update'), (
            rows['cn1']['disabled'], rows['cn2']['disabled'],
            rows['cn2']['disabled_reason']))
        _, out, _ = self.run_cli('host', 'show', 'cn2')
        self.assertIn('Disabled for maintenance since ', out)
        self.assertIn(': firmware update', out)


def _plan(emptiable=True, outcome=None):
    from numamig.numa import fit
    from tests.unit.numa import hosts
    placed = fit.fit(hosts.make_host(), hosts.request(
        [(2, 0, 1024, None, None)])).topology
    unplaced = [] if emptiable else [{
        'instance_uuid': 'u-2', 'name': 'big',
        'reason': 'it fits on none of the 1 destination(s): dst: ...'}]
    return {'host': 'src', 'disabled': True, 'reason': 'new DIMMs',
            'emptiable': emptiable,
            'moves': [{'instance_uuid': 'u-1', 'name': 'web-1',
                       'dest_host': 'dst', 'numa_topology': placed}],
            'unplaced': unplaced, 'left_out': {'old': 'host is down'},
            'kept_free': {'dst': [1]},
            'admission': {'waves': 1, 'queue_room': 10000, 'refused': None},
            'search': {'steps': 1, 'stopped': outcome == 'stopped',
                       'elapsed_ms': 3.5, 'max_steps': 20000,
                       'outcome': outcome or ('plan' if emptiable
                                              else 'none')}}


class HostDrainTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        for host in ('src', 'dst'):
            self.add_report(host)

    def test_a_plan_that_empties_the_host(self):
        self.api.host_drain_plan.return_value = _plan()
        code, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run',
                                    '--to', 'dst', '--keep-free-nodes', '1')
        self.assertEqual(0, code)
        self.assertIn('Drain plan of host src (disabled: new DIMMs): 1 '
                      'guest(s)', out)
        self.assertIn('  web-1 u-1 -> dst', out)
        self.assertIn('guest cell 0 -> host cell 0', out)
        self.assertIn('Kept free on dst: NUMA node(s) 1', out)
        self.assertIn('old: host is down', out)
        self.assertIn('Host src can be emptied; nothing was moved.', out)
        self.api.host_drain_plan.assert_called_once_with(
            mock.ANY, 'src', to=['dst'], keep_free_nodes=1)

    def test_guests_not_live_migratable_come_first(self):
        plan = _plan(emptiable=False)
        plan['not_migratable'] = [{
            'instance_uuid': 'u-2', 'name': 'db-1', 'status': 'no',
            'reasons': [{'kind': 'no-host-fits',
                         'detail': 'closest: dst: too few pCPUs'}]}]
        self.api.host_drain_plan.return_value = plan
        _, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run')
        lines = out.splitlines()
        self.assertEqual(['Not live-migratable now (1):', '  db-1 u-2: no',
                          '      no-host-fits: closest: dst: too few pCPUs'],
                         lines[1:4])

    def test_the_link_bound_when_the_rate_is_known_or_not(self):
        plan = _plan()
        self.api.host_drain_plan.return_value = plan
        _code, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run')
        # A conductor older than the link settings: no line.
        self.assertNotIn('Link:', out)
        plan['link'] = {'rate_mib': 110, 'memory_mb': 4096,
                        'least_seconds': 37.2}
        _code, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run')
        self.assertIn("Link: 4096 MiB of guest memory over src's migration "
                      "link of 110 MiB/s: at least 37.2 s", out)
        plan['link'] = {'rate_mib': None, 'memory_mb': 4096,
                        'least_seconds': None}
        _code, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run')
        self.assertIn("Link: 4096 MiB of guest memory to move; the rate of "
                      "src's migration link is unknown ([conductor] "
                      "migration_link_rate)", out)

    def test_a_host_that_cannot_be_emptied_answers_1(self):
        self.api.host_drain_plan.return_value = _plan(emptiable=False)
        code, out, err = self.run_cli('host', 'drain', 'src', '--dry-run')
        self.assertEqual(1, code)
        self.assertIn('Cannot be placed (1):\n  big u-2: it fits on none',
                      out)
        self.assertEqual(['error: host src cannot be emptied: no plan '
                          'exists: 1 guest(s) have no destination, e.g. '
                          'big: it fits on none of the 1 destination(s): '
                          'dst: ...; nothing was moved'], err.splitlines())
        self.assertIn('No plan exists: every destination and every order',
                      out)
        code, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run',
                                    '--format', 'json')
        data = json.loads(out)   # one document: the error is on stderr
        self.assertEqual((1, False, 'dst'), (code, data['emptiable'],
                                             data['moves'][0]['dest_host']))
        self.assertEqual(0, data['moves'][0]['numa_topology']['cells'][0]
                         ['host_cell'])

    def test_no_plan_found_within_the_limit_is_not_no_plan(self):
        self.api.host_drain_plan.return_value = _plan(emptiable=False,
                                                      outcome='stopped')
        code, out, err = self.run_cli('host', 'drain', 'src', '--dry-run')
        self.assertEqual(1, code)
        self.assertIn('No plan found within 20000 placements; one may '
                      'exist: raise [scheduler] drain_plan_max_steps to '
                      'search further.', out)
        self.assertNotIn('No plan exists', out)
        self.assertEqual(['error: host src cannot be emptied: no plan '
                          'found within 20000 placements, though one may '
                          'exist (raise [scheduler] drain_plan_max_steps '
                          'to search further): 1 guest(s) have no '
                          'destination, e.g. big: it fits on none of the 1 '
                          'destination(s): dst: ...; nothing was moved'],
                         err.splitlines())
        code, out, _ = self.run_cli('host', 'drain', 'src', '--dry-run',
                                    '--format', 'json')
        data = json.loads(out)
        self.assertEqual(('stopped', 20000), (data['search']['outcome'],
                                              data['search']['max_steps']))

    def test_bad_input_asks_nothing(self):
        for argv, said in (
                (('nope', '--dry-run'), 'Compute host nope is not known'),
                (('src', '--dry-run', '--to', 'dst,nope'),
                 'Compute host nope is not known'),
                (('src', '--dry-run', '--to', 'dst,,x'),
                 '--to must list host names separated by commas'),
                (('src', '--dry-run', '--keep-free-nodes', '-1'),
                 '--keep-free-nodes must be 0 to 64, got -1'),
                (('src', '--parallel', '0'),
                 '--parallel must be 1 to 64, got 0'),
                (('src', '--timeout', '5'), '--timeout 5 needs --wait'),
                (('src', '--wait', '--timeout', '0'),
                 '--timeout 0 needs --wait and a number of seconds above '
                 '0, at most 86400'),
                (('src', '--dry-run', '--wait'),
                 '--dry-run moves nothing'),
                (('nope',), 'Compute host nope is not known'),
                (('show', 'src', 'x'),
                 "drain takes HOST, 'show HOST' or 'abort HOST', got "
                 "'show src x'"),
                (('stop', 'src'), "got 'stop src'"),
                # Before: 'Compute host show is not known'.
                (('show',), "'drain show' needs the host: 'drain show "
                            "HOST'"),
                (('abort',), "'drain abort' needs the host"),
                # Before: a drain started, --abort-running ignored.
                (('src', '--abort-running'),
                 "--abort-running is for 'drain abort HOST'; nothing was "
                 "started"),
                # Before: --wait ignored; nothing followed.
                (('show', 'src', '--wait'),
                 "'drain show HOST' takes no --wait: they are for starting "
                 "a drain"),
                (('abort', 'src', '--dry-run', '--parallel', '2'),
                 "'drain abort HOST' takes no --dry-run, --parallel")):
            code, out, err = self.run_cli('host', 'drain', *argv)
            self.assertEqual((127, ''), (code, out), argv)
            self.assertEqual(1, len(err.strip().splitlines()), err)
            self.assertIn(said, err)
        self.api.host_drain_plan.assert_not_called()
        self.api.host_drain_start.assert_not_called()
        self.api.host_drain_show.assert_not_called()
        self.api.host_drain_abort.assert_not_called()


def _drain(status='running', moves=None, signature='1:', **report):
    moves = moves if moves is not None else [_drain_move()]
    summary = {'moved': 0, 'failed': [], 'cancelled': 0, 'pending': 0,
               'migrating': 1, 'replanned': 0, 'elapsed_s': 1.5}
    summary.update(report)
    return {'uuid': 'd-1', 'host': 'src', 'status': status, 'parallel': 2,
            'created_at': '2026-11-25T22:00:00+00:00', 'moves': moves,
            'report': summary, 'signature': signature}


def _drain_move(status='migrating', migration='running', processed=512,
                dest=None, attempts=1, error=None):
    return {'instance_uuid': 'u-1', 'name': 'web-1', 'status': status,
            'planned_host': 'dst', 'dest_host': dest, 'attempts': attempts,
            'error': error,
            'migration': None if migration is None else {
                'uuid': 'm-1', 'status': migration,
                'memory_processed': processed, 'memory_total': 1024}}


class HostDrainRunTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        for host in ('src', 'dst'):
            self.add_report(host)

    def test_start_prints_the_drain_and_returns(self):
        self.api.host_drain_start.return_value = _drain()
        code, out, _ = self.run_cli('host', 'drain', 'src', '--parallel', '3')
        self.assertEqual(0, code)
        self.assertIn('Drain d-1 of host src: running (1 guest(s), 2 at '
                      'once', out)
        self.assertIn('web-1 u-1 -> dst: migrating (migration m-1 running, '
                      '50%)', out)
        self.api.host_drain_start.assert_called_once_with(
            mock.ANY, 'src', 3, to=None, keep_free_nodes=0)
        self.api.host_drain_wait.assert_not_called()

    def test_a_paused_move_says_what_the_drain_waits_for(self):
        self.api.host_drain_show.return_value = _drain(
            moves=[_drain_move(migration='postcopy-paused')])
        code, out, _ = self.run_cli('host', 'drain', 'show', 'src')
        self.assertEqual(0, code)
        self.assertIn("web-1 u-1 -> dst: migrating (migration m-1 "
                      "postcopy-paused, 50%): the drain waits for "
                      "'numamig-manage migration resume m-1'", out)

    def test_the_default_parallelism_is_the_option(self):
        self.flags(drain_parallel=5, group='conductor')
        self.api.host_drain_start.return_value = _drain()
        self.run_cli('host', 'drain', 'src')
        self.assertEqual(5, self.api.host_drain_start.call_args[0][2])

    def test_wait_follows_each_change_until_the_end(self):
        self.api.host_drain_start.return_value = _drain()
        done = _drain('completed', [_drain_move(
            'completed', migration=None, dest='dst')], signature='2:',
            moved=1, migrating=0)
        self.api.host_drain_wait.side_effect = [
            _drain(moves=[_drain_move(processed=1024)], signature='1:x'),
            done]
        code, out, err = self.run_cli('host', 'drain', 'src', '--wait',
                                      '--timeout', '60')
        self.assertEqual(0, code, err)
        self.assertEqual([
            '  web-1 u-1 -> dst: migrating (migration m-1 running, 50%)',
            '  web-1 u-1 -> dst: migrating (migration m-1 running, 100%)',
            '  web-1 u-1 -> dst: completed'], err.splitlines())
        self.assertIn('Moved 1, failed 0', out)
        self.assertIn('Host src stays disabled', out)
        self.assertEqual(2, self.api.host_drain_wait.call_count)

    def test_wait_on_a_drain_that_failed_answers_1_with_why(self):
        self.api.host_drain_start.return_value = _drain()
        self.api.host_drain_wait.return_value = _drain(
            'failed', [_drain_move('failed', migration=None,
                                   error='fits nowhere')], signature='2:',
            failed=[{'instance_uuid': 'u-1', 'name': 'web-1',
                     'reason': 'fits nowhere'}])
        code, out, err = self.run_cli('host', 'drain', 'src', '--wait',
                                      '--format', 'json')
        self.assertEqual(1, code)
        self.assertEqual('failed', json.loads(out.split('\n{"error"')[0])[
            'status'])
        self.assertIn('error: drain d-1 of src failed: 0 moved, 1 failed '
                      '(web-1: fits nowhere), 0 cancelled', err)

    def test_wait_stops_at_its_timeout(self):
        self.api.host_drain_start.return_value = _drain()
        self.api.host_drain_wait.side_effect = \
            lambda ctxt, data, asked: _drain(signature=f"1:{asked}")
        code, _, err = self.run_cli('host', 'drain', 'src', '--wait',
                                    '--timeout', '0.05')
        self.assertEqual(1, code)
        self.assertIn('did not end within 0.05 s; it goes on', err)
        for call in self.api.host_drain_wait.call_args_list:
            self.assertLessEqual(call[0][2], 0.05)

    def test_show_and_abort(self):
        self.api.host_drain_show.return_value = _drain('completed')
        code, out, _ = self.run_cli('host', 'drain', 'show', 'src',
                                    '--format', 'json')
        self.assertEqual((0, 'completed'), (code, json.loads(out)['status']))
        self.api.host_drain_show.assert_called_once_with(mock.ANY,
                                                         host='src')
        self.api.host_drain_abort.return_value = _drain('aborting')
        code, out, _ = self.run_cli('host', 'drain', 'abort', 'src',
                                    '--abort-running')
        self.assertEqual(0, code)
        self.assertIn('aborting', out)
        self.api.host_drain_abort.assert_called_once_with(
            mock.ANY, 'src', abort_running=True)

    def test_a_refused_drain_answers_1_in_one_line(self):
        self.api.host_drain_start.side_effect = exception.DrainRefused(
            host='src', reason='1 guest(s) have no destination')
        code, out, err = self.run_cli('host', 'drain', 'src')
        self.assertEqual((1, ''), (code, out))
        self.assertEqual(['error: Host src cannot be drained: 1 guest(s) '
                          'have no destination'], err.splitlines())


class HostDefragmentTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        for host in ('src', 'dst'):
            self.add_report(host)

    def _answer(self, found=True):
        placement = _plan()['moves'][0]['numa_topology'] if found else None
        return {'found': found, 'host': 'src' if found else None,
                'placement': placement,
                'reason': None if found else 'none fit',
                'moves': [{'instance_uuid': 'u-1', 'name': 'web-1',
                           'source_host': 'src', 'dest_host': 'dst',
                           'numa_topology': None}] if found else [],
                'search': {'steps': 3, 'stopped': False, 'elapsed_ms': 2.0}}

    def test_the_plan_is_printed_and_asked_with_the_specs(self):
        self.api.host_defragment_plan.return_value = self._answer()
        code, out, _ = self.run_cli(
            'host', 'defragment', '--dry-run', '--for',
            'vcpus=8,memory_mb=16384,hw:cpu_policy=dedicated,'
            'hw:numa_nodes=1', '--hosts', 'src', '--max-moves', '2')
        self.assertEqual(0, code)
        self.assertIn('Room on src after 1 migration(s), in this order:\n'
                      '  web-1 u-1: src -> dst', out)
        self.assertIn('guest cell 0 -> host cell 0', out)
        code, out, _ = self.run_cli(
            'host', 'defragment', '--dry-run', '--format', 'json', '--for',
            'vcpus=8,memory_mb=16384,hw:cpu_policy=dedicated')
        data = json.loads(out)
        self.assertEqual((0, 0), (code, data['placement']['cells'][0][
            'host_cell']))
        self.api.host_defragment_plan.assert_any_call(
            mock.ANY, 8, 16384, {'hw:cpu_policy': 'dedicated',
                                 'hw:numa_nodes': '1'},
            hosts=['src'], max_moves=2)

    def test_keys_numamig_does_not_read_are_named(self):
        # Issue 44: foo=bar was dropped without a word.
        self.api.host_defragment_plan.return_value = self._answer()
        code, out, _ = self.run_cli(
            'host', 'defragment', '--dry-run', '--for',
            'vcpus=2,memory_mb=512,hw:cpu_policy=dedicated,foo=bar,'
            'cpu_policy=dedicated')
        self.assertEqual(0, code)
        self.assertIn("Not read by numamig (another service's keys), left "
                      "out of the plan: cpu_policy, foo", out)
        code, out, _ = self.run_cli(
            'host', 'defragment', '--dry-run', '--format', 'json', '--for',
            'vcpus=2,memory_mb=512,hw:cpu_policy=dedicated')
        self.assertEqual([], json.loads(out)['unread_keys'])

    def test_no_room_answers_1(self):
        self.api.host_defragment_plan.return_value = self._answer(False)
        code, out, err = self.run_cli('host', 'defragment', '--dry-run',
                                      '--for', 'vcpus=2,memory_mb=512')
        self.assertEqual(1, code)
        self.assertIn('No room found: none fit', out)
        self.assertEqual(['error: no room for the guest: none fit'],
                         err.splitlines())

    def test_bad_input_asks_nothing(self):
        for argv, said in (
                (('--for', 'vcpus=2,memory_mb=512'),
                 'give one of --dry-run (show the plan) and --execute'),
                (('--for', 'vcpus=2,memory_mb=512', '--execute',
                  '--dry-run'), 'give one of --dry-run'),
                # Before: "need a drain that moves guests" (no drain here).
                (('--for', 'vcpus=2,memory_mb=512', '--dry-run', '--wait'),
                 '--wait and --parallel need --execute; --dry-run moves '
                 'nothing'),
                (('--for', 'vcpus=2,memory_mb=512', '--execute',
                  '--parallel', '65'), '--parallel must be 1 to 64'),
                (('--execute', '--for', 'vcpus=2,memory_mb=1', '--hosts',
                  'nope'), 'Compute host nope is not known'),
                (('--dry-run', '--for', 'memory_mb=512'),
                 "--for needs vcpus=N with N a positive integer, got "
                 "None"),
                (('--dry-run', '--for', 'vcpus=two,memory_mb=512'),
                 "got 'two'"),
                (('--dry-run', '--for', 'vcpus=2,memory_mb'),
                 "--for takes KEY=VALUE pairs"),
                (('--dry-run', '--for', 'vcpus=2,memory_mb=1',
                  '--max-moves', '9'), '--max-moves must be 0 to 8'),
                (('--dry-run', '--for', 'vcpus=2,memory_mb=1', '--hosts',
                  'nope'), 'Compute host nope is not known')):
            code, out, err = self.run_cli('host', 'defragment', *argv)
            self.assertEqual((127, ''), (code, out), argv)
            self.assertEqual(1, len(err.strip().splitlines()), err)
            self.assertIn(said, err)
        self.api.host_defragment_plan.assert_not_called()
        self.api.host_defragment_start.assert_not_called()

    def _defragmentation(self, status='running', room=None):
        data = _drain(status, [dict(_drain_move(), source_host='src')],
                      room=room, room_reason=None if room else 'taken')
        data['kind'] = 'defragment'
        return data

    def test_execute_starts_it_and_prints_it(self):
        self.api.host_defragment_start.return_value = \
            self._defragmentation()
        code, out, _ = self.run_cli(
            'host', 'defragment', '--execute', '--parallel', '3', '--for',
            'vcpus=8,memory_mb=512,hw:numa_nodes=1', '--hosts', 'src')
        self.assertEqual(0, code)
        self.assertIn('Defragmentation d-1 on src: running (1 guest(s)',
                      out)
        self.assertIn('web-1 u-1 src -> dst: migrating', out)
        self.api.host_defragment_start.assert_called_once_with(
            mock.ANY, 8, 512, {'hw:numa_nodes': '1'}, 3, hosts=['src'],
            max_moves=3)
        self.api.host_defragment_plan.assert_not_called()

    def test_execute_wait_ends_with_the_room_or_why_not(self):
        for room, code_wanted, said in (
                (True, 0, 'Room for the guest on src: yes'),
                (False, 1, 'Room for the guest on src: no: taken')):
            self.api.host_defragment_start.return_value = \
                self._defragmentation()
            ended = self._defragmentation(
                'completed' if room else 'failed', room=room)
            ended['signature'] = '2:'
            self.api.host_drain_wait.return_value = ended
            code, out, err = self.run_cli(
                'host', 'defragment', '--execute', '--wait', '--for',
                'vcpus=8,memory_mb=512,hw:numa_nodes=1')
            self.assertEqual(code_wanted, code, err)
            self.assertIn(said, out)
            if not room:
                self.assertIn('no room for the guest: taken', err)


class DrainWaitStillWaitingTestCase(cli_base.CLITestCase):
    """``host drain --wait`` says which move is stuck, at a bounded rate,
    from the waits it makes anyway (no poll of its own)."""

    def follow(self, answers, timeout):
        now = [0.0]
        stream = io.StringIO()
        api = mock.Mock()

        def wait(ctxt, data, asked):
            now[0] += asked          # held for its whole time: unchanged
            return answers(now[0])
        api.host_drain_wait.side_effect = wait
        _drain_run_output.follow(api, None, answers(0.0), 'human',
                                 timeout=timeout, stream=stream,
                                 clock=lambda: now[0],
                                 sleep=lambda s: None)
        return stream.getvalue().splitlines(), api

    def test_a_stuck_move_is_said_every_30_s_at_most(self):
        stuck = _drain(moves=[_drain_move(migration='accepted',
                                          processed=0)])
        lines, api = self.follow(lambda now: stuck, timeout=100)
        said = [line for line in lines if 'still waiting' in line]
        # Unchanged from 0 s: said at 30 s and 60 s, again at 90 s.
        self.assertEqual(
            ['  still waiting: web-1 -> dst, migration m-1 accepted at 0% '
             'for 30 s',
             '  still waiting: web-1 -> dst, migration m-1 accepted at 0% '
             'for 60 s',
             '  still waiting: web-1 -> dst, migration m-1 accepted at 0% '
             'for 90 s'], said)
        # The waits it made anyway, 10 s each: no poll of its own.
        self.assertEqual(10, api.host_drain_wait.call_count)

    def test_a_moving_migration_is_not_stuck(self):
        def moving(now):
            return _drain(moves=[_drain_move(processed=int(now))],
                          signature=f"1:{now}")
        lines, _ = self.follow(moving, timeout=100)
        self.assertEqual([], [line for line in lines
                              if 'still waiting' in line])

    def test_json_says_nothing_on_the_terminal(self):
        stuck = _drain(moves=[_drain_move(migration='accepted')])
        now = [0.0]
        stream = io.StringIO()
        api = mock.Mock()

        def wait(ctxt, data, asked):
            now[0] += asked
            return stuck
        api.host_drain_wait.side_effect = wait
        _drain_run_output.follow(api, None, stuck, 'json', timeout=100,
                                 stream=stream, clock=lambda: now[0],
                                 sleep=lambda s: None)
        self.assertEqual('', stream.getvalue())


def _cpu(model, features, models):
    return objects.HostCPU(arch='x86_64', model=model, features=[],
                           host_model=model, host_model_features=features,
                           custom_models=models)


class HostCPUBaselineTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.add_report('rich', cpu=_cpu(
            'Icelake-Server', ['pku', 'ss'],
            ['Broadwell', 'Icelake-Server', 'qemu64']))
        self.add_report('poor', cpu=_cpu('Broadwell', ['ss'],
                                         ['Broadwell', 'qemu64']))

    def test_json_names_a_model_both_run(self):
        code, out, _ = self.run_cli('host', 'cpu-baseline', 'rich', 'poor',
                                    '--format', 'json')
        self.assertEqual(0, code)
        data = json.loads(out)
        self.assertEqual(('Broadwell', ['ss'], ['Broadwell', 'qemu64']),
                         (data['model'], data['features'],
                          data['common_models']))
        self.assertEqual(['poor', 'rich'], [h['host'] for h in data['hosts']])
        self.assertIn('<model fallback="forbid">Broadwell</model>',
                      data['cpu_xml'])

    def test_table(self):
        code, out, _ = self.run_cli('host', 'cpu-baseline', 'rich', 'poor')
        self.assertEqual(0, code)
        self.assertIn('Baseline: Broadwell (host-model of 1 of 2 hosts)',
                      out)
        self.assertIn('Features all report: ss', out)

    def test_no_common_model_is_no(self):
        self.add_report('other', cpu=_cpu('EPYC', ['ss'], ['EPYC']))
        code, out, _ = self.run_cli('host', 'cpu-baseline', 'rich', 'other')
        self.assertEqual(1, code)
        self.assertIn('No baseline model: no custom model is usable on all',
                      out)

    def test_hosts_without_domain_capabilities_are_named(self):
        self.add_report('test-1', cpu=objects.HostCPU(
            arch='x86_64', model='EPYC', features=[]))
        code, out, _ = self.run_cli('host', 'cpu-baseline', 'rich', 'test-1')
        self.assertEqual(1, code)
        self.assertIn('No baseline model: no domain capabilities (host-model, '
                      'usable models) reported by test-1', out)
        code, out, _ = self.run_cli('host', 'show', 'test-1')
        self.assertIn('CPU: EPYC, no domain capabilities reported', out)

    def test_unknown_host_is_one_line_of_bad_input(self):
        code, out, err = self.run_cli('host', 'cpu-baseline', 'rich', 'nope')
        self.assertEqual((127, ''), (code, out))
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn('nope', err)

    def test_host_of_release_1_reports_no_cpu(self):
        self.add_report('old')
        code, _, err = self.run_cli('host', 'cpu-baseline', 'rich', 'old')
        self.assertEqual(127, code)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn('no CPU reported by old', err)


def _locality(uuid):
    return objects.HostLocality(
        policy='act', measured_at=cli_base._now(), remote_share=0.75,
        moves_total=1, pages_moved_total=65536,
        guests=[objects.GuestLocality(
            instance_uuid=uuid, memory_mb={0: 256, 1: 768},
            vcpu_nodes={0: 2}, home_node=0, remote_share=0.75,
            state='move', reason='remote share 75% above 50% for 3 '
                                 'intervals: memory to node 0', moves=1)])
