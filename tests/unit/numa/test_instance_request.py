"""The NUMA request and page size rebuilt from an instance record."""

from numamig.numa import instance_request
from tests import base
from tests.unit.compute import base as cbase


class NumaRequestTest(base.TestCase):

    def test_dedicated_guest_asks_for_pinned_cells(self):
        request = instance_request.numa_request(cbase.instance(vcpus=2))
        self.assertEqual(2, sum(len(cell.pcpuset) for cell in request.cells))
        self.assertEqual(1024,
                         sum(cell.memory_mb for cell in request.cells))

    def test_guest_without_numa_characteristics(self):
        instance = cbase.instance()
        instance.extra_specs = {}
        self.assertIsNone(instance_request.numa_request(instance))


class SourcePageSizeTest(base.TestCase):

    def test_small_pages_and_none(self):
        self.assertIsNone(instance_request.source_page_size(
            cbase.instance()))
        self.assertIsNone(instance_request.source_page_size(
            cbase.instance(pins={0: 1, 1: 2})))
        self.assertEqual(2048, instance_request.source_page_size(
            cbase.instance(pins={0: 1, 1: 2}, pagesize=2048)))
