"""What backends reaching daemons over a broker share.

The conductor and agents run as separate processes (started by the
harness or by the operator): the harness talks to the conductor over
the broker, reads each host through its own libvirt connection (a
LibvirtDriver probe on the host's URI) and waits for fresh periodic
reports instead of asking the agents to report.
"""

import dataclasses
import datetime
import time

import libvirt
from oslo_log import log as logging
from oslo_utils import timeutils

from numamig import rpc
from numamig import service
from numamig.conf import CONF
from numamig.db import api as db_api
from numamig.virt.libvirt import driver as lv_driver
from numamig.virt.libvirt import settings as lv_settings
from numamig_ci import exception as ci_exception
from numamig_ci.backends import base

LOG = logging.getLogger(__name__)
# A report must start this long after the request for it to be current:
# an agent recomputes usage from the records just before it reports.
REPORT_MARGIN_S = 0.3


class RemoteBackend(base.Backend):
    """A deployment of daemons; subclasses say where its parts are.

    :param report_interval: seconds between the agents' reports (how
        long a refresh may take).
    """

    def __init__(self, transport_url, db_url, control_exchange,
                 report_interval):
        super().__init__()
        self.transport_url = transport_url
        self.db_url = db_url
        self.control_exchange = control_exchange
        self.report_interval = report_interval
        self._transport = None
        self._db = None
        self._probes = {}

    def connect(self, uris, sets):
        """Reach the conductor, every host's libvirt, and the database.

        :param uris: {host: libvirt URI the harness can read}.
        :param sets: {host: (dedicated set or None, shared set or None)}.
        """
        self._transport = rpc.get_transport(CONF, url=self.transport_url)
        names = service.RPCNames() \
            if self.control_exchange in (None, rpc.CONTROL_EXCHANGE) else \
            service.RPCNames(suffix=self.control_exchange,
                             exchange=self.control_exchange)
        self.api = names.conductor_api(self._transport, timeout=120)
        # A call sent before the conductor's queue exists is dropped by
        # the broker: poll with short calls while waiting for it.
        self._poll_api = names.conductor_api(self._transport, timeout=2)
        self._db = db_api.Database(self.db_url)
        for host, uri in uris.items():
            probe = lv_driver.LibvirtDriver(dataclasses.replace(
                lv_settings.LibvirtSettings.from_conf(CONF),
                host=host, uri=uri, virt_type='qemu',
                reserved_host_memory_mb=0))
            probe.init_host(host)
            self._probes[host] = probe
            dedicated, shared = sets[host]
            self.hosts[host] = base.host_config(
                host, _capabilities(uri), dedicated, shared)

    def disconnect(self):
        for probe in self._probes.values():
            probe.cleanup_host()
        self._probes = {}
        if self._db is not None:
            self._db.dispose()
            self._db = None
        if self._transport is not None:
            rpc.close_transport(self._transport)
            self._transport = None

    def probe(self, host):
        return self._probes[host]

    def database(self):
        return self._db

    def wait_for_conductor(self, timeout, procs_alive=None):
        """Return once the conductor answers a call.

        :param procs_alive: callable raising if a daemon died meanwhile.
        :raises CIDeploymentError: no answer within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            if procs_alive:
                procs_alive()
            try:
                return self._poll_api.compute_node_get_all(self.context)
            except Exception as exc:  # the conductor may not listen yet
                LOG.debug("numamig-ci: no conductor yet: %s", exc)
            if time.monotonic() > deadline:
                raise ci_exception.CIDeploymentError(
                    what='conductor', reason=f"no answer within {timeout} "
                                             f"s on {self.control_exchange}")
            time.sleep(0.1)

    def wait_for_reports(self, timeout, since=None, procs_alive=None):
        """Wait until every host has reported after ``since``.

        :param procs_alive: callable raising if a daemon died meanwhile.
        :raises CIDeploymentError: a host did not report in time.
        """
        deadline = time.monotonic() + timeout
        missing = set(self.hosts)
        while True:
            if procs_alive:
                procs_alive()
            try:
                reports = {r.host: r for r in
                           self._poll_api.compute_node_get_all(self.context)}
            except Exception as exc:  # the conductor may not listen yet
                LOG.debug("numamig-ci: no reports yet: %s", exc)
                reports = {}
            missing = {h for h in self.hosts if h not in reports or (
                since is not None and reports[h].reported_at < since)}
            if not missing:
                return reports
            if time.monotonic() > deadline:
                raise ci_exception.CIDeploymentError(
                    what=f"hosts {', '.join(sorted(missing))}",
                    reason=f"no report within {timeout} s (is the compute "
                           f"agent running, with a short report_interval?)")
            time.sleep(0.1)

    def refresh(self):
        since = timeutils.utcnow(with_timezone=True) + \
            datetime.timedelta(seconds=REPORT_MARGIN_S)
        self.wait_for_reports(3 * self.report_interval + 5, since=since)


def _capabilities(uri):
    conn = libvirt.open(uri)
    try:
        return conn.getCapabilities()
    finally:
        conn.close()

