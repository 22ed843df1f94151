"""Tests of numamig.compute.outgoing: the registry of running migrations."""

from unittest import mock

from numamig.compute import outgoing
from tests import base


def _job(uuid):
    return mock.Mock(name=f'job-{uuid}', migration=mock.Mock(uuid=uuid))


class OutgoingMigrationsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.registry = outgoing.OutgoingMigrations()

    def test_a_migration_registers_once(self):
        first = _job('m1')
        self.assertTrue(self.registry.register(first))
        self.assertFalse(self.registry.register(_job('m1')))
        self.assertIs(first, self.registry.get('m1'))
        self.assertEqual([first], self.registry.jobs())

    def test_unregistered_is_gone_and_unregistering_twice_is_fine(self):
        self.registry.register(_job('m1'))
        self.registry.register(_job('m2'))
        self.registry.unregister('m1')
        self.registry.unregister('m1')
        self.assertEqual({'m2'}, self.registry.uuids())
        self.assertIsNone(self.registry.get('m1'))

    def test_uuids_is_a_copy(self):
        self.registry.register(_job('m1'))
        self.registry.uuids().clear()
        self.assertEqual({'m1'}, self.registry.uuids())
