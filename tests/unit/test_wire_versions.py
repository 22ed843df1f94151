"""No silent field loss: what version of an object each client sends.

Issue 17 measured it: bump InstanceNUMACell with a new field and
its ``obj_make_compatible`` step, and an uncapped compute client still
sent 1.0 without the field, because the client backported to the object
manifest of the newest API version even with no cap set. These tests
bump an object in a test-local registry (the real one is restored at
clean-up) and send it through the real clients over numamig's in-process
transport, which serializes as a broker does.

* An uncapped client sends the object's newest version (its new field
  arrives); a new agent reads it.
* A client capped by ``[upgrade_levels]`` backports to the manifest of
  its cap (the field is dropped, by the step, as an old peer needs).
* An agent of release 1 (reads compute API 1.0 objects) refuses the
  newer API version, and the call comes again at 1.0, backported.
"""

import oslo_messaging as messaging
from oslo_utils import versionutils
from oslo_versionedobjects import fields
from oslo_versionedobjects import fixture as ovo_fixture

from numamig import objects
from numamig import releases
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conductor import records_rpcapi
from numamig.objects import service as service_obj
from tests import base
from tests.fixtures import rpc as rpc_fixture
from tests.unit.compute import base as cbase


def bumped_cell_class():
    """InstanceNUMACell bumped once more (to 1.2) with a new field, as a
    developer would add it (VERSION, history, obj_make_compatible step),
    for one test."""

    class InstanceNUMACell(objects.InstanceNUMACell):
        # Version 1.0: Initial version
        # Version 1.1: virtio-mem fields (the real 1.1)
        # Version 1.2: Added l3_ways (test only)
        VERSION = '1.2'

        fields = dict(objects.InstanceNUMACell.fields,
                      l3_ways=fields.IntegerField(nullable=True,
                                                  default=None))

        def obj_version_needed(self):
            # l3_ways is always sent: the newest version is needed.
            return self.VERSION

        def obj_make_compatible(self, primitive, target_version):
            super().obj_make_compatible(primitive, target_version)
            if versionutils.convert_version_to_tuple(target_version) < (1, 2):
                primitive.pop('l3_ways', None)

    return InstanceNUMACell


class Recorder:
    """An endpoint keeping what it was sent, at the API version given."""

    def __init__(self, version, answer=None, namespace=None):
        self.target = messaging.Target(version=version, namespace=namespace)
        self.received = []
        self.answer = answer

    def build_instance(self, ctxt, instance, limits=None):
        self.received.append(instance)
        return self.answer

    def instance_set_placement(self, ctxt, instance_uuid, host,
                               numa_topology):
        self.received.append(numa_topology)
        return self.answer


class BumpedObjectTestCase(base.TestCase):
    """InstanceNUMACell bumped to 1.2 in a test-local registry."""

    def setUp(self):
        super().setUp()
        self.useFixture(ovo_fixture.VersionedObjectRegistryFixture())
        self.cell_cls = bumped_cell_class()
        objects.base.NumamigObjectRegistry.register(self.cell_cls)
        self.rpc = self.useFixture(rpc_fixture.RPCFixture('inproc'))
        self.topic = self.rpc.topic('wire')

    def instance(self):
        inst = cbase.instance(pins={0: 2, 1: 3})
        old = inst.numa_topology.cells[0]
        cell = self.cell_cls(**{name: getattr(old, name)
                                for name in old.fields
                                if old.obj_attr_is_set(name)})
        cell.l3_ways = 4
        inst.numa_topology.cells = [cell]
        return inst

    def received_cell(self, recorder):
        received, = recorder.received
        topology = getattr(received, 'numa_topology', received)
        return topology.cells[0]


class ComputeClientTest(BumpedObjectTestCase):

    def api(self, version_cap=None, peer_versions=None):
        return compute_rpcapi.ComputeAPI(
            self.rpc.transport, version_cap=version_cap, topic=self.topic,
            exchange=self.rpc.exchange, peer_versions=peer_versions)

    def serve(self, version=compute_rpcapi.ComputeAPI.VERSION):
        recorder = Recorder(version, answer=None)
        self.rpc.start_server([recorder], self.topic)
        return recorder

    def test_uncapped_client_sends_the_newest_version(self):
        recorder = self.serve()
        self.api().build_instance(self.rpc.context, self.instance(), 'host1')
        cell = self.received_cell(recorder)
        self.assertEqual(('1.2', 4),
                         (cell.VERSION, getattr(cell, 'l3_ways', None)))

    def test_capped_client_backports_to_its_cap(self):
        recorder = self.serve()
        self.api(version_cap=compute_rpcapi.ComputeAPI.VERSION).\
            build_instance(self.rpc.context, self.instance(), 'host1')
        cell = self.received_cell(recorder)
        self.assertEqual(('1.1', False),
                         (cell.VERSION, 'l3_ways' in cell.fields))

    def test_agent_of_release_1_gets_it_at_1_0(self):
        # As its reported service version says: sent once, at 1.0 (the
        # agent would refuse anything newer).
        recorder = self.serve(version='1.0')
        self.api(peer_versions={'host1': 1}.get).build_instance(
            self.rpc.context, self.instance(), 'host1')
        cell = self.received_cell(recorder)
        self.assertEqual('1.0', cell.VERSION)
        self.assertLessEqual(
            {'InstanceNUMACell': '1.0'}.items(),
            releases.RELEASES[1].object_versions.items())


class ConductorClientTest(BumpedObjectTestCase):
    """The agents' records client: its namespace of release 2, or
    release 1's API when capped there."""

    def api(self, version_cap=None):
        return records_rpcapi.RecordAPI(
            self.rpc.transport, version_cap=version_cap, topic=self.topic,
            exchange=self.rpc.exchange, timeout=rpc_fixture.CALL_TIMEOUT,
            conductor_version=service_obj.SERVICE_VERSION)

    def place(self, api):
        records = Recorder(records_rpcapi.RecordAPI.VERSION,
                           namespace='records')
        release_1 = Recorder('1.1')
        self.rpc.start_server([records, release_1], self.topic)
        inst = self.instance()
        api.instance_set_placement(self.rpc.context, inst.uuid, 'host1',
                                   inst.numa_topology)
        return self.received_cell(records if records.received
                                  else release_1)

    def test_uncapped_client_sends_the_newest_version(self):
        cell = self.place(self.api())
        self.assertEqual(('1.2', 4),
                         (cell.VERSION, getattr(cell, 'l3_ways', None)))

    def test_capped_client_backports_to_its_cap(self):
        cell = self.place(self.api(version_cap='1.0'))
        # Received as 1.0; no 1.0 class is registered any more, so it is
        # read into the newest class (defaults filled in): the value sent
        # (4) must not arrive.
        self.assertEqual(('1.0', None),
                         (cell.VERSION, cell.get('l3_ways')))
