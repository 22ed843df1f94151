"""Which flows an agent runs: the current release's, or the one before.

The only place the compute agent branches on the release it runs as
(numamig.releases, a testing aid for rolling upgrades). The manager
builds an agent's ``flows`` from here once; endpoints and the flows
that are the same in both releases (the source's migration run,
reconciliation) call through it where the releases differ.
"""

import dataclasses
import typing

from numamig import releases
from numamig.compute import migration_dest
from numamig.compute import migration_source
from numamig.compute import previous_release


@dataclasses.dataclass(frozen=True)
class ReleaseFlows:
    """The steps in which one release's agent differs from another's.

    Each takes the agent first, as the flows do, but ``log_old_path``
    (numamig.releases.log_old_path's signature).
    """

    check_destination: typing.Callable
    check_source: typing.Callable
    post_at_destination: typing.Callable
    rollback_at_destination: typing.Callable
    log_old_path: typing.Callable


CURRENT = ReleaseFlows(
    check_destination=migration_dest.check_destination,
    check_source=migration_source.check_source,
    post_at_destination=migration_dest.post_at_destination,
    rollback_at_destination=migration_dest.rollback_at_destination,
    log_old_path=releases.log_old_path)

PREVIOUS = ReleaseFlows(
    check_destination=previous_release.check_destination,
    check_source=previous_release.check_source,
    post_at_destination=previous_release.post_at_destination,
    rollback_at_destination=previous_release.rollback_at_destination,
    log_old_path=previous_release.log_old_path)


def for_release(release):
    """The flows an agent running as ``release`` takes."""
    return CURRENT if release.numa_live_migration else PREVIOUS
