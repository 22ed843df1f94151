"""Compute node records: each host's last report (topology with usage).

A compute agent reports periodically through the conductor; the last
report per host is kept whole (as its versioned primitive) with its
scalars in columns for liveness and version queries. Public API::

    save_report(db, report) -> ComputeNodeReport
    get(db, host) -> ComputeNodeReport
    get_all(db, reported_since=None) -> [ComputeNodeReport]
    delete(db, host) -> bool
"""

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from numamig import exception
from numamig import objects
from numamig.db import _rows
from numamig.db import models
from numamig.db import primitives


def save_report(db, report):
    """Record ``report`` as its host's last one (insert or replace).

    A report older than the stored one is ignored.

    :returns: the host's last report after this call.
    :raises ObjectValidationError: if the report is invalid; the stored
        one is kept then.
    """
    values = {
        'host': report.host, 'hypervisor_uri': report.hypervisor_uri,
        'hypervisor_type': report.hypervisor_type,
        'service_version': report.service_version,
        'fingerprint': report.fingerprint, 'reported_at': report.reported_at,
        'report': primitives.dump(report), 'updated_at': _rows.utcnow()}
    if not _replace(db, values):
        try:
            with db.writer() as session:
                session.execute(sa.insert(models.ComputeNode).values(
                    created_at=values['updated_at'], **values))
        except sa_exc.IntegrityError:
            # The host's first report raced with another; it exists now.
            _replace(db, values)
    return get(db, report.host)


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


def _replace(db, values):
    """Overwrite the host's report unless the stored one is newer.

    :returns: False if the host has no row yet.
    """
    with db.writer() as session:
        result = session.execute(sa.update(models.ComputeNode).where(
            models.ComputeNode.host == values['host'],
            # A report delayed in transit must not hide a newer one.
            models.ComputeNode.reported_at <= values['reported_at']).values(
                **values))
        if result.rowcount == 1:
            return True
        return session.scalar(sa.select(models.ComputeNode.id).where(
            models.ComputeNode.host == values['host'])) is not None


def _to_object(row):
    report = primitives.load(row.report, objects.ComputeNodeReport,
                             'compute_nodes', row.host, 'report')
    # A DateTimeField primitive has whole seconds; the column is exact.
    report.reported_at = row.reported_at
    report.obj_reset_changes(['reported_at'])
    return report
