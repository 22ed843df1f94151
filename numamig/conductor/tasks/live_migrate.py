"""The conductor's live-migration task: choose a destination, claim, start.

Read ``_execute`` top to bottom: each ``_check_*`` step either passes or
raises an error an operator can act on. The migration is recorded as
``accepted`` before the task runs; the task asks the source to confirm
the guest and report whether it takes part in NUMA-aware live migration
(once), then tries destinations (the requested one, or the scheduler's
candidates best first), handing each the source's answer and asking it
to check and claim. A destination of compute API 1.3 returns its claim:
the task records it with ``queued`` in one transaction (dropping it at
the destination if it cannot). It moves on after a refusal or a timeout
up to ``migrate_max_retries`` further candidates, then casts the
migration to the source, which drives it from there.

The conductor, not the destination, asks the source: an agent's RPC
handler then never calls another agent, so agents' RPC pools can never
wait on each other in a cycle. A destination of an older release (or a
``[upgrade_levels] compute`` cap below 1.3) is asked the way before and
asks the source itself.

If no destination takes the guest the migration ends ``error`` with the
reason of every host tried, and nothing stays claimed or reserved.
"""

import typing

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import attempts
from numamig import exception
from numamig import objects
from numamig.conductor import drain
from numamig.conductor import records
from numamig.conductor.tasks import base
from numamig.conductor.tasks import placement_reclaim
from numamig.conductor.tasks import placing
from numamig.convergence import policy as convergence
from numamig.convergence import predict
from numamig.db import migration_satellites
from numamig.db import migrations
from numamig.db import queue
from numamig.numa import instance_request
from numamig.objects import fields
from numamig.objects import service as service_obj

LOG = logging.getLogger(__name__)
STATUS = fields.MigrationStatus

# The source's check is asked this many times within check_timeout: a
# source agent killed holding the request never answers it, and its
# restarted agent answers the next attempt (the check only reads); a
# request or answer lost with a broker restart is answered at the next
# attempt too. The attempts wait growing shares (attempt_shares): such a
# loss costs the first, 6 s with the defaults, so that migrations settle
# well within 20 s of a broker restart, while a slow answer still gets
# most of the wait.
SOURCE_ATTEMPTS = 4

# The destination's check is asked this many times within check_timeout:
# its answer can be lost on the way back (a broker restart deletes the
# reply queue it was in) and the check is idempotent (a repeat returns
# the claim taken), so a lost answer costs the first of growing shares
# of the timeout (6 s with the defaults) instead of the whole of it, and
# the migration is not refused for an agent that answered.
DESTINATION_ATTEMPTS = 4


# Errors after which the next candidate is tried.
_REFUSALS = (exception.MigrationPreCheckError, exception.ComputeHostDown,
             exception.ReservationConflict, exception.HostNotFound,
             messaging.MessagingTimeout)


class HostsRead(typing.NamedTuple):
    """What the task's choice needs of the records' hosts, read by its
    caller with the migration (records.read_admitted)."""

    busy: frozenset         # destinations at their incoming limit
    maintenance: dict       # {host: compute_nodes.Maintenance} disabled

    # A field left None was not read: the task reads it when it needs it.


class LiveMigrationTask(base.TaskBase):
    """Choose, claim and start one recorded (``accepted``) migration."""

    def __init__(self, ctxt, worker, instance, migration, hosts=None,
                 policy=None):
        """:param hosts: HostsRead with the migration; None: the task
            reads them when it chooses (a precheck or a dry run).
        :param policy: the name of the convergence policy chosen when
            the migration was recorded (its MigrationConvergence.policy,
            a satellite record read with it); None: none was (recorded
            by release 1), the source chooses."""
        super().__init__(ctxt, worker)
        self.instance = instance
        self.migration = migration
        self.policy = policy
        self.hosts = hosts
        self.request = None
        self.pagesize_kb = None
        self.refused = {}
        # The answer of the destination that took the guest, once one did.
        self.migrate_data = None
        # The source's answer to its check (API 1.3), asked once.
        self.source_data = None
        # Placement reclaims on destinations, in order: [Room or None
        # (given back), its MigrationReclaim entries].
        self.reclaims = []
        # The scheduler's Selection, and the hosts a reclaim may open
        # (placement_reclaim.Options) once asked (scheduled only).
        self.selection = None
        self.reclaim_options = None

    def _execute(self):
        hosts = self._check_and_choose()
        if not hosts:
            # No candidate: only a reclaim can place the guest.
            options = self._reclaim_options(())
            if not options.ranked:
                raise self._no_valid_host()
            first = options.ranked[0][0].host
        else:
            first = hosts[0]
        self.source_data = self._ask_source(first)
        hosts = self._cpu_filtered(hosts)
        self._predict()
        self.migrate_data = self._claim_on_first_taker(hosts)
        self._queue(self.migrate_data)
        return self.migration

    def precheck(self):
        """The checks that ask no host, before a request is queued.

        An operator learns at once of a mistake (unknown or down hosts,
        unusable specs) instead of from a migration that ends ``error``;
        the migration thread checks again when it runs.
        """
        self._check_instance_on_source()
        self._check_source_up()
        self.request = instance_request.numa_request(self.instance)
        self._check_numa_live_migration_supported()
        if self.migration.requested_host:
            self._check_requested_destination()

    def _check_and_choose(self):
        """The checks and the ordered destinations (shared by dry runs)."""
        self._check_instance_on_source()
        self._check_source_up()
        self.request = instance_request.numa_request(self.instance)
        self.pagesize_kb = instance_request.source_page_size(self.instance)
        self._check_numa_live_migration_supported()
        if self.migration.requested_host:
            return [self._check_requested_destination()]
        return self._scheduled_destinations()

    def rollback(self, exc):
        """Record ``error`` with every host's reason; release claims;
        give back memory reclaimed to place the guest.

        A migration whose destinations were all busy goes back to the
        queue instead (nothing was claimed for it), and so does one that
        met an unreachable database, later (see MigrationExecutor): its
        reclaim stays recorded as done and is used when it runs again.
        """
        try:
            self._rollback(exc)
        finally:
            if not isinstance(exc, exception.DatabaseError):
                self._give_back_reclaims()

    def _rollback(self, exc):
        if isinstance(exc, exception.DestinationsBusy) and \
                queue.requeue(self.worker.db, self.migration.uuid):
            return
        if isinstance(exc, exception.DatabaseError):
            # Nothing can be recorded now: the conductor's executor puts
            # the migration back in the queue once the database answers.
            return
        reason = exception.brief(exc)
        if self.refused:
            reason += " (refused: " + "; ".join(
                f"{h}: {r}" for h, r in self.refused.items()) + ")"
        try:
            records.set_status(self.worker, self.migration.uuid,
                               STATUS.ERROR, error=reason,
                               detail="no destination could be prepared")
        except exception.InvalidStatusTransition:
            # Cancelled meanwhile; its claims were released then.
            return
        if self.migrate_data is not None and \
                _may_hold_claim(self.migrate_data):
            # A destination claimed, then the start failed: it holds the
            # claim in memory until told.
            records.drop_claim_at(self.worker, self.ctxt, self.migration,
                                  self.migration.dest_host)

    # -- checks ------------------------------------------------------------

    def _check_instance_on_source(self):
        if self.instance.host != self.migration.source_host:
            raise exception.MigrationError(
                reason=f"instance {self.instance.uuid} runs on "
                       f"{self.instance.host}, not on the migration's source "
                       f"{self.migration.source_host}")

    def _check_source_up(self):
        self.worker.cache.check_up(self.migration.source_host)

    def _check_numa_live_migration_supported(self):
        if self.instance.get('numa_topology') is None or \
                not self.worker.release.numa_live_migration:
            # A conductor of the release before had no such check: it
            # copied the XML of every guest.
            return
        version = service_obj.NUMA_LIVE_MIGRATION_VERSION
        old = self.worker.cache.hosts_older_than(version)
        if not old:
            return
        if not self.worker.settings.enable_numa_live_migration_workaround:
            raise exception.NUMALiveMigrationUnsupported(
                instance_uuid=self.instance.uuid, hosts=', '.join(old),
                version=version)
        LOG.warning("Live-migrating NUMA instance %s while hosts %s are "
                    "older than NUMA-aware live migration ([workarounds] "
                    "enable_numa_live_migration): migrations touching them "
                    "copy the XML verbatim", self.instance.uuid,
                    ', '.join(old))

    def _check_requested_destination(self):
        host = self.migration.requested_host
        if host == self.migration.source_host:
            raise exception.InvalidDestination(
                host=host, instance_uuid=self.instance.uuid,
                reason="it is the instance's source host")
        state = self.worker.cache.check_up(host)
        drain.check_enabled(self.worker, host, self.instance.uuid,
                            self._hosts_read('maintenance'))
        source = self.worker.cache.get(self.migration.source_host)
        if state.hypervisor_type != source.hypervisor_type:
            raise exception.InvalidDestination(
                host=host, instance_uuid=self.instance.uuid,
                reason=f"its hypervisor type {state.hypervisor_type} "
                       f"differs from the source's "
                       f"{source.hypervisor_type}")
        return host

    def _scheduled_destinations(self):
        busy = self._hosts_read('busy')
        busy = self._busy_destinations() if busy is None else set(busy)
        maintenance = self._hosts_read('maintenance')
        disabled = drain.disabled_hosts(self.worker) if maintenance is None \
            else drain.disabled_reasons(maintenance)
        selection = self.worker.scheduler.select_destinations(
            self.request, self.migration.source_host,
            limits=self.worker.settings.limits, pagesize_kb=self.pagesize_kb,
            exclude=busy, disabled=disabled)
        refusals = selection.refusals()
        refusals.pop(self.migration.source_host, None)
        self.refused.update(refusals)
        self.selection = selection
        if not selection.candidates and not self._reclaims_scheduled():
            raise selection.no_valid_host()
        return selection.hosts

    def _cpu_filtered(self, hosts):
        """The scheduled ``hosts`` whose CPU can run the guest's.

        The guest's CPU is known from the source's answer, which comes
        after the choice: the scheduler's CPU filter is applied to the
        candidates here, before any is asked. A requested host is not
        filtered: its precheck answers with libvirt's comparison. Hosts
        refused here are recorded with their reason like any refusal.

        :raises NoValidHost: no candidate's CPU can run the guest's.
        """
        guest = self.source_data.guest_cpu() \
            if self.source_data is not None else None
        if guest is None or self.migration.requested_host or not hosts:
            return hosts
        kept, refusals = self.worker.scheduler.cpu_filter(hosts, guest)
        for host, reason in refusals.items():
            LOG.info("Migration %s: %s refused by the CPU filter: %s",
                     self.migration.uuid, host, reason)
            self.refused[host] = reason
            self._record_refusal(host, reason)
        if not kept:
            # NoValidHost names each refused host with its reason.
            raise self._no_valid_host(
                f"no candidate's CPU can run the CPU of instance "
                f"{self.instance.uuid}")
        return kept

    def _hosts_read(self, name):
        """A field of the HostsRead given, None if it was not read."""
        return None if self.hosts is None else getattr(self.hosts, name)

    def _busy_destinations(self):
        """Hosts at their incoming limit, left out of the choice."""
        return queue.busy_destinations(self.worker.db,
                                       self.worker.settings.admission.per_dest)

    def _ask_source(self, first_host):
        """The source's check and NUMA flag, for every candidate.

        It is asked up to SOURCE_ATTEMPTS times, each waiting its share
        of ``[DEFAULT] rpc_response_timeout_migration`` (attempt_shares):
        the whole wait stays that option, and a source whose agent was
        killed holding the request costs the first share (6 s with the
        defaults), not all.

        :returns: its LiveMigrateData, or None when destinations must ask
            it themselves (compute API capped below 1.3).
        :raises MigrationPreCheckError: the guest is not on the source.
        :raises AgentDidNotAnswer: no attempt was answered.
        """
        api = self.worker.compute_api
        if not api.supports_conductor_checks():
            return None
        request = objects.LiveMigrateData(
            instance_uuid=self.instance.uuid,
            source_host=self.migration.source_host, dest_host=first_host,
            migration_uuid=self.migration.uuid,
            # Destinations will be offered the claim: the source then
            # reports whether it takes part itself.
            dst_supports_numa_live_migration=(
                api.supports_numa_live_migration()))
        shares = attempts.attempt_shares(self.worker.settings.check_timeout,
                                SOURCE_ATTEMPTS)
        for attempt, share in enumerate(shares, 1):
            try:
                return api.check_can_live_migrate_source(
                    self.ctxt, self.instance, request, timeout=share)
            except messaging.MessagingTimeout:
                if attempt == SOURCE_ATTEMPTS:
                    raise exception.AgentDidNotAnswer(
                        host=self.migration.source_host,
                        method='check_can_live_migrate_source',
                        timeout=sum(shares),
                        option=f"[DEFAULT] rpc_response_timeout_migration, "
                               f"asked {SOURCE_ATTEMPTS} times") from None
                LOG.warning("Migration %s: source %s did not answer "
                            "check_can_live_migrate_source within %s s "
                            "(attempt %d of %d); asking again",
                            self.migration.uuid, self.migration.source_host,
                            share, attempt, SOURCE_ATTEMPTS)

    # -- claiming ------------------------------------------------------------

    def _claim_on_first_taker(self, hosts):
        retries = self.worker.settings.migrate_max_retries
        tries = placing.first_taker(
            hosts, self._try_counted,
            self._reclaim_options if self._reclaims_scheduled() else None,
            budget=None if retries < 0 else retries + 1)
        if tries.answer is not None:
            return tries.answer
        if tries.busy and tries.room():
            raise exception.DestinationsBusy(
                instance_uuid=self.instance.uuid,
                hosts=', '.join(tries.busy))
        skipped = len([h for h in hosts if not tries.tried(h)])
        reason = (f"{len(tries.attempts)} destination(s) tried for instance "
                  f"{self.instance.uuid}, none could take it"
                  + (f" ({skipped} more not tried: migrate_max_retries is "
                     f"{retries})" if skipped else ''))
        raise self._no_valid_host(reason)

    def _try_counted(self, host, choice, tries):
        """Try ``host`` (after reclaiming ``choice`` when given); return
        its answer, or None when it refused (appended to the Tries'
        ``attempts``) or is busy (to ``busy``, costing no retry)."""
        try:
            return self._try_with_reclaim(host, choice)
        except exception.DestinationBusy:
            # Not a refusal of this guest: another migration (of this
            # or another conductor worker) took the host's last
            # incoming slot since the choice. It costs no retry.
            LOG.info("Migration %s: %s is at its incoming limit now; "
                     "skipped", self.migration.uuid, host)
            tries.busy.append(host)
            self.worker.cache.release(host, self.instance.uuid)
            return None
        except _REFUSALS as exc:
            tries.attempts.append(host)
            reason = _reason_of(exc, self.worker.settings.check_timeout)
            LOG.info("Migration %s: %s refused instance %s: %s",
                     self.migration.uuid, host, self.instance.uuid,
                     reason)
            self.refused[host] = reason
            self.worker.cache.release(host, self.instance.uuid)
            if isinstance(exc, messaging.MessagingTimeout):
                # It may still claim after we stopped waiting.
                records.drop_claim_at(self.worker, self.ctxt,
                                      self.migration, host)
            self._record_refusal(host, reason)
            return None

    def _try_destination(self, host):
        if self.request is not None and not self.migration.requested_host:
            self.worker.scheduler.reserve(
                host, self.instance.uuid, self.instance.project_id,
                self.request, limits=self.worker.settings.limits,
                pagesize_kb=self.pagesize_kb)
        else:
            self.worker.cache.check_up(host)
        self.migration = migrations.set_dest_host(
            self.worker.db, self.migration.uuid, host,
            max_incoming=self.worker.settings.admission.per_dest)
        migrate_data = self._ask_destination(host)
        context = migrate_data.get('migration_context')
        if context is not None:
            # The source needs none of it: the records hold it now.
            migrate_data.migration_context = None
            self._record_claim(host, context, migrate_data)
        return migrate_data

    def _ask_destination(self, host):
        """The destination's check and claim, asked up to
        DESTINATION_ATTEMPTS times, each waiting its share of
        ``[DEFAULT] rpc_response_timeout_migration``: the whole wait
        stays that option.

        :raises MessagingTimeout: (an AgentDidNotAnswer naming the whole
            wait) no attempt was answered.
        """
        shares = attempts.attempt_shares(self.worker.settings.check_timeout,
                                DESTINATION_ATTEMPTS)
        for attempt, share in enumerate(shares, 1):
            try:
                return self.worker.compute_api\
                    .check_can_live_migrate_destination(
                        self.ctxt, self.instance, host, self.migration,
                        self.worker.settings.limits, timeout=share,
                        source_data=self.source_data)
            except messaging.MessagingTimeout as exc:
                if attempt < DESTINATION_ATTEMPTS:
                    LOG.warning("Migration %s: destination %s did not "
                                "answer check_can_live_migrate_destination "
                                "within %s s (attempt %d of %d); asking "
                                "again", self.migration.uuid, host, share,
                                attempt, DESTINATION_ATTEMPTS)
                    continue
                if isinstance(exc, exception.AgentDidNotAnswer):
                    # Same class (also a MessagingTimeout: a refusal),
                    # naming the whole wait.
                    raise type(exc)(
                        host=host,
                        method='check_can_live_migrate_destination',
                        timeout=sum(shares),
                        option=f"[DEFAULT] rpc_response_timeout_migration, "
                               f"asked {DESTINATION_ATTEMPTS} times"
                    ) from None
                raise

    def _record_claim(self, host, context, migrate_data):
        """Record the destination's claim and ``queued`` together, with
        the start request (``migrate_data``) kept for a resend.

        :raises MigrationPreCheckError: the records refuse the claim
            (another migration holds one): dropped at ``host``, and the
            next candidate is tried.
        :raises InvalidStatusTransition: cancelled meanwhile: dropped at
            ``host``; the task ends.
        """
        held = self.instance.get('migration_context')
        try:
            self.migration = records.queue_with_claim(
                self.worker, context, detail=f"destination {host} claimed",
                held=None if held is None else held.migration_uuid,
                start=migrate_data)
        except (exception.MigrationPreCheckError,
                exception.InvalidStatusTransition):
            records.drop_claim_at(self.worker, self.ctxt, self.migration,
                                  host)
            raise

    def _predict(self):
        """Record the convergence prediction ([conductor]
        convergence_prediction record or refuse) before anything is
        claimed; refuse one predicted not to converge.

        :raises MigrationWillNotConverge:
        """
        mode = self.worker.settings.convergence_prediction
        if mode == 'off':
            return
        answer = prediction_of(self.worker, self.ctxt, self.instance,
                               self.policy)
        if answer.get('sampled') is False:
            return
        if mode == 'choose' and \
                answer['prediction'] == predict.WILL_NOT_CONVERGE:
            answer = self._other_policy(answer)
        migration_satellites.set_prediction(self.worker.db,
                                            self.migration.uuid, answer)
        if mode in ('refuse', 'choose') and \
                answer['prediction'] == predict.WILL_NOT_CONVERGE:
            raise exception.MigrationWillNotConverge(
                migration_uuid=self.migration.uuid,
                instance_uuid=self.instance.uuid,
                policy=answer.get('policy'), reason=answer.get('reason'))

    def _other_policy(self, answer):
        """The first fallback policy predicted to end the migration
        (same sample, ``by_policy``), recorded as its policy; ``answer``
        unchanged when there is none. A requested policy stays."""
        if self._requested_policy():
            return answer
        by_policy = answer.get('by_policy') or {}
        for name in self.worker.settings.convergence_fallback_policies:
            outcome = by_policy.get(name)
            if outcome and outcome not in (predict.WILL_NOT_CONVERGE,
                                           predict.UNKNOWN):
                LOG.info("Migration %s of %s: predicted not to converge "
                         "under policy %s; policy %s is predicted %s and "
                         "is chosen", self.migration.uuid,
                         self.instance.uuid, answer.get('policy'), name,
                         outcome)
                self.policy = migration_satellites.set_policy(
                    self.worker.db, self.migration.uuid, name).policy
                return dict(answer, prediction=outcome, policy=name,
                            reason=f"{answer.get('reason')}; policy {name} "
                                   f"chosen instead",
                            predicted_elapsed_ms=None,
                            predicted_downtime_ms=None)
        return answer

    def _requested_policy(self):
        """Whether the operator asked for this migration's policy: it
        differs from what the flavor, image and default choose (one
        requested equal to that choice counts as not requested). A guest
        whose flavor or image names an unknown policy (recorded by an
        earlier release) migrates only under a requested one."""
        try:
            derived, _where = convergence.select(
                self.worker.settings.migration_policies, None,
                (self.instance.get('extra_specs') or {}).get(
                    convergence.FLAVOR_KEY),
                (self.instance.get('image_properties') or {}).get(
                    convergence.IMAGE_KEY),
                self.worker.settings.default_migration_policy)
        except exception.UnknownMigrationPolicy:
            return self.policy is not None
        return self.policy not in (None, derived.name)

    def _record_refusal(self, host, reason):
        # Raises MigrationNotInProgress if the migration was cancelled
        # meanwhile, which ends the task.
        migrations.add_refused_host(self.worker.db, self.migration.uuid,
                                    host, reason)

    def _queue(self, migrate_data):
        if self.migration.status == STATUS.QUEUED:
            # Recorded with the claim (API 1.3).
            self._start(migrate_data)
            return
        try:
            self.migration = records.set_status(
                self.worker, self.migration.uuid, STATUS.QUEUED,
                expected=[STATUS.ACCEPTED],
                detail=f"destination {self.migration.dest_host} claimed")
        except exception.InvalidStatusTransition:
            # Cancelled meanwhile: drop the claim, if one was taken (an
            # old destination has neither a claim nor the drop method).
            if _may_hold_claim(migrate_data):
                self.worker.compute_api.drop_move_claim_at_destination(
                    self.ctxt, self.instance, self.migration)
            raise
        self._start(migrate_data)

    def _start(self, migrate_data):
        # The policy chosen when the request was recorded; a source too
        # old to read it (release 1, LiveMigrateData 1.0) is sent none
        # and chooses.
        if self.policy:
            migrate_data.convergence_policy = self.policy
        self.worker.compute_api.live_migration(
            self.ctxt, self.instance, self.migration, migrate_data)

    # Placement reclaim (tasks.placement_reclaim): reclaiming on a
    # destination that refused the guest only for memory on one node,
    # and, for a scheduled migration no candidate took, on the hosts the
    # scheduler refused for that reason; recording what was taken from
    # whom, and giving it back when the migration does not go ahead.

    def _reclaims_scheduled(self):
        """Whether a scheduled migration may reclaim memory on a host
        the scheduler refused ([virtio_mem] placement_reclaim)."""
        return (self.request is not None and
                not self.migration.requested_host and
                placement_reclaim.enabled(self.worker))

    def _reclaim_options(self, exclude):
        """The hosts a reclaim may open (placement_reclaim.Options), read
        once per migration; ``exclude``: hosts tried or busy."""
        if self.reclaim_options is None:
            busy = self._hosts_read('busy')
            busy = self._busy_destinations() if busy is None else busy
            maintenance = self._hosts_read('maintenance')
            disabled = drain.disabled_hosts(self.worker) \
                if maintenance is None \
                else drain.disabled_reasons(maintenance)
            self.reclaim_options = placement_reclaim.scheduled_options(
                self.worker, self.request, self.migration.source_host,
                self.instance.uuid, exclude=set(busy) | set(exclude),
                disabled=disabled, pagesize_kb=self.pagesize_kb)
        return self.reclaim_options

    def _no_valid_host(self, reason=None):
        """NoValidHost with the scheduler's reasons (or ``reason``) and
        what placement reclaim considered."""
        if reason is None:
            reason = self.selection.reason()
        if self.reclaim_options is not None:
            reason += "; " + self.reclaim_options.note
        return exception.NoValidHost(reason=reason)

    def _try_with_reclaim(self, host, choice=None):
        """_try_destination; where ``[virtio_mem] placement_reclaim``
        allows, a destination refusing the guest only for memory on one
        node is asked once more after the guests there gave it back
        (tasks.placement_reclaim). With ``choice`` (a host the
        scheduler refused, scheduled_options) the reclaim comes first."""
        entry = [None, []]

        def record(entries):
            entry[1] = entries
            if entry not in self.reclaims:
                self.reclaims.append(entry)
            self._record_reclaims()

        answer, room = placement_reclaim.PlacementReclaimTask(
            self.ctxt, self.worker, host,
            lambda: self._try_destination(host), self.instance.uuid,
            self.migration.uuid, record).execute(
                choice, self.request, pagesize_kb=self.pagesize_kb)
        entry[0] = room
        return answer

    def _record_reclaims(self):
        migration_satellites.set_reclaim(
            self.worker.db, self.migration.uuid,
            [e for _room, entries in self.reclaims for e in entries])

    def _give_back_reclaims(self):
        """Give back what the guests of a kept reclaim gave (the claim
        it made room for was dropped), and record it."""
        kept = [entry for entry in self.reclaims if entry[0] is not None]
        for entry in kept:
            room, entry[0] = entry[0], None
            back = placement_reclaim.give_back(self.worker, self.ctxt, room,
                                               self.migration.uuid)
            entry[1] = placement_reclaim.entries(room, back)
        if kept:
            self._record_reclaims()


def _may_hold_claim(migrate_data):
    """Whether the destination that answered with ``migrate_data`` may
    hold a claim in memory: it sent one, or it offered NUMA-aware live
    migration to a source that cannot take part, where its migration
    guard claims on its own (migration_dest._source_cannot_take_part).
    Either way it is of a release that serves the drop."""
    return migrate_data.get('dst_numa_info') is not None or \
        migrate_data.get('dst_supports_numa_live_migration', False)


def prediction_of(worker, ctxt, instance, policy):
    """The source's convergence prediction (a dict, see
    ComputeDriver.predict_convergence); ``sampled`` False with the
    reason where the source could not be asked (older than compute API
    1.6, or no answer in time)."""
    try:
        return worker.compute_api.predict_convergence(
            ctxt, instance, policy=policy,
            timeout=worker.settings.check_timeout)
    except messaging.UnsupportedVersion:
        reason = "the source is older than compute API 1.6"
    except messaging.MessagingTimeout:
        reason = f"the source did not answer within " \
                 f"{worker.settings.check_timeout} s"
    LOG.info("No convergence prediction for %s: %s", instance.uuid, reason)
    return {'prediction': predict.UNKNOWN, 'reason': reason,
            'sampled': False}


def _reason_of(exc, timeout):
    if isinstance(exc, messaging.MessagingTimeout) and \
            not isinstance(exc, exception.AgentDidNotAnswer):
        return f"did not answer within {timeout} s"
    return exception.brief(exc)
