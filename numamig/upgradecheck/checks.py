"""The upgrade checks: schema, compute versions, RPC caps, configuration.

Every check takes the parsed configuration and a ``Sources`` (how to
reach the database) and returns a ``Result``; none changes anything.
A check that cannot get its answer (the database is unreachable) fails
and says why, so that an operator is never told "success" by default.
"""

from oslo_upgradecheck import upgradecheck

from numamig import exception
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conf import checks as conf_checks
from numamig.conf import opts as conf_opts
from numamig.objects import service as service_obj

# oslo.upgradecheck's codes and result, so that numamig-status speaks the
# contract deployment tooling parses (``--json``, exit codes 0/1/2/255).
SUCCESS = upgradecheck.Code.SUCCESS
WARNING = upgradecheck.Code.WARNING
FAILURE = upgradecheck.Code.FAILURE
Result = upgradecheck.Result


class Sources:
    """Lazily opened database of a deployment, shared by the checks.

    :param database_factory: callable returning a numamig.db.api.Database
        (called at most once).
    """

    def __init__(self, database_factory):
        self._factory = database_factory
        self._db = None

    @property
    def db(self):
        if self._db is None:
            self._db = self._factory()
        return self._db

    def close(self):
        if self._db is not None:
            self._db.dispose()
            self._db = None


def check_schema(conf, sources):
    """The database schema is at the newest revision this release knows."""
    from numamig.db import revisions
    try:
        current = sources.db.version()
    except exception.DatabaseError as exc:
        return Result(FAILURE, f"cannot read the schema revision: {exc}")
    head = revisions.HEAD
    if current == head:
        return Result(SUCCESS, f"revision {current}")
    if current is None:
        return Result(FAILURE, f"database {sources.db.safe_url} is empty: "
                               f"run 'numamig-manage db sync'")
    development = revisions.development_step(current)
    if development:
        return Result(FAILURE, development)
    if current not in revisions.REVISIONS:
        return Result(FAILURE, f"revision {current} is newer than this "
                               f"release knows (up to {head}): upgrade "
                               f"numamig on this node")
    return Result(FAILURE, f"revision {current} is behind {head}: run "
                           f"'numamig-manage db sync'")


def check_compute_versions(conf, sources):
    """Every compute agent can take part in NUMA-aware live migration.

    A host reporting an older service version makes the conductor refuse
    to live-migrate NUMA guests (or, with the workaround enabled, take
    the old path that copies pins verbatim).
    """
    from numamig.db import compute_nodes
    try:
        sources.db.check_schema()
        reports = compute_nodes.get_all(sources.db)
    except exception.NumamigException as exc:
        return Result(FAILURE, f"cannot read compute host reports: {exc}")
    if not reports:
        return Result(WARNING, "no compute host has reported yet; run this "
                               "check again once the agents are up")
    needed = service_obj.NUMA_LIVE_MIGRATION_VERSION
    old = sorted(f"{r.host} (version {r.service_version})"
                 for r in reports if r.service_version < needed)
    if not old:
        return Result(SUCCESS, f"{len(reports)} compute host(s), all at "
                               f"service version {needed} or newer")
    if conf.workarounds.enable_numa_live_migration:
        return Result(WARNING, _old_hosts_text(old, needed) +
                      "; [workarounds] enable_numa_live_migration is set, "
                      "so NUMA guests take the old path (pins and page "
                      "nodes copied verbatim) until they are upgraded")
    return Result(FAILURE, _old_hosts_text(old, needed) +
                  "; live migration of NUMA guests is refused until they "
                  "are upgraded")


def _old_hosts_text(old, needed):
    return (f"compute hosts older than NUMA-aware live migration (service "
            f"version below {needed}): {', '.join(old)}")


def check_migration_guard(conf, sources):
    """Which compute hosts guard their incoming migrations.

    A host's report says whether its destination-side migration guard
    (``[libvirt] migration_guard``) is on. While some host is older than
    NUMA-aware live migration, a migration from it copies the XML, and
    only a destination whose guard is on places the guest as claimed: a
    new host without it is a warning then, and so is a guard that failed.
    """
    from numamig.db import compute_nodes
    try:
        sources.db.check_schema()
        reports = compute_nodes.get_all(sources.db)
    except exception.NumamigException as exc:
        return Result(FAILURE, f"cannot read compute host reports: {exc}")
    needed = service_obj.NUMA_LIVE_MIGRATION_VERSION
    by_state = {}
    for report in reports:
        if report.service_version >= needed:
            state = report.get('migration_guard') or 'not reported'
            by_state.setdefault(state, []).append(report.host)
    text = '; '.join(f"{state}: {', '.join(sorted(hosts))}"
                     for state, hosts in sorted(by_state.items()))
    if not by_state:
        return Result(SUCCESS, "no compute host of this release has "
                               "reported yet")
    mixed = any(r.service_version < needed for r in reports)
    unguarded = set(by_state) - {'on'}
    if 'failed' in by_state or (mixed and unguarded):
        return Result(WARNING, f"migration guard {text}. "
                      + ("Hosts of an older release copy the XML of the "
                         "guests they send: " if mixed else '')
                      + "enable [libvirt] migration_guard on every "
                        "upgraded host, restart libvirtd after its agent "
                        "started, and see the agents' logs for a failed "
                        "guard")
    return Result(SUCCESS, f"migration guard {text}")


def check_upgrade_levels(conf, sources):
    """No ``[upgrade_levels]`` cap silently disables the new path."""
    problems, warnings = [], []
    cap = conf.upgrade_levels.compute
    if cap is not None:
        known = compute_rpcapi.ComputeAPI.VERSION
        cap = compute_rpcapi.VERSION_ALIASES.get(cap, cap)
        parsed = _version(cap)
        if parsed is None or parsed[0] != _version(known)[0]:
            problems.append(f"[upgrade_levels] compute = {cap!r} is not a "
                            f"version of this API (major "
                            f"{_version(known)[0]}, newest {known})")
    cap = conf.upgrade_levels.conductor
    if cap is not None:
        conductor_api = _conductor_api()
        cap = conductor_api.VERSION_ALIASES.get(cap, cap)
        if not conductor_api.is_version(cap):
            problems.append(
                f"[upgrade_levels] conductor = {cap!r} is not a version of "
                f"the conductor's APIs (one of "
                f"{', '.join(sorted(conductor_api.OBJECT_VERSIONS))}, or "
                f"{' or '.join(sorted(conductor_api.VERSION_ALIASES))})")
    cap = conf.upgrade_levels.compute
    cap = compute_rpcapi.VERSION_ALIASES.get(cap, cap)
    needed = compute_rpcapi.RELEASE_2
    parsed = _version(cap) if cap else None
    if parsed is not None and parsed < _version(needed):
        warnings.append(f"[upgrade_levels] compute = {cap} is below "
                        f"{needed}, the compute RPC version of NUMA-aware "
                        f"live migration: destinations neither claim nor "
                        f"re-pin. Remove the cap once every compute host "
                        f"is upgraded")
    pretend = conf.testing.pretend_service_version
    if pretend is not None and pretend < service_obj.SERVICE_VERSION:
        warnings.append(f"[testing] pretend_service_version = {pretend} "
                        f"runs this node's services as an older release "
                        f"(a testing aid): unset it outside tests")
    if problems:
        return Result(FAILURE, '; '.join(problems + warnings))
    if warnings:
        return Result(WARNING, '; '.join(warnings))
    return Result(SUCCESS, "no cap below NUMA-aware live migration")


def _conductor_api():
    from numamig.conductor import api_versions
    return api_versions


def _version(text):
    try:
        major, minor = (int(part) for part in str(text).split('.'))
    except ValueError:
        return None
    return major, minor


def check_configuration(conf, sources):
    """Options are usable, consistent and not deprecated."""
    try:
        conf_checks.check(conf)
    except exception.InvalidConfiguration as exc:
        return Result(FAILURE, str(exc))
    deprecated = list(_deprecated_in_use(conf))
    if deprecated:
        return Result(WARNING, "deprecated options are set: " +
                      '; '.join(deprecated))
    return Result(SUCCESS, "options consistent, none deprecated in use")


def _deprecated_in_use(conf):
    for group, group_opts in conf_opts.list_opts():
        name = getattr(group, 'name', group)
        for opt in group_opts:
            if not opt.deprecated_for_removal:
                continue
            group_name = None if name == 'DEFAULT' else name
            location = conf.get_location(opt.dest, group_name)
            if location is None or location.location.name == 'opt_default':
                continue
            why = opt.deprecated_reason or 'it will be removed'
            yield f"[{name}] {opt.name}: {why}"


# (title, function) in the order they are shown.
CHECKS = (
    ('Database schema', check_schema),
    ('Compute service versions', check_compute_versions),
    ('Migration guard', check_migration_guard),
    ('RPC version caps', check_upgrade_levels),
    ('Configuration', check_configuration),
)


def run(conf, sources, checks=CHECKS):
    """Run every check; return [(title, Result)] in order.

    A check that raises something unexpected propagates: the console
    script turns it into exit code 255.
    """
    return [(title, check(conf, sources)) for title, check in checks]


def worst(results):
    """The highest result code of ``run``'s answer (0 when empty)."""
    return max((result.code for _title, result in results), default=SUCCESS)

