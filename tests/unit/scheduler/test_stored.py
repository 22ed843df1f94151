"""Tests of building stored reports straight from their JSON: the
reports and the cache's host states equal what the old path builds."""

import datetime
import json
import random

from numamig import exception
from numamig import fingerprint
from numamig import objects
from numamig.db import compute_nodes
from numamig.db import primitives
from numamig.scheduler import compact
from numamig.scheduler import host_state
from numamig.scheduler import stored
from tests import base
from tests.unit.objects import samples

NOW = datetime.datetime(2026, 11, 29, 1, 2, 3, 456789,
                        tzinfo=datetime.UTC)


def _random_cell(rng, cell_id, cores):
    threads = rng.choice([1, 2])
    total = 8 * cores
    siblings = [{cell_id * cores + c + t * total for t in range(threads)}
                for c in range(cores)]
    shared_cores = rng.randint(0, cores)
    shared = set().union(set(), *siblings[:shared_cores])
    dedicated = set().union(set(), *siblings[shared_cores:])
    pinned = set(rng.sample(sorted(dedicated),
                            rng.randint(0, len(dedicated))))
    memory_mb = rng.choice([4096, 16384, 65536])
    pools = [objects.NUMAPagesTopology(size_kb=4, total=memory_mb * 128)]
    huge = objects.NUMAPagesTopology(size_kb=2048, total=memory_mb // 4)
    if rng.random() < 0.7:
        huge.used = rng.randint(0, huge.total // 2)
    if rng.random() < 0.3:
        huge.reserved = rng.randint(0, huge.total // 4)
    pools.append(huge)
    cell = objects.HostNUMACell(
        id=cell_id, cpuset=shared, pcpuset=dedicated, pinned_cpus=pinned,
        siblings=siblings if rng.random() < 0.8 else [],
        memory_mb=memory_mb, mempages=pools)
    if rng.random() < 0.5:
        cell.memory_usage_mb = rng.randint(0, memory_mb)
    if rng.random() < 0.5:
        cell.cpu_usage = rng.randint(0, 2 * len(shared))
    if rng.random() < 0.5:
        cell.socket = rng.randint(0, 1)
    if rng.random() < 0.5:
        cell.distances = {i: 10 if i == cell_id else 21 for i in range(2)}
    return cell


def random_report(rng, index):
    cells = rng.choice([1, 2, 4, 8])
    cores = rng.choice([2, 4])
    report = objects.ComputeNodeReport(
        host=f'host-{index}', hypervisor_uri='qemu:///system',
        topology=objects.HostNUMATopology(cells=[
            _random_cell(rng, cell_id, cores) for cell_id in range(cells)]),
        service_version=rng.choice([1, 2]),
        fingerprint=fingerprint.compute([]), reported_at=NOW)
    if rng.random() < 0.5:
        report.hypervisor_type = 'kvm'
    if rng.random() < 0.3:
        report.migration_guard = rng.choice(['off', 'on', 'failed'])
    if rng.random() < 0.3:
        report.cpu = samples.host_cpu()
    if rng.random() < 0.3:
        report.cpu_power = samples.cpu_power_state()
    if rng.random() < 0.2:
        report.locality = samples.host_locality()
    return report


def _change(report=None, primitive=None):
    if primitive is None:
        primitive = primitives.dump(report)
    text = json.dumps(primitive)
    host = primitive['numamig_object.data'].get('host', 'h')
    return compute_nodes.Change(host, NOW,
                                compute_nodes.content_digest(text), text)


class BuildTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.builder = stored.ReportBuilder()

    def assert_same_report(self, old, new):
        self.assertEqual(old, new)
        self.assertEqual(old.reported_at, new.reported_at)
        self.assertEqual(set(), new.obj_what_changed())
        for one, other in zip(old.topology.cells, new.topology.cells,
                              strict=True):
            self.assertEqual(one.VERSION, other.VERSION)
            self.assertEqual(one.obj_to_primitive()['numamig_object.data']
                             .keys(),
                             other.obj_to_primitive()['numamig_object.data']
                             .keys())
        # What a peer would be sent is the same, sets aside.
        self.assertEqual(
            objects.ComputeNodeReport.obj_from_primitive(
                old.obj_to_primitive()),
            objects.ComputeNodeReport.obj_from_primitive(
                new.obj_to_primitive()))

    def test_equal_to_the_old_path_on_generated_reports(self):
        rng = random.Random(37)
        for index in range(300):
            change = _change(random_report(rng, index))
            self.assert_same_report(change.load(), self.builder.build(change))
        self.assertEqual((300, 0), (self.builder.direct,
                                    self.builder.fallen_back))

    def test_hardware_sets_shared_pinned_sets_not(self):
        rng = random.Random(4)
        report = random_report(rng, 0)
        one = self.builder.build(_change(report))
        two = self.builder.build(_change(report))
        for first, second in zip(one.topology.cells, two.topology.cells,
                                 strict=True):
            self.assertIs(first.pcpuset, second.pcpuset)
            self.assertIsInstance(first.pcpuset, compact.FrozenSet)
            self.assertIsNot(first.pinned_cpus, second.pinned_cpus)
            self.assertIsNot(first, second)

    def test_pci_devices_built_the_old_way(self):
        report = samples.compute_node_report()
        self.assertTrue(report.topology.pci_devices)
        change = _change(report)
        self.assertEqual(change.load(), self.builder.build(change))
        self.assertEqual(1, self.builder.fallen_back)

    def test_an_older_cell_version_built_the_old_way(self):
        report = random_report(random.Random(1), 0)
        primitive = report.obj_to_primitive(target_version='1.0')
        change = _change(primitive=primitive)
        self.assertEqual(change.load(), self.builder.build(change))
        self.assertEqual((0, 1), (self.builder.direct,
                                  self.builder.fallen_back))

    def test_coercible_values_built_the_old_way(self):
        # OVO turns "3" into 3; the builder reads only ints and leaves
        # such a row to OVO.
        primitive = primitives.dump(random_report(random.Random(2), 0))
        cell = primitive['numamig_object.data']['topology'][
            'numamig_object.data']['cells'][0]['numamig_object.data']
        cell['memory_mb'] = str(cell['memory_mb'])
        change = _change(primitive=primitive)
        self.assertEqual(change.load(), self.builder.build(change))
        self.assertEqual(1, self.builder.fallen_back)

    def test_a_bad_row_raises_as_before(self):
        primitive = primitives.dump(random_report(random.Random(3), 0))
        cell = primitive['numamig_object.data']['topology'][
            'numamig_object.data']['cells'][0]['numamig_object.data']
        del cell['memory_mb']
        change = _change(primitive=primitive)
        self.assertRaises(exception.StoredRecordInvalid, change.load)
        self.assertRaises(exception.StoredRecordInvalid,
                          self.builder.build, change)

    def test_unknown_field_built_the_old_way(self):
        # OVO ignores a field its class does not have (a newer peer's);
        # the builder leaves such a row to it.
        primitive = primitives.dump(random_report(random.Random(5), 0))
        primitive['numamig_object.data']['topology'][
            'numamig_object.data']['cells'][0][
            'numamig_object.data']['bogus'] = 1
        change = _change(primitive=primitive)
        self.assertEqual(change.load(), self.builder.build(change))
        self.assertEqual(1, self.builder.fallen_back)

    def test_an_invalid_report_refused_by_the_cache(self):
        # Built without validation; the cache validates it, as it does
        # a report given by an agent.
        report = random_report(random.Random(6), 0)
        cell = report.topology.cells[0]
        pool = cell.mempages[1]
        primitive = primitives.dump(report)
        pool_data = primitive['numamig_object.data']['topology'][
            'numamig_object.data']['cells'][0]['numamig_object.data'][
            'mempages'][1]['numamig_object.data']
        pool_data['used'] = pool.total + 1
        pool_data['reserved'] = 0
        built = self.builder.build(_change(primitive=primitive))
        cache = host_state.HostStateCache(service_down_time=60)
        self.assertRaises(exception.InvalidHostReport, cache.update, built)
        self.assertEqual(0, len(cache))


class CacheTest(base.TestCase):
    """The cache fed the new way holds what it holds fed the old way."""

    def test_host_states_equal(self):
        rng = random.Random(9)
        changes = [_change(random_report(rng, index))
                   for index in range(150)]
        old = host_state.HostStateCache(service_down_time=3600)
        new = host_state.HostStateCache(service_down_time=3600)
        builder = stored.ReportBuilder()
        for change in changes:
            old.update(change.load(), guests=(), received_at=NOW,
                       digest=change.digest)
            new.update(builder.build(change), guests=(), received_at=NOW,
                       digest=change.digest)
        for change in changes:
            one, other = old.get(change.host), new.get(change.host)
            self.assertEqual(one.report, other.report)
            self.assertEqual(one.topology, other.topology)
            for name in one.capacity.__slots__:
                self.assertEqual(getattr(one.capacity, name),
                                 getattr(other.capacity, name))
        self.assertEqual([s.host for s in old.host_states()],
                         [s.host for s in new.host_states()])



class BadSmallObjectTest(base.TestCase):

    def test_a_bad_small_object_raises_as_before(self):
        primitive = primitives.dump(random_report(random.Random(8), 0))
        primitive['numamig_object.data']['cpu'] = {
            'numamig_object.name': 'HostCPU',
            'numamig_object.namespace': 'numamig',
            'numamig_object.version': '9.9',
            'numamig_object.data': {}}
        change = _change(primitive=primitive)
        self.assertRaises(exception.StoredRecordInvalid, change.load)
        self.assertRaises(exception.StoredRecordInvalid,
                          stored.ReportBuilder().build, change)
