"""How numamig-manage actions reach the database and the conductor.

Reading actions open the conductor's database directly (``[database]
connection``), as nova-manage does; actions that change something go
through the conductor's RPC API (``[DEFAULT] transport_url``), so that
the claim rules the conductor enforces apply to operators too.
oslo.messaging is imported only by ``conductor()``, so that the reading
actions do not pay for it. ``guarded`` maps what can go wrong onto the
CLI's exit codes, with a message naming what was wrong.
"""

import contextlib

from numamig import exception
from numamig.conf import CONF

# Seconds an operator's call waits for the conductor by default; a live
# migration's destination choice may try several hosts, each allowed
# rpc_response_timeout_migration.
CALL_TIMEOUT = 60


@contextlib.contextmanager
def database():
    """The conductor's database, schema checked, closed at the end.

    :raises DatabaseError: unreachable, or not synced to this release.
    """
    from numamig.db import api
    db = api.Database.from_config(CONF, existing=True)
    try:
        db.check_schema()
        yield db
    finally:
        db.dispose()


@contextlib.contextmanager
def direct_reader():
    """A numamig.db.direct Reader of the conductor's database, schema
    checked, closed at the end; None where numamig.db.direct does not
    serve ``[database] connection`` (read through ``database()``).

    The reads that only show rows take this first: it reads them through
    the DB-API driver, without SQLAlchemy and the versioned objects,
    which cost a short command most of its time (issue 43).

    :raises DatabaseError: unreachable, or not synced to this release.
    """
    from numamig.db import direct
    from numamig.db import libpq
    reader = direct.connect(CONF.database.connection,
                            libpq.bounds(CONF.database))
    try:
        yield reader
    finally:
        if reader is not None:
            reader.close()


def conductor(timeout=CALL_TIMEOUT):
    """A conductor RPC client on the configured transport, once a
    conductor answered its ping (``_ping``).

    It reaches the conductor of the deployment ``[DEFAULT]
    control_exchange`` names, as numamig.service.RPCNames.from_conf does
    for the services (a unit test keeps the two equal): numamig.service
    itself loads every manager and is too slow to import for one call.
    """
    from numamig import _backend
    from numamig import broker
    from numamig import library_notices
    # The command answers in one line when the broker cannot be reached;
    # the driver's attempts are not the operator's to read.
    library_notices.quiet_reconnect_notices()
    with _backend.without_yaml():
        # kombu, loaded with the rabbit driver, would load PyYAML for
        # nothing (_backend.without_yaml).
        from numamig import rpc
        from numamig.conductor import rpcapi
        transport = rpc.get_transport(CONF)
    url = rpc.transport_url(CONF)
    broker.check_reachable(url, CONF.cli_broker_retries)
    if url.transport in ('rabbit', 'kombu'):
        # Registered by get_transport, which loaded the rabbit driver.
        broker.check_accepted(url, CONF.oslo_messaging_rabbit)
    topic, exchange = rpcapi.TOPIC, CONF.control_exchange
    if exchange == rpc.CONTROL_EXCHANGE:
        exchange = None
    else:
        topic = f'{topic}-{exchange}'
    api = rpcapi.ConductorAPI(transport,
                              version_cap=CONF.upgrade_levels.conductor,
                              timeout=timeout, topic=topic,
                              exchange=exchange)
    _ping(api, topic, url)
    return api


def direct_conductor(timeout=CALL_TIMEOUT):
    """The conductor through numamig.conductor.direct_rpc (py-amqp alone,
    without oslo.messaging and the versioned objects), once it answered
    its ping; None where that module does not serve the configuration
    (or ``[DEFAULT] cli_direct_rpc`` is false): use ``conductor()``.

    The broker, login and ping checks are the same as ``conductor()``'s,
    with the same words (issue 43: most of ``migration start``'s time was
    loading oslo.messaging).

    :raises BrokerUnreachable, BrokerRefused, ConductorUnreachable:
    """
    if not CONF.cli_direct_rpc:
        return None
    from numamig.conductor import direct_rpc
    client = direct_rpc.connect(CONF, timeout)
    if client is None:
        return None
    try:
        client.ping(CONF.cli_conductor_timeout)
    except direct_rpc.CallTimeout:
        client.close()
        from numamig import broker
        raise exception.ConductorUnreachable(
            topic=client.topic, url=broker.masked(client.url),
            timeout=f"{CONF.cli_conductor_timeout:g}") from None
    except direct_rpc.Unserved:
        client.close()
        return None
    return DirectConductor(client, timeout)


class DirectConductor:
    """The calls of ``migration start`` (and its --wait) through a
    direct_rpc Client, continued through ``conductor()`` from the first
    call the client does not serve (direct_rpc.Unserved): a request is
    then sent again under the same migration uuid, which the conductor
    answers with the migration it recorded, never a second one."""

    def __init__(self, client, timeout):
        self.client = client
        self.timeout = timeout
        self._full = None

    def _through_oslo(self):
        if self._full is None:
            self.client.close()
            self._full = conductor(self.timeout)
        return self._full

    def _direct(self, call, *args):
        from numamig.conductor import direct_rpc
        if self._full is None:
            try:
                return call(*args)
            except direct_rpc.Unserved:
                pass
        return None

    def live_migrate_instance(self, ctxt, instance_uuid, dest_host=None,
                              priority=None, policy=None):
        import uuid
        migration_uuid = str(uuid.uuid4())
        found = self._direct(self.client.live_migrate_instance,
                             instance_uuid, dest_host, priority, policy,
                             migration_uuid)
        if found is not None:
            return found
        return self._through_oslo().live_migrate_instance(
            ctxt, instance_uuid, dest_host, priority=priority,
            policy=policy, migration_uuid=migration_uuid)

    def migration_get(self, ctxt, migration_uuid):
        found = self._direct(self.client.migration_get, ctxt,
                             migration_uuid)
        if found is not None:
            return found
        return self._through_oslo().migration_get(ctxt, migration_uuid)

    def migration_wait(self, ctxt, migration, timeout):
        found = self._direct(self.client.migration_wait, ctxt, migration,
                             timeout)
        if found is not None:
            return found
        return self._through_oslo().migration_wait(ctxt, migration,
                                                   timeout)

    def close(self):
        self.client.close()


def _ping(api, topic, url):
    """Fail fast when no conductor listens.

    An action sent to a topic no conductor consumes waits its whole
    timeout (60 s, more for memory changes) in silence; a ping bounded
    by [DEFAULT] cli_conductor_timeout answers in milliseconds when one
    runs, and the action is never sent when none does.

    :raises ConductorUnreachable: naming the topic and the broker.
    """
    import oslo_messaging as messaging
    try:
        api.ping(context(), CONF.cli_conductor_timeout)
    except messaging.MessagingTimeout:
        from numamig import broker
        raise exception.ConductorUnreachable(
            topic=topic, url=broker.masked(url),
            timeout=f"{CONF.cli_conductor_timeout:g}") from None


def context():
    from numamig import context as nm_context
    return nm_context.get_admin_context()


def require_uuid(value, what):
    """Refuse a malformed UUID before anything is looked up.

    :raises Invalid: naming the argument and the value.
    """
    from oslo_utils import uuidutils
    if not uuidutils.is_uuid_like(value):
        raise exception.Invalid(reason=f"{what} {value!r} is not a UUID")
    return value


# An instance name is at most this long (the records' column).
NAME_MAX = 255
# Instances of one name listed when a name is ambiguous.
SAME_NAME_SHOWN = 5


def instance_uuid(value):
    """The uuid of the instance ``value`` names: a UUID as it is, else
    the one instance of that name in the records.

    :raises Invalid: no such name, or a name several instances share
        (naming their uuids), or a value no name can be.
    """
    from oslo_utils import uuidutils
    if uuidutils.is_uuid_like(value):
        return value
    if not value or len(value) > NAME_MAX or not value.isprintable():
        raise exception.Invalid(
            reason=f"instance {value[:60]!r} is neither a UUID nor an "
                   f"instance name (1-{NAME_MAX} printable characters)")
    from numamig.db import instances
    with database() as db:
        uuids = instances.uuids_named(db, value, limit=SAME_NAME_SHOWN + 1)
    if not uuids:
        raise exception.Invalid(
            reason=f"instance {value!r} is not a UUID, and no instance "
                   f"has that name")
    if len(uuids) > 1:
        more = ', ...' if len(uuids) > SAME_NAME_SHOWN else ''
        raise exception.Invalid(
            reason=f"instance name {value!r} is not unique "
                   f"({', '.join(uuids[:SAME_NAME_SHOWN])}{more}): give "
                   f"the UUID")
    return uuids[0]
