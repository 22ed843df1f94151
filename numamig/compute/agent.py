"""What a compute agent's flows use, and nothing more.

The flows (migration_dest, migration_source, reconcile, build, domains,
report) used to receive the whole ComputeManager and reach into it.
They receive an ``Agent`` instead: the parts of one agent they read,
fixed when the agent starts. A flow cannot call back into an RPC
endpoint, and a unit test builds exactly these parts.
"""

import dataclasses

from numamig import releases
from numamig.compute import events as events_mod
from numamig.compute import guest_cpus as guest_cpus_mod
from numamig.compute import incoming as incoming_mod
from numamig.compute import migration_threads
from numamig.compute import outgoing as outgoing_mod
from numamig.compute import resource_tracker


@dataclasses.dataclass(frozen=True)
class Agent:
    """One compute agent (one host) as its flows see it.

    :param host: the host's name, as the records and peers know it.
    :param driver: the virt driver of this host.
    :param tracker: this host's ResourceTracker (usage and claims).
    :param conductor_api: the conductor's RPC client.
    :param compute_api: the RPC client to other compute agents.
    :param release: the release this agent behaves as
        (numamig.releases; the current one but in upgrade tests).
    :param flows: the steps where that release's flows differ
        (numamig.compute.flows.ReleaseFlows).
    :param reporter: sends a report soon after a guest changed here
        (report.BackgroundReporter, or anything with ``request(why)``).
    :param outgoing: the migrations this host runs as source.
    :param incoming: the migrations this host rolled back as
        destination (a late define of their guest is refused).
    :param thread_watches: the incoming migrations whose QEMU threads
        this host pins meanwhile (numamig.compute.migration_threads).
    :param events: what happens here that the agent tells as it happens
        (numamig.compute.events; its notifier listens).
    :param locality: this host's locality watch
        (numamig.compute.locality.LocalityWatch), whose last look the
        reports carry; None: no watch (tests building only some parts).
    :param guest_cpus: the running guests' CPUs its reports carry, each
        read once (numamig.compute.guest_cpus).
    :param device_detach_timeout: seconds a source waits for a guest to
        release its passed-through devices ([compute]
        device_detach_timeout; numamig.compute.devices).
    """

    host: str
    driver: object
    tracker: resource_tracker.ResourceTracker
    conductor_api: object
    compute_api: object
    release: releases.Release
    reporter: object
    outgoing: outgoing_mod.OutgoingMigrations
    flows: object
    incoming: incoming_mod.IncomingMigrations = dataclasses.field(
        default_factory=incoming_mod.IncomingMigrations)
    thread_watches: migration_threads.Watches = dataclasses.field(
        default_factory=migration_threads.Watches)
    events: events_mod.Events = dataclasses.field(
        default_factory=events_mod.Events)
    locality: object = None
    device_detach_timeout: float | None = None
    guest_cpus: guest_cpus_mod.GuestCPUs = dataclasses.field(
        default_factory=guest_cpus_mod.GuestCPUs)

    @property
    def service_version(self):
        return self.release.service_version
