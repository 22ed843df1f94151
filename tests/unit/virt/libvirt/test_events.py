"""Tests of the libvirt event loop start and the job-completed watcher."""

from unittest import mock

import fixtures
import libvirt

from numamig.virt.libvirt import events
from tests import base


def _libvirt_error(message):
    exc = libvirt.libvirtError(message)
    exc.err = (libvirt.VIR_ERR_INTERNAL_ERROR, 0, message, 0, '', None,
               None, 0, 0)
    return exc


class FakeConnection:
    def __init__(self, register_error=None):
        self.register_error = register_error
        self.callbacks = {}
        self.deregistered = []

    def domainEventRegisterAny(self, dom, event_id, cb, opaque):  # noqa
        if self.register_error is not None:
            raise self.register_error
        self.callbacks[7] = (dom, event_id, cb, opaque)
        return 7

    def domainEventDeregisterAny(self, callback_id):  # noqa: N802
        self.deregistered.append(callback_id)

    def fire(self, params):
        dom, _event_id, cb, opaque = self.callbacks[7]
        cb(self, dom, params, opaque)


class FakeDomain:
    def __init__(self, conn):
        self.conn = conn

    def connect(self):
        return self.conn

    def UUIDString(self):  # noqa: N802 (libvirt API)
        return 'uuid-1'


class JobCompletedWatcherTestCase(base.TestCase):

    def _watcher(self, **kwargs):
        conn = FakeConnection(**kwargs)
        dom = FakeDomain(conn)
        watcher = events.JobCompletedWatcher(dom)
        watcher.start()
        return watcher, conn, dom

    def test_registers_for_the_domain_and_returns_its_stats(self):
        watcher, conn, dom = self._watcher()
        self.assertEqual((dom, events.JOB_COMPLETED),
                         conn.callbacks[7][:2])
        conn.fire({'operation': events.OPERATION_MIGRATION_OUT,
                   'downtime': 12})
        self.assertEqual(12, watcher.wait(0)['downtime'])
        watcher.stop()
        watcher.stop()
        self.assertEqual([7], conn.deregistered)

    def test_other_jobs_are_ignored(self):
        watcher, conn, _dom = self._watcher()
        conn.fire({'operation': events.OPERATION_MIGRATION_OUT + 1,
                   'downtime': 12})
        self.assertIsNone(watcher.wait(0.01))

    def test_stats_are_copied(self):
        watcher, conn, _dom = self._watcher()
        params = {'operation': events.OPERATION_MIGRATION_OUT,
                  'downtime': 3}
        conn.fire(params)
        params['downtime'] = 99
        self.assertEqual(3, watcher.wait(0)['downtime'])

    def test_unavailable_events_mean_unknown_at_once(self):
        watcher, conn, _dom = self._watcher(
            register_error=_libvirt_error('no event loop'))
        with mock.patch.object(watcher._arrived, 'wait') as wait:
            self.assertIsNone(watcher.wait(60))
        wait.assert_not_called()
        watcher.stop()
        self.assertEqual([], conn.deregistered)


class EventLoopTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        # A fresh process's state, and no real loop thread.
        patcher = mock.patch.object(events, '_loop_thread', None)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.thread = self.useFixture(fixtures.MockPatchObject(
            events.threading, 'Thread')).mock

    @mock.patch.object(libvirt, 'virEventRegisterDefaultImpl')
    def test_registered_and_started_once(self, register):
        self.assertTrue(events.start_event_loop())
        self.assertTrue(events.start_event_loop())
        register.assert_called_once_with()
        self.thread.assert_called_once()
        self.thread.return_value.start.assert_called_once_with()

    @mock.patch.object(libvirt, 'virEventRegisterDefaultImpl')
    def test_started_again_where_the_thread_is_gone(self, register):
        # After a fork only the forking thread survives.
        self.assertTrue(events.start_event_loop())
        self.thread.return_value.is_alive.return_value = False
        self.assertTrue(events.start_event_loop())
        self.assertEqual(2, register.call_count)
        self.assertEqual(2, self.thread.return_value.start.call_count)

    @mock.patch.object(libvirt, 'virEventRegisterDefaultImpl',
                       side_effect=_libvirt_error('refused'))
    def test_refusal_is_reported(self, _register):
        self.assertFalse(events.start_event_loop())
        self.thread.assert_not_called()
