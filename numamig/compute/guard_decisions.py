"""The migration guard's decisions on this host, as the agent counts them.

The guard decides inside libvirt's hook, a process of its own for each
incoming migration (numamig.virt.libvirt.guard_hook), and appends each
decision to its log. The agent reads what was appended since it last
looked: at each publication of its claims and at each scrape of its
metrics. It counts the decisions since it started and tells each
rewrite and refusal to its event listeners (its notifier). The guard
also decides on migrations numamig did not start (``virsh migrate`` by
hand), which no migration record shows: its log is the only witness.
"""

import threading

from oslo_log import log as logging

from numamig import exception
from numamig.compute import events as events_mod

LOG = logging.getLogger(__name__)

# The guard's actions (numamig.virt.libvirt.guard).
ACTIONS = ('unchanged', 'rewritten', 'refused')
# Decisions worth an event: a pass changes nothing.
TOLD = ('rewritten', 'refused')


class GuardDecisions:
    """Reads the guard's log forward; counts; tells.

    :param host: this host.
    :param driver: the virt driver (``read_guard_log``).
    :param events: the agent's Events.
    """

    def __init__(self, host, driver, events):
        self.host = host
        self.driver = driver
        self.events = events
        self._lock = threading.Lock()
        self._position = None
        self._counts = dict.fromkeys(ACTIONS, 0)
        self._failing = False

    def poll(self):
        """Read what the guard decided since the last look (the first
        look only finds where the log ends: older decisions are not
        news). Never raises: a log that cannot be read is logged once
        and read again at the next look."""
        with self._lock:
            try:
                entries, position = self.driver.read_guard_log(
                    self._position)
            except exception.NumamigException as exc:
                if not self._failing:
                    LOG.warning("%s: the migration guard's decisions are "
                                "not counted: %s", self.host,
                                exception.brief(exc))
                self._failing = True
                return []
            if self._failing:
                LOG.info("%s: the migration guard's log is read again",
                         self.host)
                self._failing = False
            self._position = position
            for entry in entries:
                if entry.action in self._counts:
                    self._counts[entry.action] += 1
        for entry in entries:
            if entry.action in TOLD:
                self.events.emit(events_mod.GUARD_DECISION,
                                 events_mod.GuardDecision(
                                     self.host, entry.guest,
                                     entry.instance_uuid, entry.action,
                                     entry.reason, entry.at))
        return entries

    def counts(self):
        """{action: decisions read since the agent started}."""
        with self._lock:
            return dict(self._counts)
