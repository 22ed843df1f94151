"""Instance creation and adoption, for operators and CI.

Creation records the instance without a host, then asks the chosen host
(or the scheduler's candidates in order) to claim and create it; the
first host that takes it records the placement. With ``[virtio_mem]
placement_reclaim`` a refusing host is asked again once its guests gave
memory back, and a scheduled guest no candidate took tries the hosts the
scheduler refused only for memory on one node, reclaim first
(conductor.tasks.placing, as a scheduled migration does). Adoption asks
a host to describe the NUMA guests it runs that numamig does not know,
and records them as they are placed there.
"""

from oslo_log import log as logging

from numamig import exception
from numamig.conductor import drain
from numamig.conductor.tasks import base
from numamig.conductor.tasks import placement_reclaim
from numamig.conductor.tasks import placing
from numamig.db import instances
from numamig.numa import instance_request
from numamig.numa import specs

LOG = logging.getLogger(__name__)

_REFUSALS = (exception.MigrationPreCheckError, exception.ComputeHostDown,
             exception.ReservationConflict, exception.HostNotFound)


class BuildInstanceTask(base.TaskBase):
    """Record and create one instance on a chosen or scheduled host."""

    def __init__(self, ctxt, worker, instance, host=None):
        super().__init__(ctxt, worker)
        self.instance = instance
        self.host = host
        self.refused = {}
        self._recorded = False
        # What was reclaimed from whom to place the guest
        # (MigrationReclaim entries).
        self.memory_reclaim = []
        # Scheduled only: the hosts disabled for maintenance, and the
        # hosts a reclaim may open (placement_reclaim.Options) once asked.
        self._disabled = None
        self.reclaim_options = None

    def _execute(self):
        self.instance.host = None
        self.instance.numa_topology = None
        # Before anything is recorded: a typo in a key would otherwise
        # give an unpinned guest, silently, and an unknown migration
        # policy a guest that can never migrate.
        specs.check(self.instance.get('extra_specs'),
                    self.instance.get('image_properties'),
                    self.worker.settings.foreign_numa_specs,
                    self.worker.settings.migration_policies)
        request = instance_request.numa_request(
            self.instance, self.worker.settings.pci_aliases)
        self.instance.validate()
        self._check_host_known()
        instances.create(self.worker.db, self.instance)
        self._recorded = True
        tries = placing.first_taker(
            self._hosts(request),
            lambda host, choice, tries: self._try(host, choice, tries,
                                                  request),
            self._reclaim_options(request))
        if tries.answer is not None:
            return tries.answer
        reason = "; ".join(f"{h}: {r}" for h, r in self.refused.items()) \
            or "no compute host has reported"
        if self.reclaim_options is not None:
            reason += "; " + self.reclaim_options.note
        raise exception.InstanceBuildError(instance_uuid=self.instance.uuid,
                                           reason=reason)

    def _try(self, host, choice, tries, request):
        """Build on ``host`` (after reclaiming ``choice`` when given, or
        once it refused, placement_reclaim); None when it refused."""
        try:
            built, _room = placement_reclaim.PlacementReclaimTask(
                self.ctxt, self.worker, host,
                lambda: self._build_on(host, request), self.instance.uuid,
                self.instance.uuid, self._record_reclaim).execute(
                    choice, request)
            return built
        except _REFUSALS as exc:
            tries.attempts.append(host)
            self.refused[host] = exception.brief(exc)
            self.worker.cache.release(host, self.instance.uuid)
            return None

    def _reclaim_options(self, request):
        """For a scheduled guest with ``[virtio_mem] placement_reclaim``
        on: a function giving the hosts the scheduler refused only for
        memory on one node, each with what a reclaim would take
        (placement_reclaim.scheduled_options, read once); else None."""
        if self.host or request is None or \
                not placement_reclaim.enabled(self.worker):
            return None

        def options(exclude):
            if self.reclaim_options is None:
                self.reclaim_options = placement_reclaim.scheduled_options(
                    self.worker, request, None, self.instance.uuid,
                    exclude=exclude, disabled=self._disabled)
            return self.reclaim_options
        return options

    def _check_host_known(self):
        """Refuse a named host that never reported, before recording.

        A host name that is not known is the operator's mistake (bad
        input, nothing recorded); a known host that refuses the guest is
        the host's answer and is reported as a build error.

        :raises HostNotFound: if ``host`` was given and never reported.
        """
        if self.host:
            self.worker.cache.get(self.host)

    def _hosts(self, request):
        if self.host:
            return [self.host]
        self._disabled = drain.disabled_hosts(self.worker)
        selection = self.worker.scheduler.select_destinations(
            request, None, limits=self.worker.settings.limits,
            disabled=self._disabled)
        self.refused.update(selection.refusals())
        return selection.hosts

    def _build_on(self, host, request):
        if request is not None and not self.host:
            self.worker.scheduler.reserve(
                host, self.instance.uuid, self.instance.project_id, request,
                limits=self.worker.settings.limits)
        else:
            self.worker.cache.check_up(host)
        built = self.worker.compute_api.build_instance(
            self.ctxt, self.instance, host, limits=self.worker.settings.limits)
        LOG.info("Instance %s created on %s", built.uuid, host)
        return built

    def _record_reclaim(self, entries):
        """A new guest has no migration record: what was reclaimed for
        it is logged (and kept in the memory change records)."""
        self.memory_reclaim.extend(entries)
        for entry in entries:
            LOG.info("Instance %s: reclaimed for its placement on %s: "
                     "guest %s cell %s %s -> %s MiB (%s)",
                     self.instance.uuid, entry['host'],
                     entry['instance_uuid'], entry['cell'],
                     entry['before_mb'], entry['current_mb'],
                     entry['outcome'])

    def rollback(self, exc):
        """Forget the record of an instance no host created."""
        if self._recorded:
            instances.destroy(self.worker.db, self.instance.uuid)


def adopt_guests(worker, ctxt, host):
    """Record the NUMA guests of ``host`` that numamig does not know.

    :returns: the recorded Instances.
    """
    worker.cache.check_up(host)
    adopted = []
    for instance in worker.compute_api.adopt_guests(ctxt, host):
        try:
            instances.create(worker.db, instance)
        except exception.RecordExists:
            LOG.warning("Guest %s on %s is already recorded (elsewhere?); "
                        "not adopted", instance.uuid, host)
            continue
        LOG.info("Adopted guest %s (%s) on %s", instance.name,
                 instance.uuid, host)
        adopted.append(instance)
    return adopted
