"""The periodic report a compute agent sends the conductor.

It carries the host topology with this host's usage applied, the service
version (so the conductor knows which releases take part in a
migration) and a podfingerprint v001 of the guest set, incoming claims
included, so that the scheduler can tell when a report already accounts
for the placements it reserved.
"""

import logging

from oslo_utils import timeutils

from numamig import objects
from numamig.scheduler import fingerprint

LOG = logging.getLogger(__name__)


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
        reported_at=timeutils.utcnow(with_timezone=True))


def send_now(agent, ctxt, why):
    """Report at once after this host's guests changed; best effort.

    Operators read hosts from their last reports: without this, a guest
    built or moved here would show only a report interval later. A
    failure is logged; the periodic report catches up.
    """
    try:
        agent.report(ctxt)
    except Exception as exc:  # noqa: BLE001 - advisory, logged
        LOG.warning("%s: report after %s failed: %s", agent.host, why, exc)
