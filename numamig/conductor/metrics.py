"""The conductor's metrics: migrations, the admission queue, hosts' cells.

Built at each scrape from the database (numamig.db.metrics's aggregates
and the hosts' last reports), never from counters kept in memory: every
worker of a conductor answers the same, and a restart loses nothing. A
counter here is a count of records kept (the migrations ended, by
outcome), so it only drops if records are purged, which Prometheus
treats as a counter reset.

Labels stay bounded: status, policy and outcome are enums; host and
cell grow with the cloud, not with its history; only the gauges of the
migrations being copied carry a migration's uuid, and those are at most
``[conductor] max_concurrent_migrations`` series.
"""

from oslo_utils import timeutils
from prometheus_client import core
from prometheus_client import utils as prometheus_utils

from numamig import metrics
from numamig.audit import claims as audit_claims
from numamig.db import compute_nodes
from numamig.db import live_migratable
from numamig.db import metrics as db_metrics
from numamig.objects import fields_enums

STATUS = fields_enums.MigrationStatus
# Histogram bounds (seconds) of a migration's duration and downtime.
DURATION_BOUNDS_S = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
DOWNTIME_BOUNDS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class MigrationCollector(metrics.Collector):
    """Migrations by status and outcome, their timings, those in flight
    and the admission queue."""

    name = 'migrations'

    def __init__(self, db, clock=None):
        self.db = db
        self.clock = clock or _utcnow

    def families(self):
        yield from self._by_status()
        yield self._histogram(
            'numamig_migration_duration_seconds',
            "Completed migrations' time from the source's start to "
            "completed.", 'elapsed_ms', DURATION_BOUNDS_S)
        yield self._histogram(
            'numamig_migration_downtime_seconds',
            "Completed migrations' downtime (the guest paused), as the "
            "hypervisor measured it.", 'downtime_ms', DOWNTIME_BOUNDS_S)
        yield from self._in_flight()
        yield from self._queue()

    def _by_status(self):
        ended = core.CounterMetricFamily(
            'numamig_migrations_ended',
            'Migrations ended, by outcome (completed, failed, error, '
            'cancelled) and convergence policy, as records kept.',
            labels=['outcome', 'policy'])
        going = core.GaugeMetricFamily(
            'numamig_migrations_in_progress',
            'Migrations not ended yet, by status and convergence policy.',
            labels=['status', 'policy'])
        seen = set()
        for status, policy, count in db_metrics.migration_counts(self.db):
            family = ended if status in STATUS.FINAL else going
            family.add_metric([status, policy], count)
            seen.add(status)
        # Every status present, so that a rate or an alert has a series
        # before the first migration reaches it.
        for status in STATUS.ALL:
            if status not in seen:
                family = ended if status in STATUS.FINAL else going
                family.add_metric([status, ''], 0)
        yield ended
        yield going

    def _histogram(self, name, documentation, column, bounds_s):
        found = db_metrics.timing_buckets(
            self.db, column, [round(b * 1000) for b in bounds_s])
        buckets = [(_bound(b), n) for b, n in
                   zip(bounds_s, found.cumulative, strict=True)]
        buckets.append(('+Inf', found.count))
        return core.HistogramMetricFamily(
            name, documentation, buckets=buckets,
            sum_value=found.total_ms / 1000)

    def _in_flight(self):
        labels = ['migration', 'source_host', 'dest_host']
        families = {
            'processed': core.GaugeMetricFamily(
                'numamig_migration_memory_processed_bytes',
                'Memory a migration being copied has sent so far.',
                labels=labels),
            'remaining': core.GaugeMetricFamily(
                'numamig_migration_memory_remaining_bytes',
                'Memory a migration being copied has still to send.',
                labels=labels),
            'total': core.GaugeMetricFamily(
                'numamig_migration_memory_total_bytes',
                "A migration's guest memory to send.", labels=labels),
            'dirty': core.GaugeMetricFamily(
                'numamig_migration_dirty_rate_bytes_per_second',
                "The guest's dirty rate sampled before the copy (0: not "
                "sampled).", labels=labels),
        }
        for row in db_metrics.in_flight(self.db):
            values = [row.uuid, row.source_host, row.dest_host]
            families['processed'].add_metric(values, row.memory_processed)
            families['remaining'].add_metric(values, row.memory_remaining)
            families['total'].add_metric(values, row.memory_total)
            families['dirty'].add_metric(values, row.dirty_rate)
        yield from families.values()

    def _queue(self):
        waiting, oldest_s = db_metrics.queue(self.db, self.clock())
        yield core.GaugeMetricFamily(
            'numamig_admission_queue_migrations',
            'Migrations accepted and waiting for admission.', value=waiting)
        yield core.GaugeMetricFamily(
            'numamig_admission_queue_oldest_wait_seconds',
            'How long the oldest migration waiting for admission has waited '
            '(0: none waits).', value=oldest_s or 0)


class HostCollector(metrics.Collector):
    """Each host's last report: its age, maintenance, and per host cell
    the pCPUs and huge pages pinned and free."""

    name = 'hosts'

    def __init__(self, db, clock=None):
        self.db = db
        self.clock = clock or _utcnow

    def families(self):
        age = core.GaugeMetricFamily(
            'numamig_host_report_age_seconds',
            "Seconds since the host's last report reached the conductor.",
            labels=['host'])
        disabled = core.GaugeMetricFamily(
            'numamig_host_disabled',
            'Whether the host is disabled (host disable, a drain): 1, or 0.',
            labels=['host'])
        pcpus = core.GaugeMetricFamily(
            'numamig_host_cell_pcpus',
            "A host cell's pCPUs: dedicated ones pinned or free, and "
            "shared ones.", labels=['host', 'cell', 'state'])
        pages = core.GaugeMetricFamily(
            'numamig_host_cell_pages',
            "A host cell's pages of one size: used by guests, free for "
            "them, and reserved for the host.",
            labels=['host', 'cell', 'page_size_bytes', 'state'])
        memory = core.GaugeMetricFamily(
            'numamig_host_cell_memory_bytes',
            "A host cell's memory: in all, and used by guests.",
            labels=['host', 'cell', 'state'])
        now = self.clock()
        down = compute_nodes.maintenance(self.db)
        for report in compute_nodes.get_all(self.db):
            host = report.host
            age.add_metric([host], max(
                0.0, (now - report.reported_at).total_seconds()))
            disabled.add_metric([host], 1 if host in down else 0)
            for cell in report.topology.cells:
                key = [host, str(cell.id)]
                cell_pcpus, cell_pages = metrics.cell_counts(cell)
                for state, count in cell_pcpus.items():
                    pcpus.add_metric(key + [state], count)
                memory.add_metric(key + ['total'], cell.memory_mb * 2**20)
                memory.add_metric(key + ['used'],
                                  cell.memory_usage_mb * 2**20)
                for size, states in cell_pages:
                    for state, count in states.items():
                        pages.add_metric(key + [str(size), state], count)
        yield from (age, disabled, pcpus, pages, memory)


class LiveMigratableCollector(metrics.Collector):
    """The guests by standing live-migratable answer and reason
    (doc/source/live-migratable.rst): an alert on ``status="no"`` finds
    a guest that cannot move before a drain needs it to."""

    name = 'live-migratable'

    def __init__(self, db):
        self.db = db

    def families(self):
        guests = core.GaugeMetricFamily(
            'numamig_instances_live_migratable',
            "Guests by whether they could be live-migrated now (yes, "
            "degraded, no) and the reason (no-host-fits, cpu-model, "
            "only-maintenance, devices, policy, guard; empty for yes), "
            "as the conductors last found.", labels=['status', 'reason'])
        for (status, reason), count in sorted(
                live_migratable.counts(self.db).items()):
            guests.add_metric([status, reason], count)
        yield guests


class DrainCollector(metrics.Collector):
    """The moves of the drains and defragmentations in progress."""

    name = 'drains'

    def __init__(self, db):
        self.db = db

    def families(self):
        moves = core.GaugeMetricFamily(
            'numamig_drain_moves',
            'Moves of the drains and defragmentations in progress, by '
            'state (pending, migrating, completed, failed, cancelled).',
            labels=['host', 'kind', 'state'])
        for host, kind, state, count in db_metrics.drain_moves(self.db):
            moves.add_metric([host, kind, state], count)
        yield moves


class ClaimAuditCollector(metrics.Collector):
    """Move claims that outlived their migration (numamig.audit.claims):
    pCPUs and pages a destination keeps for a guest that will not come,
    until ``numamig-manage heal claims`` releases them."""

    name = 'claim-audit'

    def __init__(self, db):
        self.db = db

    def families(self):
        leaked = core.GaugeMetricFamily(
            'numamig_leaked_claims',
            'Move claims held by migrations no longer in progress, by the '
            'host they hold pCPUs and pages on (numamig-manage heal claims '
            'releases them).', labels=['host'])
        counts = {}
        for finding in audit_claims.leaked(self.db):
            counts[finding.host] = counts.get(finding.host, 0) + 1
        for host, count in sorted(counts.items()):
            leaked.add_metric([host], count)
        yield leaked


class CallCollector(metrics.Collector):
    """How long the conductor's RPC calls to agents took, by method and
    outcome, every worker's added up (numamig.metrics.SharedCallTimes).

    :param calls: the conductor's SharedCallTimes.
    """

    name = 'rpc-calls'

    def __init__(self, calls):
        self.calls = calls

    def families(self):
        yield self.calls.times.family(
            'numamig_conductor_rpc_call_duration_seconds',
            "The conductor's RPC calls to compute agents by method and "
            "outcome (answered, timeout, error), every worker's since the "
            "conductor started.", series=self.calls.series())


def collectors(db, calls=None):
    """Every collector of a conductor on ``db`` (and its workers' shared
    RPC call history ``calls``, if kept)."""
    found = [MigrationCollector(db), HostCollector(db), DrainCollector(db),
             ClaimAuditCollector(db), LiveMigratableCollector(db)]
    if calls is not None:
        found.append(CallCollector(calls))
    return found


def _utcnow():
    return timeutils.utcnow(with_timezone=True)


def _bound(seconds):
    """A bucket's ``le`` label as Prometheus' own clients write it."""
    return prometheus_utils.floatToGoString(seconds)
