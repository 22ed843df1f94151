"""How long a source keeps asking for a migration's change to be recorded.

Every request a source sends to record a change (a status, the
completion) is idempotent, so one whose answer did not come is simply
sent again. Two things keep an answer from coming, and the fault suite
(tests/functional/faults) measured both:

* the conductor worker that took the request died with it, or a broker
  restart deleted the reply queue the answer was in: the answer never
  comes, and the caller learns it only when its wait runs out. A status
  change takes the conductor milliseconds, so the attempts wait growing
  shares of ATTEMPTS times a third of ``[DEFAULT] rpc_response_timeout``
  (``Asking.timeout``; 10, 20 and 30 s with the defaults): a lost answer
  costs 10 s, not 60 s, and a conductor slow to answer (waiting out a
  database outage, see ``[database] outage_wait``) still gets most of
  the wait;
* the conductor's database is out: the conductor answers at once with a
  DatabaseError. The change is asked again after a pause that doubles up
  to DATABASE_PAUSE_MAX_S, for as long as all the attempts together
  could have waited, so that a migration resumes within seconds of the
  database's return instead of being rolled back with nothing recorded
  (and ended by the conductor's stalled-migration sweep minutes later,
  with a reason that was not what happened).
"""

import time

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import attempts
from numamig import exception

LOG = logging.getLogger(__name__)

# A change whose answer is lost (the conductor worker died with it) is
# sent this many times in all: another worker answers.
ATTEMPTS = 3
# oslo.messaging's default [DEFAULT] rpc_response_timeout.
DEFAULT_RPC_TIMEOUT_S = 60
# While the conductor's database is out: the first pause, and the longest.
DATABASE_PAUSE_S = 0.5
DATABASE_PAUSE_MAX_S = 4.0


def attempt_timeout(rpc_response_timeout):
    """Seconds one attempt waits: the whole wait shared among ATTEMPTS."""
    return max(1, int(rpc_response_timeout or DEFAULT_RPC_TIMEOUT_S)
               // ATTEMPTS)


class Asking:
    """One change being asked for: call ``again(exc)`` after each failed
    attempt; it returns when another attempt is due and re-raises ``exc``
    once patience has run out.

    :param what: the change, for the logs ("recording status running").
    :param timeout: a third of all the attempts' wait (None: the
        default); each attempt waits ``timeout()``.
    """

    def __init__(self, host, migration_uuid, what, timeout=None,
                 clock=time.monotonic, sleep=time.sleep):
        self.host = host
        self.migration_uuid = migration_uuid
        self.what = what
        self.retried = False
        self._lost = 0
        self._clock = clock
        self._sleep = sleep
        per_attempt = timeout or attempt_timeout(None)
        self._deadline = clock() + ATTEMPTS * per_attempt
        self._shares = attempts.attempt_shares(ATTEMPTS * per_attempt,
                                               ATTEMPTS)
        self._pause = DATABASE_PAUSE_S

    def timeout(self):
        """Seconds the next attempt waits for its answer: a growing
        share, so that an answer lost at once costs the short first one."""
        return self._shares[min(self._lost, ATTEMPTS - 1)]

    def again(self, exc):
        """Wait for the next attempt, or raise ``exc`` (the failure of the
        last one) when there is none."""
        if isinstance(exc, messaging.MessagingTimeout):
            self._lost += 1
            if self._lost >= ATTEMPTS:
                raise exc
            LOG.warning("%s: migration %s: no answer %s (attempt %d); "
                        "asking again: %s", self.host, self.migration_uuid,
                        self.what, self._lost, exc)
        elif isinstance(exc, exception.DatabaseError) and \
                not isinstance(exc, exception.DatabaseNotSynced):
            remaining = self._deadline - self._clock()
            if remaining <= 0:
                raise exc
            pause = min(self._pause, remaining)
            LOG.warning("%s: migration %s: the conductor's database is out "
                        "%s; asking again in %.1f s: %s", self.host,
                        self.migration_uuid, self.what, pause,
                        exception.brief(exc))
            self._sleep(pause)
            self._pause = min(self._pause * 2, DATABASE_PAUSE_MAX_S)
        else:
            raise exc
        self.retried = True


RETRIED = (messaging.MessagingTimeout, exception.DatabaseError)


def status_timeout(agent):
    """Seconds one attempt of ``agent``'s conductor client waits (a third
    of [DEFAULT] rpc_response_timeout), or None."""
    timeout = getattr(agent.conductor_api, 'status_timeout', None)
    # A test's stand-in client may have none.
    return timeout if isinstance(timeout, (int, float)) else None
