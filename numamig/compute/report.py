"""The periodic report a compute agent sends the conductor.

It carries the host topology with this host's usage applied, the service
version (so the conductor knows which releases take part in a
migration) and a podfingerprint v001 of the guest set, incoming claims
included, so that the scheduler can tell when a report already accounts
for the placements it reserved.
"""

import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from numamig import context as nm_context
from numamig import fingerprint
from numamig import objects

LOG = logging.getLogger(__name__)

# How long the background reporter's thread waits for a request before it
# checks whether it was stopped (it exits when stopped, never polls work).
_IDLE_WAIT_S = 5.0


def build(agent):
    """Return a ComputeNodeReport of the agent's host as of now."""
    tracker = agent.tracker
    with tracker.lock:
        topology = tracker.usage_topology()
        pairs = tracker.guest_pairs()
    return objects.ComputeNodeReport(
        host=agent.host,
        hypervisor_uri=agent.driver.hypervisor_uri,
        hypervisor_type=agent.driver.hypervisor_type,
        topology=topology,
        service_version=agent.service_version,
        fingerprint=fingerprint.compute(pairs),
        reported_at=timeutils.utcnow(with_timezone=True),
        migration_guard=agent.driver.migration_guard_state(),
        cpu=agent.driver.host_cpu(),
        cpu_power=(tracker.power.state() if tracker.power is not None
                   else None),
        # The watch's last look, as it stands: building a report never
        # waits for a look.
        locality=(agent.locality.last if agent.locality is not None
                  else None),
        # The running guests' CPUs, each read once (guest_cpus).
        guest_cpus=agent.guest_cpus.current(agent.driver,
                                            agent.tracker.instance_uuids()))


def send(agent, ctxt, timeout=None):
    """Report now and wait until the conductor stored it.

    :param timeout: seconds to wait (default: the RPC client's).
    """
    agent.conductor_api.report_compute_node(ctxt, build(agent),
                                            timeout=timeout)


def cast(agent, ctxt):
    """Report now without waiting for any answer (or any RPC pool)."""
    agent.conductor_api.report_compute_node_cast(ctxt, build(agent))


def refresh(agent, ctxt, attempts=3):
    """Recompute usage from the records now, report it, return the report.

    What the periodic recompute does (numamig.compute.resource_tracker:
    usage no record owns goes, except claims of migrations still in
    progress; recorded usage is counted), asked for by an operator's
    ``heal claims`` so that it need not wait for the next run. A
    recompute that raced an explicit change is tried again; after
    ``attempts`` the report is of the usage as it stands, and the
    caller's comparison says what remains.
    """
    for _attempt in range(attempts):
        if agent.tracker.update_available_resource(ctxt):
            break
    fresh = build(agent)
    agent.conductor_api.report_compute_node(ctxt, fresh)
    LOG.info("%s: usage recomputed from the records on request",
             agent.host)
    return fresh


def send_now(agent, ctxt, why):
    """Report at once after this host's guests changed; best effort.

    Operators read hosts from their last reports: without this, a guest
    built or moved here would show only a report interval later. A
    failure is logged; the periodic report catches up.
    """
    try:
        send(agent, ctxt)
    except Exception as exc:  # noqa: BLE001 - advisory, logged
        LOG.warning("%s: report after %s failed: %s", agent.host, why, exc)


def request(agent, why):
    """Ask for a report soon, off the caller's path (see BackgroundReporter).

    Migration steps call this after a guest arrived, left or lost its
    claim here, so that no report (a conductor round trip, and a database
    write there) sits on a migration's critical path.
    """
    agent.reporter.request(why)


class BackgroundReporter:
    """Send a report after each burst of requests, in a thread of its own.

    Requests made while a report is pending or being built are coalesced
    into the next single report: ten guests arriving at once cost one or
    two reports, not ten. Reports are also paced: the next one leaves no
    sooner than ``min_interval`` seconds after the last, so a host in the
    middle of many migrations reports a few times a second at most
    instead of twice per migration. Each report is a whole host topology
    the conductor validates, stores and feeds to its scheduler: unpaced,
    they were a third of the control plane's CPU per migration. A change
    after a quiet spell is still reported at once.

    The report is a cast (the sender waits for no answer and no pool);
    one that is lost is replaced by the next periodic report. The thread
    starts on the first request and ends when stopped.
    """

    def __init__(self, host, send_report, min_interval=0.0,
                 clock=time.monotonic):
        """:param send_report: called with a request context to send one
            report (report.cast with the agent, in a compute agent).
        :param min_interval: seconds at least between two reports.
        """
        self._host = host
        self._send_report = send_report
        self._min_interval = min_interval
        self._clock = clock
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._reasons = []
        self._thread = None
        self._last_sent_at = None
        self.sent = 0

    def request(self, why):
        with self._lock:
            self._reasons.append(why)
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(
                    target=self._run, daemon=True,
                    name=f'numamig-compute-{self._host}-reporter')
                self._thread.start()
        self._wanted.set()

    def stop(self, timeout=5.0):
        """End the thread; a report being sent is finished first."""
        self._stopped.set()
        self._wanted.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self):
        ctxt = nm_context.get_admin_context()
        while not self._stopped.is_set():
            if not self._wanted.wait(_IDLE_WAIT_S):
                continue
            self._pace()
            self._wanted.clear()
            with self._lock:
                reasons, self._reasons = self._reasons, []
            if self._stopped.is_set() or not reasons:
                continue
            try:
                self._send(ctxt, reasons)
            except BaseException as exc:  # noqa: BLE001 - a dead agent
                # (tests/fixtures/crash.py) ends its reporter with it.
                LOG.debug("%s: reporter stopped: %s", self._host, exc)
                return

    def _pace(self):
        """Wait until ``min_interval`` has passed since the last report;
        the requests made meanwhile go into the next one."""
        if self._last_sent_at is None:
            return
        left = self._last_sent_at + self._min_interval - self._clock()
        if left > 0:
            self._stopped.wait(left)

    def _send(self, ctxt, reasons):
        self._last_sent_at = self._clock()
        try:
            self._send_report(ctxt)
            self.sent += 1
        except Exception as exc:  # noqa: BLE001 - advisory, logged
            LOG.warning("%s: report after %s failed: %s", self._host,
                        '; '.join(reasons), exc)
