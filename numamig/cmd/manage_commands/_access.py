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
import functools
import sys

from numamig import exception
from numamig.cmd import common
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
    db = api.Database.from_config(CONF)
    try:
        db.check_schema()
        yield db
    finally:
        db.dispose()


def conductor(timeout=CALL_TIMEOUT):
    """A conductor RPC client on the configured transport.

    It reaches the conductor of the deployment ``[DEFAULT]
    control_exchange`` names, as numamig.service.RPCNames.from_conf does
    for the services (a unit test keeps the two equal): numamig.service
    itself loads every manager and is too slow to import for one call.
    """
    from numamig import rpc
    from numamig.conductor import rpcapi
    transport = rpc.get_transport(CONF)
    topic, exchange = rpcapi.TOPIC, CONF.control_exchange
    if exchange == rpc.CONTROL_EXCHANGE:
        exchange = None
    else:
        topic = f'{topic}-{exchange}'
    return rpcapi.ConductorAPI(transport,
                               version_cap=CONF.upgrade_levels.conductor,
                               timeout=timeout, topic=topic,
                               exchange=exchange)


def context():
    from numamig import context as nm_context
    return nm_context.get_admin_context()


def guarded(func):
    """Map an action's exceptions onto exit codes, printing why.

    Bad input (unknown host, instance or migration, a refused request):
    127, nothing changed. A "no" from the services (host down, no valid
    host): 1. The database or conductor unreachable: 255.
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (exception.Invalid, exception.NotFound, ValueError) as exc:
            return fail(exc, common.EXIT_BAD_INPUT)
        except exception.MigrationError as exc:
            return fail(exc, common.EXIT_NO)
        except exception.DatabaseError as exc:
            return fail(exc, common.EXIT_UNEXPECTED)
        except Exception as exc:
            problem = _rpc_problem(exc)
            if problem is None:
                raise
            return fail(problem, common.EXIT_UNEXPECTED)
    return wrapper


def _rpc_problem(exc):
    """What to tell the operator of an RPC failure; None if not one.

    An action that never imported oslo_messaging cannot have raised one
    of its exceptions, so it is looked up, not imported.
    """
    messaging = sys.modules.get('oslo_messaging')
    if messaging is None:
        return None
    if isinstance(exc, messaging.MessagingTimeout):
        return (f"the conductor did not answer ({exc}); is "
                f"numamig-conductor running, and is [DEFAULT] "
                f"transport_url the one it uses?")
    if isinstance(exc, messaging.MessagingException):
        return f"RPC to the conductor failed: {exc}"
    return None


def fail(problem, code):
    """Print ``error: problem`` to stderr and return ``code``."""
    print(f"error: {problem}", file=sys.stderr)
    return code


def require_uuid(value, what):
    """Refuse a malformed UUID before anything is looked up.

    :raises Invalid: naming the argument and the value.
    """
    from oslo_utils import uuidutils
    if not uuidutils.is_uuid_like(value):
        raise exception.Invalid(reason=f"{what} {value!r} is not a UUID")
    return value
