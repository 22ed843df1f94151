"""The service versions of an agent's peers, for its compute client.

An agent sends other agents messages (the source prepares, completes or
rolls back on the destination; a destination checks with the source
when the conductor cannot ask it first) and must send each the newest
API version it serves, known before sending. The conductor holds every
host's report; an agent reads them from it (``compute_node_get_all``,
which every release's conductor serves) when asked about a host it has
no fresh word of, at most once per ``refresh_s``: a rare read, since
the client first uses what the peer's own LiveMigrateData told it
(numamig.compute.rpcapi).
"""

import threading
import time

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import context as nm_context

LOG = logging.getLogger(__name__)

# Seconds a read of the hosts' reports answers for (a host upgraded
# meanwhile is sent its old release's version until the next read).
REFRESH_S = 60


class PeerVersions:
    """host -> the service version it last reported (None: unknown)."""

    def __init__(self, conductor_api, refresh_s=REFRESH_S,
                 clock=time.monotonic):
        self._conductor_api = conductor_api
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._versions = {}
        self._read_at = None

    def __call__(self, host):
        now = self._clock()
        with self._lock:
            version = self._versions.get(host)
            if self._read_at is not None and \
                    now - self._read_at < self._refresh_s:
                return version
            # One reader at a time; the others use what is known.
            self._read_at = now
        try:
            reports = self._conductor_api.compute_node_get_all(
                nm_context.get_admin_context())
        except (messaging.MessagingException, OSError) as exc:
            LOG.warning("Could not read the compute hosts' service "
                        "versions from the conductor (%s): messages to %s "
                        "go at the newest version this agent knows it "
                        "serves", exc, host)
            return version
        versions = {report.host: report.service_version
                    for report in reports}
        with self._lock:
            self._versions = versions
        return versions.get(host)
