"""Compute node records: each host's last report (topology with usage).

A compute agent reports periodically through the conductor; the last
report per host is kept whole (as its versioned primitive) with its
scalars in columns for liveness and version queries. Public API::

    save_report(db, report) -> ComputeNodeReport
    save_report_reading_guests(db, report) -> SavedReport
    save_reports_reading_guests(db, reports) -> [SavedReport]: several
        hosts' reports in one transaction
    changed_since(db, number, newer_than=None) -> ([report], number)
    changed_since_in(session, number, newer_than=None): the same inside a
        caller's transaction
    changes_since_in(session, number, newer_than=None) -> ([Change],
        number): the same, each report built only when asked
    content_digest(text) -> str: what a stored report says, its time aside
    get(db, host) -> ComputeNodeReport
    get_all(db, reported_since=None) -> [ComputeNodeReport]
    delete(db, host) -> bool
    set_disabled(db, host, reason) / set_enabled(db, host) -> Maintenance
    maintenance(db) -> {host: Maintenance} of the disabled hosts
    maintenance_in(session): the same inside a caller's transaction
"""

import hashlib
import json
import re
import typing

from oslo_db import exception as db_exc
import sqlalchemy as sa

from numamig import exception
from numamig import objects
from numamig.db import _rows
from numamig.db import instances
from numamig.db import models
from numamig.db import primitives

REPORTS = 'compute-node-reports'
_T = models.ComputeNode.__table__


def save_report(db, report):
    """Record ``report`` as its host's last one (insert or replace).

    A report older than the stored one is ignored. The write takes the
    next number of the 'compute-node-reports' sequence in the same
    transaction (see ``changed_since``).

    :returns: ``report`` itself when stored (nothing is read back), the
        stored newer report when it was ignored.
    :raises ObjectValidationError: if the report is invalid; the stored
        one is kept then.
    """
    return _save(db, report, read_guests=False)[0]


class SavedReport(typing.NamedTuple):
    """What ``save_report_reading_guests`` answers."""

    report: object          # what save_report returns
    guests: list            # [(project id, instance uuid)], record order
    change_seq: int         # its change number; None when not stored
    digest: str = None      # content_digest of what was stored, or None


# What differs between two reports of a host that say the same: the time
# it was made, and the order of the changed-field lists (a set's order,
# which differs between processes).
_VOLATILE = re.compile(r'"reported_at": "[^"]*"|'
                       r'"numamig_object\.changes": \[[^\]]*\]')


# The locality watch's view (ComputeNodeReport.locality): new at every
# look, and nothing placement reads.
_LOCALITY = re.compile(r'"locality":\s*')
_JSON = json.JSONDecoder()


def content_digest(text):
    """A digest of a stored report's JSON text, its time, changed-field
    lists and locality watch view left out: two reports with the same
    digest say the same about their host as placement reads it
    (numamig.scheduler.host_state.HostStateCache.refresh)."""
    return hashlib.blake2b(_VOLATILE.sub('', _without_locality(text))
                           .encode(), digest_size=16).hexdigest()


def _without_locality(text):
    """``text`` without the locality entry's value: only that value is
    decoded (to find its end), never the whole report."""
    match = _LOCALITY.search(text)
    if match is None:
        return text
    try:
        _value, end = _JSON.raw_decode(text, match.end())
    except ValueError:
        return text
    return text[:match.start()] + text[end:]


def save_report_reading_guests(db, report):
    """``save_report``, and in the same transaction the guests the
    records place on the report's host and the change number the report
    was stored with: what the conductor hands its scheduler cache with
    each report, in one transaction, not two.

    :returns: SavedReport.
    """
    return SavedReport(*_save(db, report, read_guests=True))


def save_reports_reading_guests(db, reports):
    """``save_report_reading_guests`` for several hosts' reports (one
    each) in one transaction: one commit, one bump of the change number
    (the reports take consecutive numbers, in the order given) and one
    read of their guests.

    :returns: a SavedReport per report, in order.
    :raises ObjectValidationError: one of them is invalid; none is
        stored (callers check each with ``primitives.dump`` first).
    :raises ValueError: two reports of one host.
    """
    hosts = [report.host for report in reports]
    if len(set(hosts)) != len(hosts):
        raise ValueError("one report per host in a batch")
    if not reports:
        return []
    now = _rows.utcnow()
    values = [_values(report, now) for report in reports]
    try:
        numbers, guests = _store_batch(db, values)
    except db_exc.DBDuplicateEntry:
        # A host's first report raced with another; it exists now.
        numbers, guests = _store_batch(db, values)
    # The text stored is models.JSONText's dump of the primitive.
    return [SavedReport(report, guests[report.host], number,
                        content_digest(json.dumps(value['report'])))
            if number is not None else
            SavedReport(get(db, report.host), guests[report.host], None)
            for report, number, value in zip(reports, numbers, values,
                                             strict=True)]


def _store_batch(db, values):
    with db.writer() as session:
        last = _next_number(session, len(values))
        first = last - len(values) + 1
        numbers = [_store_in(session, one, first + index)
                   for index, one in enumerate(values)]
        guests = instances.guest_pairs_in(session,
                                          [one['host'] for one in values])
    return numbers, guests


def _values(report, now):
    return {
        'host': report.host, 'hypervisor_uri': report.hypervisor_uri,
        'hypervisor_type': report.hypervisor_type,
        'service_version': report.service_version,
        'fingerprint': report.fingerprint, 'reported_at': report.reported_at,
        'report': primitives.dump(report), 'updated_at': now}


def _save(db, report, read_guests):
    values = _values(report, _rows.utcnow())
    try:
        change_seq, guests = _store(db, values, read_guests)
    except db_exc.DBDuplicateEntry:
        # The host's first report raced with another; it exists now.
        change_seq, guests = _store(db, values, read_guests)
    return (report if change_seq is not None else get(db, report.host)), \
        guests, change_seq


def _store(db, values, read_guests):
    """Insert or replace in one transaction: (the change number it was
    stored with, None if the stored report is newer and nothing was
    written; the host's guests if asked)."""
    with db.writer() as session:
        stored = _store_in(session, values, _next_number(session))
        guests = instances.guest_pairs_in(session, [values['host']])[
            values['host']] if read_guests else None
        return stored, guests


def _store_in(session, values, change_seq):
    values = dict(values, change_seq=change_seq)
    result = _rows.run(session, _replace_report(), dict(
        values, b_host=values['host'], b_reported_at=values['reported_at']))
    if result.rowcount == 1:
        return values['change_seq']
    exists = _rows.run(session, _host_id(), {'host': values['host']}) \
        .first() is not None
    if exists:
        return None
    _rows.run(session, sa.insert(_T), dict(
        values, created_at=values['updated_at']))
    return values['change_seq']


@_rows.prebuilt
def _replace_report():
    # SET takes the columns of the parameters; WHERE binds its own names.
    return sa.update(_T).where(
        _T.c.host == sa.bindparam('b_host'),
        # A report delayed in transit must not hide a newer one.
        _T.c.reported_at <= sa.bindparam('b_reported_at'))


@_rows.prebuilt
def _host_id():
    return sa.select(_T.c.id).where(_T.c.host == sa.bindparam('host'))


@_rows.prebuilt
def _bump_number():
    sequences = models.Sequence.__table__
    return sa.update(sequences).where(sequences.c.name == REPORTS).values(
        value=sequences.c.value + sa.bindparam('count'))


@_rows.prebuilt
def _bump_number_returning():
    return _bump_number().returning(models.Sequence.__table__.c.value)


@_rows.prebuilt
def _read_number():
    sequences = models.Sequence.__table__
    return sa.select(sequences.c.value).where(sequences.c.name == REPORTS)


def _next_number(session, count=1):
    """Take ``count`` change numbers; return the last (they are the
    ``count`` numbers up to it). The sequence's row stays locked until
    the transaction ends: numbers are handed out in commit order."""
    params = {'count': count}
    if session.get_bind().dialect.update_returning:
        # One statement where the database can say what it wrote
        # (PostgreSQL, SQLite); MariaDB cannot, and reads it back.
        return _rows.run(session, _bump_number_returning(), params).scalar()
    _rows.run(session, _bump_number(), params)
    return _rows.run(session, _read_number()).scalar()


def changed_since(db, number, newer_than=None):
    """The reports written after change ``number``, and the highest one.

    Cost follows the reports written since, never the number of hosts.
    Numbers are handed out in commit order, so no report numbered at or
    below the returned highest one can appear later.

    :param newer_than: callable(host, reported_at, change_seq) -> bool; a
        report is
        read and deserialized only when it says True (a worker skips the
        reports its cache already holds).
    :returns: ([ComputeNodeReport], highest number seen).
    """
    with db.reader() as session:
        return changed_since_in(session, number, newer_than)


def changed_since_in(session, number, newer_than=None):
    """``changed_since`` inside the caller's transaction."""
    changes, highest = changes_since_in(session, number, newer_than)
    return [change.load() for change in changes], highest


class Change(typing.NamedTuple):
    """A report written since a change number, not built yet."""

    host: str
    reported_at: object     # the column's exact time
    digest: str             # content_digest of its text
    text: str               # the stored JSON

    def primitive(self):
        """The stored primitive, decoded (nothing built or checked)."""
        return json.loads(self.text)

    def load(self):
        """The ComputeNodeReport, built and validated.

        :raises StoredRecordInvalid: naming the row.
        """
        return _report_from(self.host, self.reported_at, self.primitive())


def changes_since_in(session, number, newer_than=None):
    """``changed_since_in``, each report's JSON read but not built: a
    caller whose copy says the same (the same ``digest``) builds
    nothing."""
    heads = _rows.run(session, _heads_since(), {'number': number}).all()
    highest = max((h.change_seq for h in heads), default=number)
    wanted = [h.id for h in heads
              if newer_than is None or
              newer_than(h.host, h.reported_at, h.change_seq)]
    if not wanted:
        return [], highest
    rows = session.execute(sa.select(
        _T.c.host, _T.c.reported_at,
        # The text as stored, not JSONText's parse of it.
        sa.type_coerce(_T.c.report, sa.Text).label('text')).where(
            _T.c.id.in_(wanted)).order_by(_T.c.host))
    return [Change(row.host, row.reported_at, content_digest(row.text),
                   row.text) for row in rows], highest


def get(db, host):
    """:raises HostNotFound: if the host never reported."""
    with db.reader() as session:
        row = session.scalars(sa.select(models.ComputeNode).where(
            models.ComputeNode.host == host)).one_or_none()
        if row is None:
            raise exception.HostNotFound(host=host)
        return _to_object(row)


def get_all(db, reported_since=None):
    """Every host's last report, by host name.

    :param reported_since: an aware datetime; only hosts that reported at
        or after it (those considered up) are returned.
    """
    query = sa.select(models.ComputeNode).order_by(models.ComputeNode.host)
    if reported_since is not None:
        query = query.where(models.ComputeNode.reported_at >= reported_since)
    with db.reader() as session:
        return [_to_object(row) for row in session.scalars(query)]


def delete(db, host):
    """Forget a host; True if it was known."""
    with db.writer() as session:
        result = session.execute(sa.delete(models.ComputeNode).where(
            models.ComputeNode.host == host))
        return result.rowcount == 1


class Maintenance(typing.NamedTuple):
    """A host's maintenance state: disabled since when and why (both
    None while it is enabled)."""

    host: str
    disabled_at: object = None
    reason: str = None

    @property
    def disabled(self):
        return self.disabled_at is not None


def set_disabled(db, host, reason):
    """Disable ``host`` with ``reason``; the scheduler chooses it no more.

    Idempotent: disabling a disabled host keeps when it was disabled
    and records the new reason.

    :returns: the host's Maintenance.
    :raises HostNotFound: if the host never reported.
    """
    now = _rows.utcnow()
    with db.writer() as session:
        row = _maintenance_row(session, host)
        session.execute(sa.update(models.ComputeNode).where(
            models.ComputeNode.host == host).values(
                disabled_at=row.disabled_at or now, disabled_reason=reason))
        found = Maintenance(host, row.disabled_at or now, reason)
        if row.disabled_at is None or row.disabled_reason != reason:
            _rows.note_change(session, _rows.HOST, found)
    return found


def set_enabled(db, host):
    """Enable ``host`` again; idempotent.

    :returns: the host's Maintenance (enabled).
    :raises HostNotFound: if the host never reported.
    """
    with db.writer() as session:
        row = _maintenance_row(session, host)
        session.execute(sa.update(models.ComputeNode).where(
            models.ComputeNode.host == host).values(
                disabled_at=None, disabled_reason=None))
        if row.disabled_at is not None:
            _rows.note_change(session, _rows.HOST, Maintenance(host))
    return Maintenance(host)


def maintenance(db):
    """{host: Maintenance} of every disabled host (few: one query of
    an unindexed column costs the hosts' count of rows, not reports)."""
    with db.reader() as session:
        return maintenance_in(session)


def maintenance_in(session):
    """``maintenance`` inside the caller's transaction."""
    return {row.host: Maintenance(row.host, row.disabled_at,
                                  row.disabled_reason)
            for row in _rows.run(session, _disabled_hosts())}


@_rows.prebuilt
def _disabled_hosts():
    table = models.ComputeNode.__table__
    return sa.select(table.c.host, table.c.disabled_at,
                     table.c.disabled_reason).where(
        table.c.disabled_at.is_not(None))


@_rows.prebuilt
def _heads_since():
    table = models.ComputeNode.__table__
    return sa.select(table.c.id, table.c.host, table.c.reported_at,
                     table.c.change_seq).where(
        table.c.change_seq > sa.bindparam('number'))


def _maintenance_row(session, host):
    row = session.execute(sa.select(
        models.ComputeNode.disabled_at,
        models.ComputeNode.disabled_reason).where(
            models.ComputeNode.host == host).with_for_update()).one_or_none()
    if row is None:
        raise exception.HostNotFound(host=host)
    return row


def _to_object(row):
    return _report_from(row.host, row.reported_at, row.report)


def _report_from(host, reported_at, primitive):
    report = primitives.load(primitive, objects.ComputeNodeReport,
                             'compute_nodes', host, 'report')
    # A DateTimeField primitive has whole seconds; the column is exact.
    report.reported_at = reported_at
    report.obj_reset_changes(['reported_at'])
    return report
