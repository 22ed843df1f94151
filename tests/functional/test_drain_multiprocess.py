"""Drains with the conductor and agents as processes (RabbitMQ and
PostgreSQL): a conductor killed (SIGKILL) mid-drain and started again
carries the drain on; two conductor worker processes drive one drain
without starting a move twice."""

import signal
import time

from numamig.db import drains
from numamig.db import migrations
from tests.functional import test_multiprocess

ENDED = ('completed', 'failed', 'aborted')


class DrainProcessTestBase(test_multiprocess.MultiProcessTestBase):

    def drain(self, source, parallel):
        return self.api.host_drain_start(self.rpc.context, source, parallel)

    def wait_for_drain(self, drain_uuid, timeout=120):
        """Follow the drain in the database (the conductor may be down
        meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            data = drains.get(self.db.db, drain_uuid)
            if data['status'] in ENDED:
                return data
            if time.monotonic() > deadline:
                self.fail(f"drain still {data['status']}: {data['moves']}"
                          f"\n{self.log_of(self.conductor_host)[-3000:]}")
            time.sleep(0.5)

    def assert_every_guest_moved_once(self, guests, dest):
        for guest in guests:
            self.assert_placed(guest, dest)
        completed = [m for m in migrations.get_all(self.db.db)
                     if m.status == 'completed']
        self.assertEqual(sorted(g.uuid for g in guests),
                         sorted(m.instance_uuid for m in completed))


class KilledConductorDrainTest(DrainProcessTestBase):

    def test_a_restarted_conductor_carries_the_drain_on(self):
        source, dest = sorted(self.hosts)
        guests = [self.create(source, f'kd-guest-{i}') for i in range(3)]
        started = self.drain(source, 1)
        (name, conductor), = [(h, p) for h, p in self.procs
                              if h == self.conductor_host]
        conductor.send_signal(signal.SIGKILL)
        conductor.wait(timeout=30)
        self.procs.remove((name, conductor))
        self.start_daemon('numamig-conductor', self.conductor_host)
        ended = self.wait_for_drain(started['uuid'])
        self.assertEqual('completed', ended['status'], ended['moves'])
        self.assert_every_guest_moved_once(guests, dest)
        # No graceful stop asserted here: an agent whose call was in
        # flight to the killed conductor waited past 30 s for its answer
        # at SIGTERM (seen once; the clean-up kills the daemons).


class TwoWorkerDrainTest(DrainProcessTestBase):

    WORKERS = 2

    def test_two_workers_start_every_move_once(self):
        source, dest = sorted(self.hosts)
        guests = [self.create(source, f'tw-guest-{i}') for i in range(4)]
        started = self.drain(source, 2)
        ended = self.wait_for_drain(started['uuid'])
        self.assertEqual('completed', ended['status'], ended['moves'])
        self.assertEqual([1] * 4, [m['attempts'] for m in ended['moves']])
        self.assert_every_guest_moved_once(guests, dest)
        self.assertEqual(4, len(migrations.get_all(self.db.db)))
        self.stop_daemons()
