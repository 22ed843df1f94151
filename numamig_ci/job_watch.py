"""What libvirt and QEMU say of a source domain's migration job, read
beside numamig (numamig-ci scenarios and the real tier's tests).

A convergence policy's actions are recorded by numamig; whether they
reached the hypervisor is read here, independently: the maximum
downtime QEMU was given (``virDomainMigrateGetMaxDowntime``), the
highest vCPU throttle it applied (``auto_converge_throttle`` of the job
statistics: the job ran with auto-converge and QEMU used it), the passes
it made (``memory_iteration``) and the domain's lifecycle events
(suspended for post-copy, suspended for the migration: libvirt names a
pause during a migration so, as it names a converged pre-copy's
switch-over). Samples every INTERVAL_S; a policy's step lasts a pass,
seconds on a job that cannot converge.
"""

import threading

import libvirt

from numamig.virt.libvirt import events

INTERVAL_S = 0.05
# QEMU's maximum downtime before anyone sets one.
QEMU_DEFAULT_DOWNTIME_MS = 300
SUSPENDED = libvirt.VIR_DOMAIN_EVENT_SUSPENDED
SUSPENDED_MIGRATED = libvirt.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED
SUSPENDED_POSTCOPY = getattr(libvirt, 'VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY',
                             7)
ACTIVE = (libvirt.VIR_DOMAIN_JOB_BOUNDED, libvirt.VIR_DOMAIN_JOB_UNBOUNDED)


class JobWatch:
    """The job of domain ``uuid`` on the host at ``uri``, from ``start``
    to ``stop``: ``downtimes`` (ms, in the order QEMU had them),
    ``throttle`` (the highest %), ``passes`` and ``events`` ((event,
    detail) of the domain's lifecycle)."""

    def __init__(self, uri, uuid):
        self._uri, self._uuid = uri, uuid
        self.downtimes = []
        self.throttle = 0
        self.passes = 0
        self.events = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True,
                                        name='numamig-ci-job-watch')
        self._conn = self._callback = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        # Events reach only connections opened once the loop runs.
        events.start_event_loop()
        self._conn = libvirt.open(self._uri)
        dom = self._conn.lookupByUUIDString(self._uuid)
        self._callback = self._conn.domainEventRegisterAny(
            dom, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._lifecycle,
            None)
        self._thread.start()
        return self

    def stop(self):
        """Stop sampling and listening (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._conn is None:
            return
        try:
            self._conn.domainEventDeregisterAny(self._callback)
        except libvirt.libvirtError:
            pass
        self._conn.close()
        self._conn = None

    def suspensions(self):
        """The details of the domain's 'suspended' events, in order."""
        return [detail for event, detail in self.events
                if event == SUSPENDED]

    def steps_after_default(self, steps):
        """Whether QEMU's maximum downtime took exactly ``steps`` (ms), in
        order, with only QEMU's default before the first."""
        seen = list(self.downtimes)
        while seen and steps and seen[0] != steps[0]:
            if seen.pop(0) != QEMU_DEFAULT_DOWNTIME_MS:
                return False
        return seen == list(steps)

    def _lifecycle(self, _conn, _dom, event, detail, _opaque):
        self.events.append((event, detail))

    def _sample(self):
        dom = self._conn.lookupByUUIDString(self._uuid)
        while not self._stop.wait(INTERVAL_S):
            try:
                stats = dom.jobStats()
                if stats.get('type') not in ACTIVE:
                    continue
                downtime = dom.migrateGetMaxDowntime()
            except libvirt.libvirtError:
                # The job (or the domain, once migrated) is gone.
                continue
            if downtime is None:
                # Asked as the job ended.
                continue
            self.throttle = max(self.throttle,
                                stats.get('auto_converge_throttle', 0))
            self.passes = max(self.passes, stats.get('memory_iteration', 0))
            if not self.downtimes or self.downtimes[-1] != downtime:
                self.downtimes.append(downtime)
