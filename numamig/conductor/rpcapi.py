"""Client side of the conductor's operations API: what operators call.

Operators and tools (numamig-manage, the embedded deployment, the CI
harness) start, follow and stop migrations, drain and defragment hosts,
change guests' memory and read the records through these calls. The
agents' calls are another API (numamig.conductor.records_rpcapi), so an
operator's feature never changes what a rolling upgrade of the agents
depends on; the version histories are numamig.conductor.api_versions's.

A conductor of release 2 serves this API in namespace ``operations`` on
the conductor topic; one of release 1 is sent release 1's calls on its
one API (1.0-1.1), without what release 2 added, and refuses here (one
Invalid line, nothing sent) what it cannot take. The first call asks
the conductor its service version (numamig.conductor.rpcclient): an
operator's read costs that ping and the read, whatever the release.
"""

import oslo_messaging as messaging
from oslo_utils import uuidutils

from numamig import exception
from numamig.conductor import api_versions
from numamig.conductor import records_rpcapi
from numamig.conductor import rpcclient
from numamig.conductor.api_versions import HELD_BACK  # noqa: F401
from numamig.conductor.api_versions import OBJECT_VERSIONS  # noqa: F401
from numamig.conductor.api_versions import RELEASE_1
from numamig.conductor.api_versions import RELEASE_2  # noqa: F401
from numamig.conductor.api_versions import VERSION_ALIASES  # noqa: F401

TOPIC = 'numamig-conductor'
# The agents' topic (numamig.conductor.records_rpcapi), named here too
# for the services that build both clients.
AGENT_TOPIC = records_rpcapi.AGENT_TOPIC
CALL_MARGIN_S = rpcclient.CALL_MARGIN_S

OPERATIONS = api_versions.OPERATIONS


class ConductorAPI:
    """Client side of the conductor's operations API (an operator's).

    Every call goes at the newest version the conductor serves, so that
    answers carry what the operator reads; what a conductor of release 1
    cannot take is refused here, naming what caps it.
    """

    VERSION = OPERATIONS.version

    def __init__(self, transport, version_cap=None, timeout=None,
                 topic=TOPIC, exchange=None, release_objects=None,
                 conductor_version=None):
        """See rpcclient.ConductorLink for the parameters."""
        self.link = rpcclient.ConductorLink(
            transport, version_cap=version_cap, timeout=timeout,
            topic=topic, exchange=exchange,
            release_objects=release_objects,
            conductor_version=conductor_version)
        self.timeout = timeout

    @classmethod
    def from_conf(cls, conf, transport, **kwargs):
        """A client capped by ``[upgrade_levels] conductor``."""
        return cls(transport, version_cap=conf.upgrade_levels.conductor,
                   **kwargs)

    @property
    def conductor_version(self):
        return self.link.conductor_version

    def _call(self, ctxt, method, timeout=None, version='1.0',
              newer_kwargs=None, **kwargs):
        return self.link.call(OPERATIONS, ctxt, method, timeout=timeout,
                              version=version, newer_kwargs=newer_kwargs,
                              **kwargs)

    def _since(self, ctxt, method, what, timeout=None, **kwargs):
        """Call ``method``, which release 2 added; Invalid, naming
        ``what`` needs it, when the cap or the conductor is older."""
        return self.link.call_since(OPERATIONS, ctxt, method, what,
                                    timeout=timeout, **kwargs)

    def _operation(self, ctxt, method, timeout=None, **kwargs):
        """Call an operation of release 1's 1.1, refusing clearly when
        capped below."""
        if not self.can_operate():
            raise exception.Invalid(
                reason=f"{method} needs conductor API {RELEASE_1}, but "
                       f"{self.link.what_caps(self.link.route(OPERATIONS))}")
        return self._call(ctxt, method, timeout=timeout, version=RELEASE_1,
                          **kwargs)

    def can_operate(self):
        """Whether the operations of release 1's 1.1 may be sent."""
        return self.link.route(OPERATIONS).allows(RELEASE_1)

    def ping(self, ctxt, timeout):
        """Whether a conductor serves this client's topic, within
        ``timeout`` seconds (a command asks before its action); routes
        the calls by the service version it answers.

        :raises MessagingTimeout: none answered.
        """
        self.link.ask_version(ctxt, timeout)

    def wait_until_ready(self, ctxt, attempt_timeout=5, max_attempts=None):
        """Block until a conductor answers (see
        rpcclient.ConductorLink.wait_until_ready).

        :raises MessagingTimeout: after ``max_attempts`` unanswered tries.
        """
        self.link.wait_until_ready(ctxt, attempt_timeout, max_attempts)

    # -- migrations -----------------------------------------------------------

    def live_migrate_instance(self, ctxt, instance_uuid, dest_host=None,
                              timeout=None, priority=None,
                              migration_uuid=None, policy=None):
        """Request a live migration.

        A conductor of release 2 checks and records the request in its
        admission queue and answers at once (status accepted, with the
        queue position); its migration threads choose the destination
        and start it. An older conductor answers once the source has
        been told to migrate (status queued).

        :param priority: 0-100, higher first (see
            numamig.objects.migration.PRIORITIES); an older conductor is
            not sent it.
        :param migration_uuid: the uuid to record the migration under
            (default: a new one). A conductor of release 2 answers a
            request whose migration it recorded already with that
            migration, so the same request delivered (or sent) again
            never records a second; an older conductor is not sent it
            and makes up its own.
        :param policy: the convergence policy to run it under (a name
            of numamig.convergence.policy or ``[libvirt]
            live_migration_policies``); a conductor of release 2 refuses
            an unknown one (UnknownMigrationPolicy). An older conductor
            cannot take it: the request is then refused here, not sent
            without it (the migration would run under another policy).
        :returns: the Migration.
        :raises InstanceBusy: a migration of the instance is in progress.
        :raises MigrationQueueFull: too many migrations wait already.
        :raises NoValidHost: (older conductors only) no destination
            could take the guest.
        """
        newer = {'migration_uuid': migration_uuid or
                 uuidutils.generate_uuid()}
        if priority is not None:
            newer['priority'] = priority
        if policy is not None:
            newer['policy'] = policy
            route = self.link.route(OPERATIONS)
            if not route.namespaced:
                raise exception.Invalid(
                    reason=f"a convergence policy needs conductor API "
                           f"{OPERATIONS.version}, but "
                           f"{self.link.what_caps(route)}; nothing was "
                           f"recorded")
        return self._call(ctxt, 'live_migrate_instance', timeout=timeout,
                          instance_uuid=instance_uuid, dest_host=dest_host,
                          newer_kwargs=newer)

    def live_migration_dry_run(self, ctxt, instance_uuid, dest_host=None,
                               policy=None):
        """Where the guest would go and how pinned; claims nothing.

        :param policy: the convergence policy the migration would be
            requested under: refused when unknown, as the request would
            be, and the prediction made under it. An older conductor
            cannot take it: refused here (Invalid) rather than answered
            under another policy.
        """
        if policy is not None:
            return self._since(ctxt, 'live_migration_dry_run',
                               "a dry run under a requested policy",
                               instance_uuid=instance_uuid,
                               dest_host=dest_host, policy=policy)
        return self._call(ctxt, 'live_migration_dry_run',
                          instance_uuid=instance_uuid, dest_host=dest_host)

    def migration_abort(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_abort',
                          migration_uuid=migration_uuid)

    def migration_force_complete(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_force_complete',
                          migration_uuid=migration_uuid)

    def migration_resume(self, ctxt, migration_uuid, pauses=None):
        """Ask the source to resume a postcopy-paused migration.

        :param pauses: how many times the caller saw it postcopy-paused
            (the request's identity: a repeat after that pause was
            resumed starts nothing).
        :returns: {'migration': Migration, 'outcome': one of
            numamig.conductor.tasks.resume.OUTCOMES}.
        :raises Invalid: the cap or the conductor is of release 1.
        """
        return self._since(ctxt, 'migration_resume',
                           "resuming a post-copy migration",
                           migration_uuid=migration_uuid, pauses=pauses)

    def migration_get(self, ctxt, migration_uuid):
        return self._call(ctxt, 'migration_get',
                          migration_uuid=migration_uuid)

    def migration_get_all(self, ctxt, instance_uuid=None, status=None,
                          host=None):
        return self._call(ctxt, 'migration_get_all',
                          instance_uuid=instance_uuid, status=status,
                          host=host)

    def migration_get_satellites(self, ctxt, migration_uuid, names):
        """A migration's satellite records (what was reclaimed to place
        it, where its threads ran: numamig.objects.migration_satellites)
        by name: {name: object}.

        :raises Invalid: the cap or the conductor is of release 1, which
            recorded none of them (nothing sent).
        """
        return self._since(ctxt, 'migration_get_satellites',
                           "reading a migration's satellite records",
                           migration_uuid=migration_uuid,
                           names=list(names))

    def migration_wait(self, ctxt, migration, timeout):
        """``migration`` as recorded once its status or progress differs
        from ``migration``'s, or after ``timeout`` seconds; sooner when
        the conductor holds as many waits as it allows (the caller then
        waits on its own before asking again).

        :raises UnsupportedVersion: the conductor (or a cap) is of
            release 1: poll migration_get instead.
        """
        route = self.link.route(OPERATIONS)
        if not route.namespaced:
            raise messaging.UnsupportedVersion(OPERATIONS.version)
        return route.client.prepare(
            version=OPERATIONS.version,
            timeout=timeout + (self.timeout or CALL_MARGIN_S)).call(
            ctxt, 'migration_wait', migration_uuid=migration.uuid,
            status=migration.status,
            memory_processed=migration.memory_processed, timeout=timeout)

    # -- instances ------------------------------------------------------------

    def instance_get(self, ctxt, instance_uuid):
        return self._call(ctxt, 'instance_get', instance_uuid=instance_uuid)

    def instance_get_all(self, ctxt, host=None):
        return self._call(ctxt, 'instance_get_all', host=host)

    def instance_get_claims_on_host(self, ctxt, host):
        """Instances holding a claim on ``host`` (in-progress migrations)."""
        return self._call(ctxt, 'instance_get_claims_on_host', host=host)

    def instance_create(self, ctxt, instance, host=None):
        """Record and build an instance on ``host`` or a scheduled one."""
        return self._call(ctxt, 'instance_create', instance=instance,
                          host=host)

    def instance_adopt(self, ctxt, host):
        """Record the NUMA guests of ``host`` numamig does not know yet."""
        return self._call(ctxt, 'instance_adopt', host=host)

    def instance_delete(self, ctxt, instance_uuid, timeout=None):
        """Destroy an instance's guest and remove its record; idempotent.

        :returns: False if no such instance is recorded (nothing to do).
        :raises InstanceBusy: a migration of it is in progress.
        """
        return self._operation(ctxt, 'instance_delete', timeout=timeout,
                               instance_uuid=instance_uuid)

    def get_domain_xml(self, ctxt, instance_uuid):
        """The live domain XML of an instance, from its host."""
        return self._call(ctxt, 'get_domain_xml',
                          instance_uuid=instance_uuid)

    def instance_memory_set(self, ctxt, change_uuid, instance_uuid, node,
                            size_mb, exact=False, dry_run=False,
                            timeout=None):
        """Set a guest's plugged virtio-mem memory to ``size_mb``, host
        node ``node`` first (only there with ``exact``).

        :returns: the change's record: {'uuid', 'host', 'status',
            'request', 'plan', 'result'}.
        :raises InvalidMemoryChange, InstanceNotFound, HypervisorError.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        return self._since(ctxt, 'instance_memory_set',
                           "changing a guest's memory", timeout=timeout,
                           change_uuid=change_uuid,
                           instance_uuid=instance_uuid, node=node,
                           size_mb=size_mb, exact=exact, dry_run=dry_run)

    def heal_claims(self, ctxt, dry_run=False):
        """Find (and unless ``dry_run`` release) leaked claims.

        :returns: {'found': [...], 'released': [...], 'skipped': [...]},
            each a list of audit Finding dicts.
        """
        return self._operation(ctxt, 'heal_claims', dry_run=dry_run)

    # -- hosts ----------------------------------------------------------------

    def compute_node_get_all(self, ctxt):
        return self._call(ctxt, 'compute_node_get_all')

    def compute_node_delete(self, ctxt, host):
        """Forget a host that no longer runs numamig; idempotent.

        :returns: False if the host was not recorded (nothing to do).
        :raises HostInUse: it still reports, or records still use it.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        return self._since(ctxt, 'compute_node_delete', "deleting a host",
                           host=host)

    def host_domains(self, ctxt, host, timeout=None):
        """Every domain on ``host`` with its live and persistent XML.

        :returns: see ComputeAPI.list_domains.
        """
        return self._operation(ctxt, 'host_domains', timeout=timeout,
                               host=host)

    def host_refresh_usage(self, ctxt, host, timeout=None):
        """Have ``host`` recompute its usage from the records and report.

        :returns: the ComputeNodeReport the host sent.
        :raises Invalid: the conductor (or a cap) is of release 1, or the
            host's agent (or its cap) is (compute API 1.0).
        :raises HostNotFound: ``host`` never reported.
        """
        return self._since(ctxt, 'host_refresh_usage',
                           "recomputing a host's usage", timeout=timeout,
                           host=host)

    def host_reclaim(self, ctxt, change_uuid, host, node, size_mb,
                     exact=False, dry_run=False, timeout=None):
        """Free ``size_mb`` MiB on ``host``'s node ``node`` from its
        guests' virtio-mem devices (elsewhere too without ``exact``).

        :returns: the change's record (as instance_memory_set).
        :raises InvalidMemoryChange, HostNotFound, HypervisorError.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        return self._since(ctxt, 'host_reclaim',
                           "reclaiming memory on a host", timeout=timeout,
                           change_uuid=change_uuid, host=host, node=node,
                           size_mb=size_mb, exact=exact, dry_run=dry_run)

    def host_set_disabled(self, ctxt, host, disabled, reason=None):
        """Disable ``host`` for maintenance with ``reason``, or enable
        it; idempotent.

        :returns: {'host', 'disabled', 'disabled_at', 'reason'}.
        :raises HostNotFound: ``host`` never reported.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        what = "disabling a host" if disabled else "enabling a host"
        return self._since(ctxt, 'host_set_disabled', what, host=host,
                           disabled=disabled, reason=reason)

    # -- drains and defragmentations ------------------------------------------

    def host_drain_plan(self, ctxt, host, to=None, keep_free_nodes=0,
                        timeout=None):
        """Where every guest of ``host`` would go, at once; nothing
        moves.

        :param to: host names the destinations are chosen among, or None.
        :param keep_free_nodes: whole NUMA cells to leave free on each
            destination.
        :returns: the plan (see numamig.conductor.drain.plan).
        :raises HostNotFound: ``host`` or a host of ``to`` never reported.
        :raises Invalid: the conductor (or a cap) is of release 1.
        """
        return self._since(ctxt, 'host_drain_plan', "planning a drain",
                           timeout=timeout, host=host,
                           to=None if to is None else list(to),
                           keep_free_nodes=keep_free_nodes)

    def host_drain_start(self, ctxt, host, parallel, to=None,
                         keep_free_nodes=0, drain_uuid=None, timeout=None):
        """Plan the drain of ``host`` and, if it empties the host,
        disable it and start moving its guests.

        :param drain_uuid: the drain's uuid (chosen here when None): a
            call sent again with it answers with the drain it started.
        :returns: the drain (numamig.conductor.tasks.drain.view).
        :raises DrainRefused: the host cannot be emptied; nothing moved.
        :raises DrainInProgress: the host is being drained already.
        """
        return self._since(ctxt, 'host_drain_start', "draining a host",
                           timeout=timeout, host=host,
                           drain_uuid=drain_uuid or
                           uuidutils.generate_uuid(), parallel=parallel,
                           to=None if to is None else list(to),
                           keep_free_nodes=keep_free_nodes)

    def host_drain_show(self, ctxt, host=None, drain_uuid=None):
        """A drain and its moves: ``drain_uuid``'s or the host's active
        (else last) one.

        :raises DrainNotFound:
        """
        return self._since(ctxt, 'host_drain_show', "showing a drain",
                           host=host, drain_uuid=drain_uuid)

    def host_drain_wait(self, ctxt, drain, timeout):
        """``drain`` once it changed from what ``drain`` shows, or after
        ``timeout`` seconds (sooner when the conductor holds as many
        waits as it allows)."""
        return self._since(ctxt, 'host_drain_wait', "following a drain",
                           timeout=timeout + (self.timeout or CALL_MARGIN_S),
                           drain_uuid=drain['uuid'],
                           signature=drain['signature'], wait_s=timeout)

    def host_drain_abort(self, ctxt, host, abort_running=False):
        """Cancel the pending moves of the host's drain (and abort its
        running migrations with ``abort_running``)."""
        return self._since(ctxt, 'host_drain_abort', "aborting a drain",
                           host=host, abort_running=abort_running)

    def host_defragment_plan(self, ctxt, vcpus, memory_mb, extra_specs,
                             hosts=None, max_moves=3):
        """The fewest migrations that make room for a guest of these
        specs on one host (of ``hosts``, or any); nothing moves.

        :raises InvalidNUMARequest: the specs make no valid request.
        """
        return self._since(ctxt, 'host_defragment_plan',
                           "planning a defragmentation", vcpus=vcpus,
                           memory_mb=memory_mb,
                           extra_specs=dict(extra_specs),
                           hosts=None if hosts is None else list(hosts),
                           max_moves=max_moves)

    def host_defragment_start(self, ctxt, vcpus, memory_mb, extra_specs,
                              parallel, hosts=None, max_moves=3,
                              drain_uuid=None):
        """Plan room for a guest of these specs on one host (of
        ``hosts``, or any) and carry the plan out like a drain: the
        target stays enabled, ``drain show``/``abort`` serve it.

        :param drain_uuid: its uuid (chosen here when None): a call sent
            again with it answers with the defragmentation it started.
        :returns: the defragmentation (numamig.conductor.tasks.drain.view;
            kind ``defragment``).
        :raises DefragmentRefused: no plan within ``max_moves``, or no
            room in the admission queue; nothing moved.
        :raises InvalidNUMARequest, Invalid, HostNotFound: bad input
            (a guest that fits on no host even empty is one).
        """
        return self._since(ctxt, 'host_defragment_start',
                           "carrying out a defragmentation", vcpus=vcpus,
                           memory_mb=memory_mb,
                           extra_specs=dict(extra_specs),
                           drain_uuid=drain_uuid or
                           uuidutils.generate_uuid(), parallel=parallel,
                           hosts=None if hosts is None else list(hosts),
                           max_moves=max_moves)
