"""Start requests lost with a dead conductor worker or source, sent again.

A migration is recorded ``queued`` together with its claim, then the
conductor casts ``live_migration`` to its source. Two deaths lose that
cast, and nothing else would ever send it:

* the conductor worker dies between the record and the cast;
* the source agent dies after taking the cast off its queue and before
  its run recorded ``running`` (oslo.messaging acknowledges a message
  before it runs it, so the broker does not deliver it again).

The migration then waited ``queued`` until the stalled-migration sweep
failed it, twice ``rpc_response_timeout_migration`` later (120 s with the
defaults). Instead, the conductor keeps the cast's live-migrate data with
``queued`` (``migrations.start_request``, written in the transaction
that records the claim) and sends the start request again:

* when a conductor worker starts, for every queued migration (the worker
  that died may have been the one that was to cast it);
* at each stalled-migration sweep, for every queued migration not changed
  for one sweep interval whose source is up.

Why this is safe: a resend is a redelivery of the same cast, and
``live_migration`` is idempotent under redelivery (the redelivery table
in tests/functional/redelivery checks it): a source that runs or waits
to run the migration ignores the repeat; a run that finds the migration
moved past ``queued`` undoes nothing; and the source's ``queued ->
running`` change is conditional in the records, so a run started by a
resend and the sweep that fails a migration never both win. Why not end
such a migration instead: the conductor cannot tell a lost cast from one
about to be taken, and a restarted source cannot tell a lost cast from
one still waiting in the broker for it; ending either would fail a
migration that can still run, while the guest, the claim and the
destination's answer are all still good.
"""

import datetime

from oslo_log import log as logging

from numamig import exception
from numamig import objects
from numamig.conductor import records
from numamig.db import instances
from numamig.db import migrations
from numamig.db import primitives

LOG = logging.getLogger(__name__)


def send_again(worker, ctxt, now, unchanged_for=0, held=()):
    """Cast ``live_migration`` again for queued migrations that kept
    their start request and were not changed for ``unchanged_for``
    seconds.

    :param held: uuids this worker's tasks drive (they cast themselves).
    :param unchanged_for: 0 at a worker's start (every queued migration);
        the sweep interval at each sweep, when a source that is down is
        also skipped (it would only pile copies in its queue).
    :returns: the uuids of the migrations whose start was sent again.
    """
    before = now - datetime.timedelta(seconds=unchanged_for)
    found = [(m, start) for m, start in
             migrations.queued_start_requests(worker.db, before)
             if m.uuid not in held]
    if not found:
        return []
    records.sync_reports(worker)
    sent = []
    for migration, start in found:
        if unchanged_for and not _is_up(worker, migration.source_host):
            continue
        if _send(worker, ctxt, migration, start, now):
            sent.append(migration.uuid)
    return sent


def send_now(worker, ctxt, migration):
    """Send the start request of ``migration``, queued by this worker's
    own task, whose cast never went (the database's answer to recording
    it was lost); see records.requeue_after_outage.

    :returns: whether it was sent.
    """
    for queued, start in migrations.queued_start_requests(
            worker.db, None, uuids=[migration.uuid]):
        return _send(worker, ctxt, queued, start, None)
    return False


def _is_up(worker, host):
    try:
        return worker.cache.get(host).is_up
    except exception.HostNotFound:
        return False


def _send(worker, ctxt, migration, start, now):
    try:
        migrate_data = primitives.load(
            start, objects.LiveMigrateData, 'migrations', migration.uuid,
            'start_request')
        instance = instances.get(worker.db, migration.instance_uuid).instance
    except (exception.StoredRecordInvalid, exception.InstanceNotFound) as exc:
        # The sweep fails it in time; nothing can be sent.
        LOG.warning("Migration %s: its start request cannot be sent again: "
                    "%s", migration.uuid, exc)
        return False
    if not worker.compute_api.live_migration(ctxt, instance, migration,
                                             migrate_data, wait=False):
        return False
    if now is None:
        LOG.warning("Migration %s of %s: its start request was sent to "
                    "source %s after the database came back (its claim "
                    "was recorded, the answer lost with the connection)",
                    migration.uuid, migration.instance_uuid,
                    migration.source_host)
        return True
    waited = (now - (migration.updated_at or now)).total_seconds()
    LOG.warning("Migration %s of %s still queued %.0f s after its claim "
                "was recorded: its start request was sent again to source "
                "%s (the one sent before may have been lost with a "
                "conductor worker or source agent that stopped)",
                migration.uuid, migration.instance_uuid, waited,
                migration.source_host)
    return True
