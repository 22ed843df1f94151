"""Live migration end to end on the embedded tier, over fake:// and RabbitMQ.

A real conductor (SQLite) and real compute agents on libvirt test-driver
hosts, talking over oslo.messaging; the guests' domain XML is read back
from libvirt. Hosts are 2 cells x 4 cores x 2 threads unless a test says
otherwise; with ``SHARED`` the pCPUs 0,8 (cell 0) and 4,12 (cell 1) are
shared and the other 12 dedicated::

    host-a  cell 0 [1-3,9-11]  cell 1 [5-7,13-15]   (dedicated)
    host-b  the same
    host-c  the same
"""

import threading

import fixtures
from lxml import etree
from oslo_utils import uuidutils
import testscenarios

from numamig import embedded
from numamig import exception
from numamig import objects
from tests import base
from tests.fixtures import deployment
from tests.fixtures import libvirt_caps
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

SHARED = frozenset({0, 8, 4, 12})
DEDICATED = {'hw:cpu_policy': 'dedicated'}


def host(name, caps='numa-2cell-a.xml', shared=SHARED):
    return embedded.HostDefinition(name, caps, cpu_shared_set=shared)


def xml_placement(xml):
    """(vCPU -> pCPUs, guest cell -> host nodes, page sizes) of a domain."""
    doc = etree.fromstring(xml.encode())
    pins = {int(p.get('vcpu')): p.get('cpuset')
            for p in doc.iterfind('cputune/vcpupin')}
    nodes = {int(m.get('cellid')): m.get('nodeset')
             for m in doc.iterfind('numatune/memnode')}
    pages = {p.get('size') for p in doc.iterfind(
        'memoryBacking/hugepages/page')}
    return pins, nodes, pages


class LiveMigrationTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS
    HOSTS = (host('host-a'), host('host-b'), host('host-c'))

    def setUp(self):
        super().setUp()
        self.dep = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind, self.hosts())).deployment
        self.api, self.ctxt = self.dep.api, self.dep.context

    def hosts(self):
        return self.HOSTS

    def create(self, host_name, vcpus=2, memory_mb=1024, specs=DEDICATED):
        uuid = uuidutils.generate_uuid()
        instance = objects.Instance(
            uuid=uuid, name=f'guest-{uuid[:8]}',
            project_id='demo', vcpus=vcpus, memory_mb=memory_mb,
            extra_specs=dict(specs))
        return self.api.instance_create(self.ctxt, instance, host_name)

    def migrate(self, instance, dest=None):
        migration = self.api.live_migrate_instance(self.ctxt, instance.uuid,
                                                   dest)
        return self.dep.wait_for_migration(migration.uuid)

    def record(self, instance):
        return self.api.instance_get(self.ctxt, instance.uuid)

    def xml(self, host_name, instance):
        return self.dep.agent(host_name).driver.get_domain_xml(
            instance.uuid, persistent=True)

    def pinned_on(self, host_name):
        usage = self.dep.agent(host_name).tracker.usage_topology()
        return set().union(*(c.pinned_cpus for c in usage.cells))

    def assert_nothing_claimed(self, instance):
        """No claim, reservation or migration context is left anywhere.

        Reports are sent first: a completed migration's reservation is
        dropped by the destination's next report, whose guest-set
        fingerprint then includes the guest.
        """
        self.dep.report_all()
        for name in self.dep.agents:
            self.assertEqual([], self.dep.agent(name).tracker.claims(),
                             f"claims left on {name}")
            state = self.dep.conductor.manager.cache.get(name)
            self.assertEqual((), state.reservations,
                             f"reservations left on {name}")
        self.assertIsNone(self.record(instance).migration_context)


class SpecExamplesTest(LiveMigrationTestCase):
    """The three problems of the NUMA-aware live migration spec."""

    def test_pinned_guest_avoids_pins_taken_on_destination(self):
        resident = self.create('host-b')
        mover = self.create('host-a')
        # The problem: the same pins on both hosts.
        self.assertEqual(resident.numa_topology.cpu_pinning,
                         mover.numa_topology.cpu_pinning)
        migration = self.migrate(mover, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        moved = self.record(mover)
        old = set(resident.numa_topology.cpu_pinning.values())
        new = set(moved.numa_topology.cpu_pinning.values())
        self.assertEqual(('host-b', set()), (moved.host, old & new))
        self.assertEqual(set(), self.pinned_on('host-a'))
        self.assertEqual(old | new, self.pinned_on('host-b'))
        pins, _, _ = xml_placement(self.xml('host-b', mover))
        self.assertEqual({v: str(p) for v, p in
                          moved.numa_topology.cpu_pinning.items()}, pins)
        self.assertEqual({}, self.dep.agent('host-a').driver.list_guests())
        self.assert_nothing_claimed(mover)


class UnknownSpecTest(LiveMigrationTestCase):
    """A typo in a flavor key is refused before anything is recorded,
    and the refusal crosses the wire as itself."""

    def test_typo_refused_nothing_recorded(self):
        exc = self.assertRaises(
            exception.UnknownNUMASpec, self.create, 'host-a',
            specs={'hw:cpu_polcy': 'dedicated'})
        self.assertIn('did you mean hw:cpu_policy?', str(exc))
        self.assertEqual([], self.api.instance_get_all(self.ctxt))

    def test_absurd_size_refused_before_any_work(self):
        # 10^8 vCPUs once made the conductor build per-vCPU structures
        # until it held 20 GB.
        exc = self.assertRaises(exception.InvalidNUMASpec, self.create,
                                'host-a', vcpus=10 ** 8)
        self.assertIn('vcpus=100000000: must be at most 4096', str(exc))
        self.assertEqual([], self.api.instance_get_all(self.ctxt))


class RepeatedBuildTest(LiveMigrationTestCase):
    """build_instance delivered again to the host where the guest runs
    (at-least-once RPC): nothing changes (issue 15, F6)."""

    def test_the_record_and_the_pins_stay(self):
        guest = self.create('host-a')
        pinned = self.pinned_on('host-a')
        compute_api = self.dep.conductor.manager.worker.compute_api
        again = compute_api.build_instance(self.ctxt, self.record(guest),
                                           'host-a')
        record = self.record(guest)
        self.assertEqual(('host-a', guest.numa_topology.cpu_pinning),
                         (record.host, record.numa_topology.cpu_pinning))
        self.assertEqual(record.uuid, again.uuid)
        self.assertEqual(pinned, self.pinned_on('host-a'))


class HostDeleteTest(LiveMigrationTestCase):
    """Deleting a host record: refused while in use, over either wire."""

    def test_a_reporting_host_is_refused(self):
        exc = self.assertRaises(exception.HostInUse,
                                self.api.compute_node_delete, self.ctxt,
                                'host-a')
        self.assertIn('stop numamig-compute there first', str(exc))
        self.assertIn('host-a', {r.host for r in
                                 self.api.compute_node_get_all(self.ctxt)})


class HugepageExampleTest(LiveMigrationTestCase):
    """Two nodes of 8 x 1 GiB pages; node 0 of the destination is full."""

    def hosts(self):
        caps = self.useFixture(fixtures.TempDir()).path + '/caps.xml'
        with open(caps, 'w') as f:
            f.write(libvirt_caps.caps_xml(pages_1g=8, mem_gib=16))
        return (host('host-a', caps), host('host-b', caps))

    def test_lands_on_the_node_with_free_1g_pages(self):
        specs = dict(DEDICATED, **{'hw:mem_page_size': '1GB'})
        mover = self.create('host-a', memory_mb=8192, specs=specs)
        resident = self.create('host-b', memory_mb=8192, specs=specs)
        for guest in (mover, resident):
            self.assertEqual([0], [c.host_cell for c in
                                   guest.numa_topology.cells])
        migration = self.migrate(mover, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        cell = self.record(mover).numa_topology.cells[0]
        self.assertEqual((1, 1048576), (cell.host_cell, cell.pagesize))
        _, nodes, pages = xml_placement(self.xml('host-b', mover))
        self.assertEqual(({0: '1'}, {'1048576'}), (nodes, pages))


class MissingNodeExampleTest(LiveMigrationTestCase):
    """A guest on node 2 of a 4-node host moves to a 2-node host."""

    def hosts(self):
        return (host('host-4', 'numa-4cell.xml', shared=None),
                host('host-2', 'numa-2cell-b.xml'))

    def test_lands_on_a_node_the_destination_has(self):
        specs = dict(DEDICATED, **{'hw:numa_nodes': '1'})
        guests = [self.create('host-4', vcpus=2, specs=specs)
                  for _ in range(3)]
        mover = guests[2]
        self.assertEqual(2, mover.numa_topology.cells[0].host_cell)
        migration = self.migrate(mover, 'host-2')
        self.assertEqual('completed', migration.status, migration.error)
        cell = self.record(mover).numa_topology.cells[0]
        self.assertIn(cell.host_cell, (0, 1))
        _, nodes, _ = xml_placement(self.xml('host-2', mover))
        self.assertEqual({0: str(cell.host_cell)}, nodes)


def _fill(test, host_name):
    """A guest taking every dedicated pCPU of a host the scheduler still
    believes empty: the report the agent sends after building it is held
    back, as if still in flight."""
    with fixtures.MonkeyPatch('numamig.compute.report.send_now',
                              lambda *args, **kwargs: None):
        return test.create(host_name, vcpus=12, memory_mb=2048,
                           specs=dict(DEDICATED, **{'hw:numa_nodes': '2'}))


class CandidatesTest(LiveMigrationTestCase):

    def test_first_candidate_refuses_second_takes_it(self):
        mover = self.create('host-a')
        _fill(self, 'host-b')
        migration = self.migrate(mover)
        self.assertEqual(('completed', 'host-c'),
                         (migration.status, migration.dest_host))
        self.assertEqual(['host-b'], list(migration.refused_hosts))
        self.assertIn('does not fit on host host-b',
                      migration.refused_hosts['host-b'])
        self.assertEqual('host-c', self.record(mover).host)
        self.assert_nothing_claimed(mover)

    def test_every_candidate_refuses(self):
        mover = self.create('host-a')
        pins = mover.numa_topology.cpu_pinning
        _fill(self, 'host-b')
        _fill(self, 'host-c')
        migration = self.migrate(mover)
        self.assertEqual('error', migration.status)
        self.assertIn('No valid host was found: 2 destination(s) tried',
                      migration.error)
        for name in ('host-b', 'host-c'):
            self.assertIn(f'{name}: Migration pre-check error',
                          migration.error)
        # Each refusal is its message, not the agent's traceback.
        self.assertNotIn('Traceback', migration.error)
        self.assertEqual(1, len(migration.error.splitlines()),
                         migration.error)
        record = self.record(mover)
        self.assertEqual(('host-a', pins),
                         (record.host, record.numa_topology.cpu_pinning))
        self.assert_nothing_claimed(mover)


class FailureTest(LiveMigrationTestCase):

    def test_rollback_when_the_migration_fails(self):
        mover = self.create('host-a')
        before = self.xml('host-a', mover)
        dest = self.dep.agent('host-b').driver

        def refuse(instance_uuid, dest_xml):
            raise exception.HypervisorError(
                host='host-b', action='define the guest',
                reason='injected by the test')
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.virt.libvirt.driver.LibvirtDriver.'
            'accept_emulated_migration',
            lambda drv, uuid, xml: refuse(uuid, xml) if drv is dest
            else None))
        migration = self.migrate(mover, 'host-b')
        self.assertEqual('failed', migration.status)
        self.assertIn('injected by the test', migration.error)
        record = self.record(mover)
        self.assertEqual(('host-a', mover.numa_topology.cpu_pinning),
                         (record.host, record.numa_topology.cpu_pinning))
        self.assertEqual(before, self.xml('host-a', mover))
        self.assertEqual({}, dest.list_guests())
        self.assertEqual(set(), self.pinned_on('host-b'))
        self.assert_nothing_claimed(mover)

    def test_abort_while_preparing(self):
        mover = self.create('host-a')
        source = self.dep.agent('host-a').driver
        entered, go = threading.Event(), threading.Event()
        original = source.get_destination_xml

        def held(instance_uuid, numa_info):
            entered.set()
            go.wait(30)
            return original(instance_uuid, numa_info)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig.virt.libvirt.driver.LibvirtDriver.'
            'get_destination_xml',
            lambda drv, uuid, info: held(uuid, info) if drv is source
            else original(uuid, info)))
        migration = self.api.live_migrate_instance(self.ctxt, mover.uuid,
                                                   'host-b')
        self.assertTrue(entered.wait(30))
        self.api.migration_abort(self.ctxt, migration.uuid)
        go.set()
        migration = self.dep.wait_for_migration(migration.uuid)
        self.assertEqual('cancelled', migration.status)
        self.assertEqual('host-a', self.record(mover).host)
        self.assertIn(mover.uuid, source.list_guests())
        self.assertEqual({}, self.dep.agent('host-b').driver.list_guests())
        self.assert_nothing_claimed(mover)


class ConcurrencyTest(LiveMigrationTestCase):
    """Ten guests with the same pins on two sources move to one host."""

    HOSTS = (host('host-a', shared=None), host('host-b', shared=None),
             host('host-c', shared=None))

    def test_ten_concurrent_migrations_never_share_a_pcpu(self):
        guests = [self.create(name, vcpus=1)
                  for name in ('host-a', 'host-c') for _ in range(5)]
        results, errors = {}, []

        def migrate(guest):
            try:
                results[guest.uuid] = self.migrate(guest, 'host-b')
            except Exception as exc:  # reported below, with the others
                errors.append(exc)
        threads = [threading.Thread(target=migrate, args=(g,))
                   for g in guests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual([], errors)
        self.assertEqual({'completed'},
                         {m.status for m in results.values()})
        dedicated = set(range(16))
        seen = {}
        for guest in guests:
            pins, _, _ = xml_placement(self.xml('host-b', guest))
            (pcpu,) = pins.values()
            self.assertIn(int(pcpu), dedicated)
            self.assertNotIn(pcpu, seen, f"{guest.uuid} and {seen.get(pcpu)}"
                                         f" share pCPU {pcpu}")
            seen[pcpu] = guest.uuid
        self.assertEqual(10, len(seen))
        self.assert_nothing_claimed(guests[0])
