"""numamig-manage instance memory set / host reclaim on the embedded tier.

Through the real conductor and agents over the in-process transport,
on libvirt test-driver hosts (2 cells): a guest created with
``hw:virtio_mem_*`` keys gets its devices and its host holds them; a
dry run shows the plan; a real change reaches the agent, which the test
driver cannot resize (no updateDeviceFlags): it is recorded as failed
and nothing changes, neither the record nor the usage.
"""

from tests.functional import test_manage_embedded as embedded_base

_SPECS = ('--property', 'hw:numa_nodes=2', '--property',
          'hw:virtio_mem_size=512', '--property',
          'hw:virtio_mem_requested=256')


class ManageVirtioMemTestCase(embedded_base.ManageEmbeddedTestCase):

    def _create(self):
        created = self.json_of('instance', 'create', '--host', 'host-a',
                               '--vcpus', '2', '--memory', '1024', *_SPECS)
        self.dep.report_all()
        return created['uuid']

    def _held(self):
        host = self.json_of('host', 'show', 'host-a')
        return host

    def test_create_show_and_plan(self):
        uuid = self._create()
        xml = self.dep.agent('host-a').driver.get_domain_xml(uuid)
        self.assertEqual(2, xml.count("<memory model='virtio-mem'>"))
        plan = self.json_of('instance', 'memory', 'set', uuid,
                            '--host-node', '0', '--size', '384',
                            '--exact', '--dry-run')
        self.assertEqual(('planned', -128, -128, 0),
                         (plan['status'], plan['plan']['wanted_mb'],
                          plan['plan']['on_node_mb'],
                          plan['plan']['short_mb']))
        reclaim = self.json_of('host', 'reclaim', 'host-a', '--node', '1',
                               '--size', '300', '--dry-run')
        self.assertEqual((-300, -256, -44, 0), (
            reclaim['plan']['wanted_mb'], reclaim['plan']['on_node_mb'],
            reclaim['plan']['elsewhere_mb'], reclaim['plan']['short_mb']))

    def test_resize_refused_by_the_test_driver_changes_nothing(self):
        uuid = self._create()
        before = self.json_of('instance', 'show', uuid, '--no-xml')
        code, out, err = self.cli('instance', 'memory', 'set', uuid,
                                  '--host-node', '0', '--size', '256')
        self.assertEqual(1, code, out + err)
        self.assertIn('resize the virtio-mem device', out + err)
        self.assertEqual(before, self.json_of('instance', 'show', uuid,
                                              '--no-xml'))

    def test_bad_input_one_line_nothing_changed(self):
        uuid = self._create()
        before = self.json_of('instance', 'show', uuid, '--no-xml')
        for argv, fragment in (
                (('instance', 'memory', 'set', uuid, '--host-node', '0',
                  '--size', '4096'), '0 to 1024 MiB'),
                (('instance', 'memory', 'set', uuid, '--host-node', '-1',
                  '--size', '256'), '--node must be 0 to 1023'),
                (('host', 'reclaim', 'host-a', '--node', '0', '--size',
                  '0'), '--size must be 1'),
                (('host', 'reclaim', 'nowhere', '--node', '0', '--size',
                  '10'), 'nowhere')):
            code, out, err = self.cli(*argv)
            self.assertEqual((127, 1), (code, len(err.strip().splitlines())),
                             (argv, out, err))
            self.assertIn(fragment, err)
        self.assertEqual(before, self.json_of('instance', 'show', uuid,
                                              '--no-xml'))

    def test_host_show_and_export_show_reclaimable_per_node(self):
        self._create()
        shown = self.json_of('host', 'show', 'host-a')
        self.assertEqual(
            {'0': {'devices': 1, 'reclaimable_mb': 256, 'growable_mb': 256},
             '1': {'devices': 1, 'reclaimable_mb': 256,
                   'growable_mb': 256}}, shown['virtio_mem'])
        code, out, _ = self.cli('host', 'show', 'host-a')
        self.assertIn('node 1: virtio-mem 1 devices, reclaimable 256 MiB',
                      out)
        nrt = self.json_of('host', 'export-topology', 'host-a')
        attributes = {a['name']: a['value']
                      for a in nrt['zones'][1]['attributes']}
        self.assertEqual(str(256 * 1024 * 1024),
                         attributes['virtio-mem.reclaimable'])
        # The host holds boot + device memory for the guest's node 1.
        cell = next(c for c in shown['topology']['cells'] if c['id'] == 1)
        self.assertEqual(512 + 256, cell['memory_usage_mb'])

    def test_migration_keeps_the_devices_in_records_xml_and_usage(self):
        uuid = self._create()
        moved = self.json_of('migration', 'start', uuid, '--host', 'host-b',
                             '--wait')
        self.assertEqual(('completed', 'host-b'),
                         (moved['status'], moved['dest_host']))
        shown = self.json_of('instance', 'show', uuid)
        self.assertEqual([], shown['xml_check']['differences'])
        self.assertEqual([(512, 256), (512, 256)], [
            (c['virtio_mem_size_mb'], c['virtio_mem_requested_mb'])
            for c in shown['numa_topology']['cells']])
        xml = self.dep.agent('host-b').driver.get_domain_xml(uuid)
        self.assertEqual(2, xml.count("<memory model='virtio-mem'>"))
        self.dep.report_all()
        dest = self.json_of('host', 'show', 'host-b')
        self.assertEqual({'0', '1'}, set(dest['virtio_mem']))
        for cell in dest['topology']['cells']:
            self.assertEqual(512 + 256, cell['memory_usage_mb'])
        source = self.json_of('host', 'show', 'host-a')
        self.assertEqual(({}, [0, 0]), (source['virtio_mem'], [
            c['memory_usage_mb'] for c in source['topology']['cells']]))
