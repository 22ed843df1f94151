"""Placements in flight, and a host's topology with them applied.

The cache (host_state.py) keeps a host's reservations and decides when
they start and end; this module says what one is and what the host looks
like with them counted. Pure: nothing here edits a topology it is given.
"""

import dataclasses
import datetime

from oslo_log import log as logging

from numamig import exception
from numamig.numa import usage

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Reservation:
    """A placement in flight to ``host`` that its reports may not show."""

    host: str
    instance_uuid: str
    project_id: str
    topology: object          # the placed InstanceNUMATopology
    reserved_at: datetime.datetime
    # A hold (``HostStateCache.hold``): counted once the host's report
    # leaves room for it; ``arrives``: a guest comes under this uuid (a
    # report may confirm it), else it keeps room for a guest not yet
    # created (no report ever confirms it).
    held: bool = False
    arrives: bool = True

    @property
    def guest(self):
        """The (project id, instance uuid) pair the fingerprint counts."""
        return (self.project_id, self.instance_uuid)


def reserved_topology(report, reservations):
    """The reported topology with every reservation applied.

    A reservation that clashes with a newer report is not applied:
    either the host already counts it (its claim landed but the guest
    sets still differ) or something else took those resources, in which
    case the destination's own claim will refuse it.

    :param report: the host's last ComputeNodeReport.
    :param reservations: its Reservations, oldest first.
    """
    topology = report.topology
    for reservation in reservations:
        try:
            topology = usage.apply(topology, reservation.topology)
        except exception.UsageConflict as exc:
            if reservation.held:
                LOG.debug("Hold of %s on %s waits for room: %s",
                          reservation.instance_uuid, report.host, exc)
                continue
            LOG.info("Reservation of %s on %s clashes with the host's "
                     "last report and is not counted: %s",
                     reservation.instance_uuid, report.host, exc)
    return topology


def apply_placed(host, instance_uuid, topology, placed):
    """Return ``topology`` with ``placed`` applied, or raise the conflict.

    :raises ReservationConflict: the placement is not placed or does not
        fit ``topology``.
    """
    if not placed.is_placed:
        raise exception.ReservationConflict(
            instance_uuid=instance_uuid, host=host,
            reason="the topology is not placed (a guest cell has no host "
                   "cell)")
    try:
        return usage.apply(topology, placed)
    except exception.UsageConflict as exc:
        raise exception.ReservationConflict(
            instance_uuid=instance_uuid, host=host, reason=str(exc))
