"""The live-migration dry run: where a guest would go, claiming nothing.

It runs the live-migration task's checks and destination choice on an
unrecorded migration, then fits the guest on the chosen host's last
reported topology (minus in-flight reservations) instead of asking the
host to claim. Nothing is recorded, reserved or claimed; the answer is
as good as the hosts' last reports.
"""

from numamig import exception
from numamig import objects
from numamig.conductor.tasks import live_migrate
from numamig.conductor.tasks import placement_reclaim
from numamig.convergence import policy as convergence
from numamig.numa import fit
from numamig.numa import hostjson


class LiveMigrationDryRun(live_migrate.LiveMigrationTask):
    """Answer where a live migration would go and how it would be pinned.

    ``execute`` returns a dict: ``instance_uuid``, ``source_host``,
    ``dest_host`` (None when no host fits), ``numa_topology`` (the
    placement there, None for a guest without NUMA characteristics),
    ``candidates`` (every host that would be tried, in order),
    ``refused`` (host -> reason), ``distance`` (with a placement: the
    distance cost of the host cells chosen, its excess and why them, as
    ``numamig-manage numa fit`` prints it), ``policy`` and ``policy_from`` (the
    convergence policy the migration would run under and where its name
    came from: requested, flavor, image or default, chosen as the request
    chooses it) and ``prediction`` (whether it would converge under it: a
    dict, see ComputeDriver.predict_convergence). With
    ``[virtio_mem] placement_reclaim``, when no host takes the guest as
    it is: ``reclaim_note`` (what was considered) and, when a reclaim
    would place it, ``dest_host`` the host it would reclaim on first,
    ``candidates`` those it would try in order and ``reclaim`` what it
    would take there from whom (no placement: it is fitted only once
    the guests gave their part).
    """

    def __init__(self, ctxt, worker, instance, requested_host=None,
                 policy=None):
        migration = objects.Migration(
            uuid='00000000-0000-0000-0000-000000000000',
            instance_uuid=instance.uuid, source_host=instance.host,
            requested_host=requested_host)
        super().__init__(ctxt, worker, instance, migration)
        self.policy = policy

    def _execute(self):
        # First, as the request does: an unknown policy is bad input,
        # whatever the hosts.
        policy, where = convergence.select(
            self.worker.settings.migration_policies, self.policy,
            (self.instance.get('extra_specs') or {}).get(
                convergence.FLAVOR_KEY),
            (self.instance.get('image_properties') or {}).get(
                convergence.IMAGE_KEY),
            self.worker.settings.default_migration_policy)
        try:
            hosts = self._check_and_choose()
        except exception.NoValidHost:
            hosts = []
        answer = {'instance_uuid': self.instance.uuid,
                  'source_host': self.instance.host, 'dest_host': None,
                  'numa_topology': None, 'candidates': [],
                  'refused': self.refused}
        answer['candidates'] = list(hosts)
        for host in hosts:
            placed, reason, distance = self._fit_on(host)
            if reason is None:
                answer.update(dest_host=host, numa_topology=placed,
                              distance=distance)
                break
            self.refused[host] = reason
        if answer['dest_host'] is None and self._reclaims_scheduled():
            answer.update(self._through_reclaim(hosts))
        answer.update(policy=policy.name, policy_from=where,
                      prediction=live_migrate.prediction_of(
                          self.worker, self.ctxt, self.instance,
                          policy.name))
        return answer

    def _through_reclaim(self, hosts):
        """Where a reclaim would place the guest no host takes as it is
        (the first host the migration would reclaim on): ``dest_host``
        and ``reclaim`` (placement_reclaim.dry_run_view), with what was
        considered under ``reclaim_note``. Nothing is asked or changed.
        """
        options = self._reclaim_options(hosts)
        found = {'reclaim_note': options.note}
        if options.ranked:
            prospect, choice = options.ranked[0]
            found.update(dest_host=prospect.host,
                         candidates=[p.host for p, _ in options.ranked],
                         reclaim=placement_reclaim.dry_run_view(
                             prospect.host, choice))
        return found

    def _busy_destinations(self):
        """None: the answer is where the guest fits, whatever is in
        flight now (a real migration waits for a busy host's slot or
        takes another)."""
        return ()

    def _fit_on(self, host):
        """Return (placed topology, None, its distance as
        hostjson.distance_json) or (None, why not, None)."""
        if self.request is None:
            return None, None, None
        state = self.worker.cache.get(host)
        result = fit.fit(state.topology, self.request,
                         limits=self.worker.settings.limits,
                         strategy=self.worker.scheduler.cell_strategy,
                         pagesize_kb=self.pagesize_kb)
        if not result.fits:
            return None, f"NUMA topology does not fit: {result.reason}", None
        return (result.topology, None,
                hostjson.distance_json(result.distance))

    def rollback(self, exc):
        """Nothing was recorded or claimed: nothing to undo."""
