"""ComputeDriver: everything a compute agent asks of its hypervisor.

The agent (numamig/compute) talks only to this interface; the libvirt
implementation lives in numamig/virt/libvirt. The interface knows objects
and XML strings, never RPC or the database.

Migration is split so that the agents, not the driver, move data between
hosts: the source builds the destination XML (``get_destination_xml``),
then either the hypervisor migrates natively (``live_migrate``) or, where
it cannot (the libvirt test driver), the agents carry the XML over RPC and
the destination defines it (``accept_emulated_migration``) before the
source forgets the guest (``destroy``). ``supports_native_migration``
tells the agent which.
"""

import abc

from numamig import cpumodel
from numamig import exception
from numamig.convergence import policy as convergence


class MigrationProgress:
    """One sample of a running migration's job statistics (bytes)."""

    __slots__ = ('memory_total', 'memory_processed', 'memory_remaining',
                 'disk_total', 'disk_processed', 'disk_remaining',
                 'dirty_rate', 'iteration', 'elapsed_ms')

    def __init__(self, **kwargs):
        for name in self.__slots__:
            setattr(self, name, kwargs.get(name, 0))

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class MigrationResult:
    """How a finished migration went, for logs and the migration record.

    ``emulated`` is True where numamig carried the guest over itself (the
    libvirt test driver); timings are then those of the define and start.
    ``downtime_ms`` is how long the guest stood still, as the hypervisor
    measured it (for a migration forced to converge by a pause, the whole
    paused time); None where the hypervisor did not report it. ``post_copy``
    and ``paused`` say how a forced completion made the job converge.
    ``postcopy_recovery`` is the post-copy recovery history (a list of
    dicts, see numamig.convergence.recovery) where the connection dropped
    during post-copy, else None.
    """

    __slots__ = ('emulated', 'elapsed_ms', 'downtime_ms', 'memory_total',
                 'memory_processed', 'post_copy', 'paused',
                 'convergence_policy', 'convergence_actions',
                 'postcopy_recovery')

    def __init__(self, **kwargs):
        for name in self.__slots__:
            setattr(self, name, kwargs.get(name))
        self.emulated = bool(self.emulated)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class ComputeDriver(abc.ABC):
    """The hypervisor seam of a compute agent."""

    #: False where the hypervisor cannot migrate and numamig emulates it.
    supports_native_migration = True

    @property
    @abc.abstractmethod
    def hypervisor_uri(self):
        """The URI this driver manages (reported to the conductor)."""

    @property
    @abc.abstractmethod
    def hypervisor_type(self):
        """'qemu', 'kvm' or 'test': migrations stay within one type."""

    @abc.abstractmethod
    def init_host(self, host):
        """Connect and check configuration against the host.

        :raises InvalidConfiguration: e.g. cpu_dedicated_set names CPUs
            the host does not have.
        """

    @abc.abstractmethod
    def get_host_topology(self):
        """Return the host's HostNUMATopology without any guest usage.

        Dedicated/shared sets, reserved memory and reserved huge pages
        from configuration are applied.
        """

    def host_cpu(self):
        """This host's HostCPU for its reports, or None where the driver
        knows no CPU (its reports then say nothing: unknown)."""
        return None

    def guest_cpu(self, instance_uuid):
        """The guest's cpumodel.GuestCPU as it would migrate, or None
        where the driver cannot tell."""
        return None

    def compare_guest_cpu(self, guest):
        """Whether this host can run ``guest`` (a cpumodel.GuestCPU):
        a cpumodel.Compatibility, by the hypervisor where it can compare
        and by this host's HostCPU where not."""
        return cpumodel.compatibility(guest, self.host_cpu())

    @abc.abstractmethod
    def list_guests(self):
        """Return {instance uuid: domain name} of guests on this host."""

    @abc.abstractmethod
    def get_domain_xml(self, instance_uuid, persistent=False):
        """Return the live (or persistent) domain XML of a guest."""

    @abc.abstractmethod
    def get_guest_topology(self, instance_uuid):
        """Parse a guest's live XML back into an InstanceNUMATopology.

        :returns: the topology, or None for a guest with no NUMA
            characteristics.
        """

    @abc.abstractmethod
    def spawn(self, instance, placed_topology, base_xml=None):
        """Create and start a guest with the NUMA XML of its placement."""

    @abc.abstractmethod
    def destroy(self, instance_uuid):
        """Stop and undefine a guest; a missing guest is not an error."""

    def postcopy_paused(self, instance_uuid):
        """Whether the guest waits paused here in a post-copy migration
        that lost its connection: its CPU state and the pages sent are
        on the destination, so nothing may roll the migration back.
        Hypervisors without post-copy never are."""
        return False

    def resize_virtio_mem(self, instance_uuid, requested_mb, deadline_s):
        """Set a running guest's virtio-mem requested sizes ({guest cell:
        MiB}) and wait up to ``deadline_s`` for ``current`` to follow.

        :returns: ({guest cell: current MiB}, reached).
        :raises HypervisorError: the hypervisor cannot resize them.
        """
        raise exception.HypervisorError(
            host=getattr(self, 'host', '?'),
            action='resize virtio-mem devices',
            reason=f"{type(self).__name__} cannot resize them")

    @abc.abstractmethod
    def build_migrate_info(self, new_topology, host_topology):
        """Destination side: NUMAMigrateInfo for a claimed placement."""

    @abc.abstractmethod
    def migration_target(self):
        """Destination side: (dest_connect_uri, migration_uri).

        What a source needs to reach this host's hypervisor and send the
        migration stream to it.
        """

    @abc.abstractmethod
    def get_destination_xml(self, instance_uuid, numa_info):
        """Source side: the domain XML the destination should run.

        With ``numa_info`` (a NUMAMigrateInfo) the NUMA parts are rewritten
        for the destination; with None the source XML is returned as is
        (the path of releases before NUMA-aware live migration).
        """

    @abc.abstractmethod
    def live_migrate(self, instance_uuid, dest_xml, migrate_data,
                     progress_callback=None, policy=None,
                     recovery_callback=None, abort_requested=None,
                     threads=None, action_callback=None):
        """Source side: migrate natively and block until it ends.

        :param threads: the CPUs chosen for the job's own threads: an
            object with ``cpus`` (frozenset; empty: pin nothing),
            ``basis`` (numamig.objects.migration_threads.BASES) and
            ``report(record)``, called once the job ends with this host's
            side of MigrationThreads.sides. None: the driver's own
            configuration decides.

        :param progress_callback: called with a MigrationProgress sample
            while the job runs.
        :param policy: the convergence Policy (numamig.convergence.policy)
            the job runs under; None: this host's default.
        :param recovery_callback: called with the post-copy recovery
            history (a list of dicts) each time it grows.
        :param action_callback: called with each convergence policy
            Action the job applies (or only observes), its outcome
            (numamig.convergence.policy.ACTION_OUTCOMES) and its line in
            the result's actions, as it happens.
        :param abort_requested: a threading.Event the caller sets to
            abort; set before the hypervisor's job exists (where
            live_migration_abort finds none), the job does not start or
            is aborted as soon as it exists.
        :returns: a MigrationResult.
        :raises PostCopyPaused: the connection dropped during post-copy
            and the job could not be resumed: the guest is paused, split
            between the hosts; nothing may be rolled back.
        :raises MigrationError or HypervisorError: the guest stays on the
            source with its old placement.
        """

    def resume_postcopy(self, instance_uuid, target, history, policy=None,
                        progress_callback=None, recovery_callback=None,
                        reason='resume requested'):
        """Source side: one more recovery run of a post-copy migration
        whose recovery gave up (an operator's resume), blocking until it
        completes or gives up again.

        :param target: the destination's answer to postcopy_resume_target
            with its ``dest_host``: ``dest_connect_uri``,
            ``migration_uri`` and ``xml`` (what its paused half runs).
        :param history: the recovery history recorded so far.
        :returns: a MigrationResult (the guest runs on the destination).
        :raises PostCopyPaused: it gave up again; the guest is paused.
        """
        raise exception.MigrationNotSupported(
            host=getattr(self, 'host', '?'), uri='',
            action='resume a post-copy migration',
            reason='this hypervisor has no post-copy')

    def select_migration_policy(self, requested=None, flavor=None,
                                image=None):
        """The convergence Policy of a migration from here, and where its
        name came from (the request, the flavor, the image or this
        host's default); the timer policy unless overridden.

        :raises UnknownMigrationPolicy:
        """
        return convergence.SHIPPED[convergence.TIMER], 'the default'

    def emulate_copy(self, instance_uuid, policy, progress_callback=None,
                     action_callback=None):
        """Source side of an emulated migration: model its pre-copy under
        ``policy`` (numamig.convergence.emulated), reporting each pass to
        ``progress_callback`` and each policy action to
        ``action_callback`` (as live_migrate's).

        :returns: a MigrationResult of the modelled copy, or None where
            no copy is modelled (then the migration copies nothing).
        :raises MigrationAborted: the policy aborted it; the guest stays.
        """
        return None

    def predict_convergence(self, instance_uuid, policy):
        """Source side: sample the guest's dirty rate and predict whether
        its migration under ``policy`` converges (numamig.convergence.
        predict).

        :returns: a dict: prediction, reason, predicted_elapsed_ms,
            predicted_downtime_ms, sampled_dirty_rate (B/s or None),
            dirty_rate_method (or why none measured), policy.
        """
        return {'prediction': 'unknown', 'policy': policy.name,
                'reason': 'this driver cannot measure dirty rates',
                'predicted_elapsed_ms': None, 'predicted_downtime_ms': None,
                'sampled_dirty_rate': None, 'dirty_rate_method': None}

    def sample_dirty_rates(self, instance_uuids, seconds=1):
        """Source side, before any migration: estimate how fast each of
        these guests dirties memory, all in one window of ``seconds``
        (a drain orders its moves and chooses their policies from it).

        :returns: {'guests': {uuid: {'dirty_rate': B/s or None,
            'method': how measured, or None, 'reason': why not measured
            or None, 'memory': bytes}}, 'figures': what a prediction
            needs of this host's settings (numamig.virt.libvirt.
            dirty_rate.figures), or None}. A guest not here is left out.
        """
        return {'guests': {
            uuid: {'dirty_rate': None, 'method': None, 'memory': None,
                   'reason': 'this driver cannot measure dirty rates'}
            for uuid in instance_uuids}, 'figures': None}

    def migration_housekeeping_cpus(self):
        """The operator's CPUs for migration threads ([libvirt]
        migration_thread_cpus): a frozenset, or None when unset."""
        return None

    def watch_incoming_migration(self, instance_uuid, chosen, memory_mb,
                                 on_end):
        """Destination side: pin and record the arriving guest's
        migration threads until the returned watch's ``stop()`` (or its
        own time limit), then call ``on_end`` with this host's side of
        MigrationThreads.sides.

        :param chosen: (cpus, basis) from numamig.numa.migration_cpus.
        :returns: the started watch, or None where this driver has no
            threads to watch (then ``on_end`` is never called).
        """
        return None

    @abc.abstractmethod
    def live_migration_abort(self, instance_uuid):
        """Abort a running migration of the guest."""

    @abc.abstractmethod
    def live_migration_force_complete(self, instance_uuid):
        """Make a running migration converge (post-copy or pause)."""

    @abc.abstractmethod
    def accept_emulated_migration(self, instance_uuid, dest_xml):
        """Destination side of an emulated migration: define and start.

        :returns: a MigrationResult with ``emulated`` set.
        """

    # -- the locality watch (numamig.compute.locality) --------------------

    def locality_samples(self, proc):
        """One look at every running guest here for the locality watch.

        :param proc: the proc file system root QEMUs are found in.
        :returns: [numamig.numa.locality.GuestSample], the guests whose
            memory or vCPUs could not be read included with what was read
            (the watch names them). A driver that cannot measure: [].
        """
        return []

    def move_guest_memory(self, instance_uuid, node, proc):
        """Move a running guest's memory to host ``node`` and pin its
        vCPUs to that node's CPUs, live only (see numamig.virt.libvirt.
        locality.move; ``proc``: where its QEMU is found, should libvirt
        be unable to change its nodeset).

        :returns: the CPUs its vCPUs are now pinned to.
        :raises HypervisorError: the hypervisor refused or cannot.
        """
        raise exception.HypervisorError(
            host='-', action=f'move the memory of {instance_uuid}',
            reason='this driver cannot move guest memory')

    # -- the destination-side migration guard (optional) -----------------

    def refresh_distances(self):
        """Read the host's NUMA distance table again.

        The firmware's table does not change while a host runs, but
        libvirt's report of it may (a libvirtd upgraded or restarted
        with other capabilities, a capabilities file edited): a host
        whose table changes is re-reported with it so that placement
        follows. Called by the agent's periodic usage recompute.

        :returns: the host topology (as get_host_topology) with the new
            table when it changed, else None. A driver without a table
            returns None.
        """
        return None

    def migration_guard_state(self):
        """'off', 'on' or 'failed': whether incoming migrations here are
        checked against this host's claims (numamig.virt.libvirt.guard).
        A driver without a guard reports 'off'."""
        return 'off'

    def read_guard_log(self, position=None):
        """The guard's decisions since ``position`` (numamig.virt.libvirt.
        guard.read_log): ([entries with action, guest, instance_uuid and
        reason], the position to read from next). None: start at the
        log's end. A driver without a guard or a guard log: ([], None).
        """
        return [], None

    def migration_guard_refresh_s(self):
        """Seconds between two publications of the claims when none
        changes (so the guard can tell a live agent); None: no guard."""
        return None

    def publish_move_claims(self, claims):
        """Tell the guard this host's move claims now.

        :param claims: {instance uuid: (migration uuid, placed
            InstanceNUMATopology)}, every claim held here.
        """
        return None

    def check_arrival(self, instance_uuid, migration_uuid, topology):
        """Make an arrived guest's persistent definition follow the claim
        the guard applied, and say whether its live XML does.

        :returns: None when the live XML has the claim's placement, else
            why not (the guard did not run for it).
        """
        return None

    # -- passed-through PCI devices (numamig.virt.libvirt.hostdev) ----------

    def assigned_devices(self, instance_uuid):
        """['DDDD:BB:SS.F'] of the host PCI devices the guest holds
        (none where the driver cannot tell)."""
        return []

    def detach_devices(self, instance_uuid, deadline_s, on_late=None):
        """Source side, before the copy: hot-unplug every passed-through
        device and wait up to ``deadline_s`` for the guest to release
        them.

        :param on_late: called as ``on_late(address, alias, outcome,
            reason)`` for each device the guest releases after the
            deadline, once it was plugged back (outcome ``replugged``) or
            could not be (``lost``); from another thread, never raising
            into the driver.

        :returns: opaque device records, for ``reattach_devices``.
        :raises DeviceDetachFailed: nothing stays unplugged.
        """
        return []

    def reattach_devices(self, instance_uuid, detached):
        """Source side, after a failed or aborted migration: plug back
        what ``detach_devices`` returned (idempotent).

        :raises DeviceAttachFailed:
        """
        return []

    def attach_devices(self, instance_uuid, placements, template=None):
        """Destination side, after the arrival: hot-plug the claimed
        devices, persistently.

        :param placements: [(alias, 'DDDD:BB:SS.F', guest cell)].
        :param template: the source's device records, in the same order
            where known, whose guest-side slots the new devices take.
        :returns: the addresses plugged now (none when asked again).
        :raises DeviceAttachFailed:
        """
        if placements:
            raise exception.MigrationNotSupported(
                host=self.host, uri=self.hypervisor_uri,
                action='plug passed-through devices',
                reason='this driver has no PCI device support')
        return []

    def verify_device_affinity(self, instance_uuid, placements):
        """Destination side, after the arrival: each placement's device,
        read back from the hypervisor: is it plugged, and on the host
        node of its guest cell? [dict] (see hostdev.verify_affinity)."""
        return []

