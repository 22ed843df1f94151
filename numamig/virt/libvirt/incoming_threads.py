"""The destination's watch over an arriving guest's migration threads.

The destination's QEMU receives with threads of its own
(``multifdrecv_N``; ``postcopy/listen`` and ``fault-default`` in
post-copy), created, like the source's, with the emulator threads'
affinity. Nothing on the destination waits for the job: libvirtd
starts QEMU when the source's libvirtd asks it to prepare. So, from the
destination's pre_live_migration until the source tells it the
migration ended (post_live_migration_at_destination, or the rollback),
one thread per incoming migration looks for those threads at the
source monitor's cadence ([libvirt] live_migration_progress_interval;
quicker at first and again as soon as the QEMU appears, so threads
created at the start of the stream are caught early) and pins them. It
stops on the first of: ``stop()``; the QEMU it found exiting; its time
limit. It then hands what it recorded to ``on_end``, once.

It is off every critical path: nothing waits for it but its own stop,
which waits at most STOP_WAIT_S.
"""

import threading
import time

from oslo_log import log as logging

from numamig.objects import migration_threads as record
from numamig.virt.libvirt import migration_threads
from numamig.virt.libvirt.migration import backoff

LOG = logging.getLogger(__name__)

FIRST_POLL_S = 0.01
STOP_WAIT_S = 5.0
# The limit when the completion timeout is 0 (unlimited): a watch never
# outlives a lost source by more than this.
UNLIMITED_S = 6 * 3600.0


def time_limit(settings, memory_mb):
    """How long a watch may run: the source's completion timeout for
    this guest (scaled by its memory, as the source scales it) plus the
    post-copy recovery's, or UNLIMITED_S when there is no timeout."""
    limit = settings.completion_timeout_s * max(memory_mb / 1024, 1)
    if not limit:
        return UNLIMITED_S
    return limit + settings.postcopy_recovery.timeout_s


class IncomingWatch:
    """Pins and records one incoming migration's threads until stopped.

    :param chosen: (cpus, basis) chosen for this host's migration work
        (numamig.numa.migration_cpus); empty cpus: record only.
    :param on_end: called once, from the watch's thread, with this
        host's record (numamig.objects.migration_threads.side).
    :param pinner: a ThreadPinner (default: one of the guest's QEMU
        that starts after the watch, reading /proc).
    """

    def __init__(self, instance_uuid, host, chosen, interval_s, limit_s,
                 on_end, pinner=None, clock=time.monotonic):
        cpus, self._basis = chosen
        self.instance = instance_uuid
        self._host = host
        self._interval = interval_s
        self._limit = limit_s
        self._on_end = on_end
        self._clock = clock
        self.pinner = pinner or migration_threads.ThreadPinner(
            instance_uuid, cpus, ignore_pids=migration_threads.qemu_pids(
                instance_uuid))
        self._stop = threading.Event()
        self.ended_by = None
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name=f'incoming-threads-{instance_uuid}')

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        """End the watch; wait (at most STOP_WAIT_S) for its record to
        be handed over."""
        self._stop.set()
        self._thread.join(STOP_WAIT_S)

    def record(self):
        return record.side(self._host, self._basis, self.pinner.cpus,
                           self.pinner.threads)

    def _run(self):
        deadline = self._clock() + self._limit
        delays = backoff(FIRST_POLL_S, self._interval)
        found = False
        self.ended_by = 'stopped'
        try:
            while not self._stop.wait(next(delays)):
                self._poll_quietly()
                if self.pinner.pid is not None and not found:
                    # The QEMU appeared: its threads come now.
                    found = True
                    delays = backoff(FIRST_POLL_S, self._interval)
                if found and not self.pinner.alive():
                    self.ended_by = 'QEMU exited'
                    break
                if self._clock() > deadline:
                    self.ended_by = f'time limit of {self._limit:.0f} s'
                    break
        finally:
            self._hand_over()

    def _poll_quietly(self):
        try:
            self.pinner.poll()
        except Exception as exc:  # noqa: BLE001 - the watch is advisory
            LOG.debug("Incoming migration of %s: %s", self.instance, exc)

    def _hand_over(self):
        result = self.record()
        LOG.info("Incoming migration of %s: migration threads watch ended "
                 "(%s): %s; threads %s", self.instance, self.ended_by,
                 record.describe(result), result['threads'] or 'none seen')
        try:
            self._on_end(result)
        except Exception as exc:  # noqa: BLE001 - the watch is advisory
            LOG.warning("Incoming migration of %s: where its threads ran "
                        "was not recorded: %s", self.instance, exc)
