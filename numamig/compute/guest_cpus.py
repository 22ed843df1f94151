"""The CPUs of the guests running on this host, for its reports.

The conductor's standing live-migratable answer judges each guest's CPU
against every host (``cpu-model``) before any migration is asked for;
it learns the guest's CPU from its host's report. A guest's CPU is what
a migration check reads (the migratable domain XML, host-model expanded
to what the guest runs: driver.guest_cpu), and it does not change while
the guest runs here, so each guest is read once, when it is first seen
in a report, not at every report: a report costs a libvirt call per
guest that arrived since the last one, whatever the number of guests.
"""

import threading

from oslo_log import log as logging

from numamig import objects

LOG = logging.getLogger(__name__)


class GuestCPUs:
    """Each running guest's CPU, read once (module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()
        # uuid -> InstanceCPU, or None where the driver cannot tell.
        self._known = {}

    def current(self, driver, instance_uuids):
        """The InstanceCPUs of ``instance_uuids`` (the guests running
        here), sorted by guest; a guest whose CPU could not be read is
        left out and read again at the next report."""
        instance_uuids = set(instance_uuids)
        with self._lock:
            for gone in set(self._known) - instance_uuids:
                del self._known[gone]
            missing = instance_uuids - set(self._known)
        read = {uuid: self._read(driver, uuid) for uuid in sorted(missing)}
        with self._lock:
            for uuid, entry in read.items():
                if entry is not False:
                    self._known[uuid] = entry
            return [entry for uuid, entry in sorted(self._known.items())
                    if uuid in instance_uuids and entry is not None]

    def forget(self, instance_uuid):
        """Read the guest's CPU again at the next report (it was
        restarted, or its domain redefined)."""
        with self._lock:
            self._known.pop(instance_uuid, None)

    @staticmethod
    def _read(driver, instance_uuid):
        """InstanceCPU; None: the driver cannot tell (kept: not asked
        again); False: the read failed (asked again next time)."""
        try:
            guest = driver.guest_cpu(instance_uuid)
        except Exception as exc:  # noqa: BLE001 - advisory, retried
            LOG.debug("CPU of %s unread for the report, read again at "
                      "the next one: %s", instance_uuid, exc)
            return False
        if guest is None:
            return None
        try:
            return objects.InstanceCPU.of(instance_uuid, guest)
        except (TypeError, ValueError) as exc:
            # Not a cpumodel.GuestCPU: a driver that cannot tell.
            LOG.debug("CPU of %s not reportable: %s", instance_uuid, exc)
            return None
