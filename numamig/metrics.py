"""A daemon's Prometheus endpoint: /metrics over HTTP, off by default.

Every metric is computed when Prometheus scrapes, by the collectors the
daemon hands over (numamig.conductor.metrics, numamig.compute.metrics)
from what that daemon already keeps: the conductor's database and the
hosts' last reports, an agent's own tracker. Nothing is counted in
process memory, so a conductor's workers, which share the port
(SO_REUSEPORT: the kernel hands each scrape to one of them), all answer
the same, and a restart loses nothing.

A collector that fails (the database is away) does not fail the scrape:
its metrics are left out, ``numamig_metrics_collector_up`` says which
one failed, and the daemon logs one WARNING line per failure, not one
per scrape.
"""

import json
import os
import socket
import socketserver
import threading
import time
from wsgiref import simple_server

from oslo_log import log as logging

from numamig import exception

# prometheus_client is imported where an endpoint or a family is built:
# numamig.rpc records every call here, and a command line that sends
# one must not pay for the library (about 60 ms).

LOG = logging.getLogger(__name__)

# Seconds between two WARNING lines of a collector failing the same way.
FAILURE_SUMMARY_S = 300


class Collector:
    """What a daemon's collectors are: a name and ``families()``, which
    yields prometheus_client metric families built now."""

    name = 'collector'

    def families(self):
        raise NotImplementedError


def cell_counts(cell):
    """What a host cell (HostNUMACell) holds, as both the conductor's
    and an agent's per-cell gauges show it: ({state: pCPUs} pinned,
    free and shared, [(page size in bytes, {state: pages})] used, free
    and reserved)."""
    dedicated = set(cell.pcpuset)
    pinned = set(cell.pinned_cpus) & dedicated
    pcpus = {'pinned': len(pinned), 'free': len(dedicated - pinned),
             'shared': len(cell.cpuset)}
    pages = []
    for pool in cell.mempages or ():
        reserved = pool.get('reserved', 0)
        pages.append((pool.size_kb * 1024, {
            'used': pool.used, 'free': pool.total - pool.used - reserved,
            'reserved': reserved}))
    return pcpus, pages


class CallTimes:
    """How long a process's calls took, by method and outcome: a
    histogram kept in memory (the only such metric: a compute agent is
    one process, so its scrapes see one history).

    :param bounds_s: the histogram's upper bounds, seconds.
    """

    def __init__(self, bounds_s):
        self.bounds_s = tuple(bounds_s)
        self._lock = threading.Lock()
        # (method, outcome) -> [count at or under each bound..., count,
        # sum of seconds]
        self._series = {}

    def observe(self, method, outcome, seconds):
        with self._lock:
            series = self._series.get((method, outcome))
            if series is None:
                series = self._series[(method, outcome)] = \
                    [0] * (len(self.bounds_s) + 1) + [0.0]
            for index, bound in enumerate(self.bounds_s):
                if seconds <= bound:
                    series[index] += 1
            series[-2] += 1
            series[-1] += seconds

    def snapshot(self):
        """{(method, outcome): [count at or under each bound..., count,
        sum of seconds]}, a copy."""
        with self._lock:
            return {key: list(value) for key, value in self._series.items()}

    def family(self, name, documentation, series=None):
        """A histogram family labelled by method and outcome (of
        ``series``, a snapshot; default: this process's own)."""
        from prometheus_client import core
        from prometheus_client import utils
        family = core.HistogramMetricFamily(
            name, documentation, labels=['method', 'outcome'])
        if series is None:
            series = self.snapshot()
        for (method, outcome), values in sorted(series.items()):
            buckets = [(utils.floatToGoString(bound),
                        count) for bound, count in
                       zip(self.bounds_s, values, strict=False)]
            buckets.append(('+Inf', values[-2]))
            family.add_metric([method, outcome], buckets,
                              sum_value=values[-1])
        return family


# Every RPC call this process makes (numamig.rpc records them): its
# methods are the RPC APIs' own, a bounded set.
RPC_CALL_BOUNDS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                     10, 30, 60)
RPC_CALLS = CallTimes(RPC_CALL_BOUNDS_S)


class SharedCallTimes:
    """One history of calls for every worker of a conductor.

    A conductor's workers are processes that share its metrics port, and
    the kernel hands each scrape to any one of them: a histogram kept in
    one worker's memory would jump between scrapes. So each worker writes
    its own history (``times``) to a file of its own in ``directory``
    every FLUSH_S seconds when it changed, and whichever worker is
    scraped adds up every file. A worker that died and was restarted
    leaves its file: its calls still count, so the sums never go down.
    The daemon empties the directory when it starts (``clear``), which
    Prometheus sees as a counter reset, as with any restart.

    :param directory: the files' directory, one per conductor daemon.
    :param times: this process's CallTimes.
    :param worker: this worker's name among them (its pid).
    """

    FLUSH_S = 2.0
    SUFFIX = '.calls.json'

    def __init__(self, directory, times, worker=None):
        self.directory = directory
        self.times = times
        worker = os.getpid() if worker is None else worker
        self._own = os.path.join(directory, f'{worker}{self.SUFFIX}')
        self._written = None
        self._stop = threading.Event()
        self._thread = None

    @classmethod
    def clear(cls, directory):
        """Start a daemon's history: make the directory, remove the
        files of its last run.

        :raises InvalidConfiguration: the directory cannot be made or
            emptied (``[DEFAULT] state_path`` is not writable).
        """
        try:
            os.makedirs(directory, mode=0o750, exist_ok=True)
            for name in os.listdir(directory):
                if name.endswith(cls.SUFFIX):
                    os.unlink(os.path.join(directory, name))
        except OSError as error:
            raise exception.InvalidConfiguration(
                option='[DEFAULT] state_path',
                reason=f"the conductor's workers cannot share their RPC "
                       f"call history in {directory}: "
                       f"{error.strerror or error}")

    def start(self):
        try:
            os.makedirs(self.directory, mode=0o750, exist_ok=True)
        except OSError:
            pass  # the first flush says why
        self._thread = threading.Thread(target=self._flush_until_stopped,
                                        name='metrics-calls', daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.FLUSH_S)
        self.flush()

    def _flush_until_stopped(self):
        while not self._stop.wait(self.FLUSH_S):
            self.flush()

    def flush(self):
        """Write this worker's history if it changed; a write that fails
        is retried at the next flush (logged once per kind of error)."""
        series = self.times.snapshot()
        if series == self._written:
            return
        rows = [[method, outcome, values] for (method, outcome), values
                in sorted(series.items())]
        temporary = f'{self._own}.tmp'
        try:
            with open(temporary, 'w', encoding='utf-8') as handle:
                json.dump({'bounds_s': list(self.times.bounds_s),
                           'series': rows}, handle)
            os.replace(temporary, self._own)
        except OSError as error:
            if self._written is not False:
                LOG.warning("The RPC call history of this worker is not "
                            "shared with the other workers (%s: %s)",
                            self.directory,
                            error.strerror or error)
            self._written = False
            return
        self._written = series

    def series(self):
        """Every worker's history added up: this worker's as it is now,
        the others' as they last wrote it."""
        total = self.times.snapshot()
        width = len(self.times.bounds_s) + 2
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            names = []  # nothing shared yet: the first flush says why
        for name in names:
            path = os.path.join(self.directory, name)
            if not name.endswith(self.SUFFIX) or path == self._own:
                continue
            try:
                with open(path, encoding='utf-8') as handle:
                    written = json.load(handle)
            except (OSError, ValueError):
                continue  # being replaced, or gone: the next scrape reads it
            if written.get('bounds_s') != list(self.times.bounds_s):
                continue  # another release's buckets
            for method, outcome, values in written.get('series', ()):
                if len(values) != width:
                    continue
                mine = total.setdefault((method, outcome), [0] * width)
                for index, value in enumerate(values):
                    mine[index] += value
        return total


class _Guarded:
    """The registry's collector: every daemon collector, each guarded,
    and ``numamig_metrics_collector_up`` saying which answered."""

    def __init__(self, owner, collectors):
        self.owner = owner
        self.collectors = list(collectors)
        self._failing = {}
        self._lock = threading.Lock()

    def collect(self):
        from prometheus_client import core
        up = core.GaugeMetricFamily(
            'numamig_metrics_collector_up',
            'Whether a collector answered the last scrape (1) or failed '
            '(0: its metrics are missing; the daemon log says why).',
            labels=['collector'])
        for collector in self.collectors:
            began = time.monotonic()
            try:
                families = list(collector.families())
            except Exception as error:  # noqa: BLE001 - reported, scraped on
                self._failed(collector, error)
                up.add_metric([collector.name], 0)
                continue
            self._worked(collector, time.monotonic() - began)
            up.add_metric([collector.name], 1)
            yield from families
        yield up

    def _failed(self, collector, error):
        LOG.debug("%s: metrics collector %s failed", self.owner,
                  collector.name, exc_info=error)
        now = time.monotonic()
        kind = type(error).__name__
        with self._lock:
            last = self._failing.get(collector.name)
            if last is not None and last[0] == kind and \
                    now - last[1] < FAILURE_SUMMARY_S:
                return
            self._failing[collector.name] = (kind, now)
        LOG.warning("%s: metrics collector %s failed (%s: %s); its metrics "
                    "are left out of the scrapes until it answers", self.owner,
                    collector.name, kind, exception.brief(error))

    def _worked(self, collector, took):
        with self._lock:
            failed = self._failing.pop(collector.name, None)
        if failed is not None:
            LOG.info("%s: metrics collector %s answers again (%.3f s)",
                     self.owner, collector.name, took)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """One thread per scrape, sharing its port with the other workers."""

    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        if hasattr(socket, 'SO_REUSEPORT'):
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


class _QuietHandler(simple_server.WSGIRequestHandler):
    """Scrapes are not logged on stderr, one line each."""

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        pass


def check_can_listen(conf):
    """Refuse, before a conductor forks its workers, a ``[metrics]``
    address they could not listen on (each would fail and be restarted).

    :raises InvalidConfiguration: naming the address and the error.
    """
    endpoint = Endpoint.from_conf(conf, (), 'check')
    if endpoint is not None:
        endpoint.start(serve=False)
        endpoint.stop()


class Endpoint:
    """The HTTP endpoint serving ``collectors`` at /metrics.

    :param owner: who serves it, for the log (the host).
    """

    def __init__(self, host, port, collectors, owner):
        self.host = host
        self.port = port
        self.owner = owner
        import prometheus_client
        self.registry = prometheus_client.CollectorRegistry(
            auto_describe=False)
        self.registry.register(_Guarded(owner, collectors))
        self._server = None
        self._thread = None

    @classmethod
    def from_conf(cls, conf, collectors, owner):
        """The endpoint ``[metrics]`` asks for, or None (port 0)."""
        if not conf.metrics.port:
            return None
        return cls(conf.metrics.host, conf.metrics.port, collectors, owner)

    def start(self, serve=True):
        """Listen and serve in a thread of its own (``serve``; else only
        listen).

        :raises InvalidConfiguration: the address cannot be listened on.
        """
        import prometheus_client
        app = prometheus_client.make_wsgi_app(self.registry)
        server_class = _Server
        if ':' in self.host:
            server_class = type('_Server6', (_Server,),
                                {'address_family': socket.AF_INET6})
        try:
            self._server = simple_server.make_server(
                self.host, self.port, app, server_class=server_class,
                handler_class=_QuietHandler)
        except OSError as error:
            raise exception.InvalidConfiguration(
                option='[metrics] port',
                reason=f"cannot listen on {self.host}:{self.port} for the "
                       f"metrics endpoint: {error.strerror or error}")
        self.port = self._server.server_address[1]
        if not serve:
            return
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={'poll_interval': 0.5},
            name='metrics-endpoint', daemon=True)
        self._thread.start()
        LOG.info("%s: metrics served at http://%s:%s/metrics", self.owner,
                 self.host, self.port)

    def stop(self):
        """Stop serving (a scrape in progress ends with the process)."""
        server, self._server = self._server, None
        thread, self._thread = self._thread, None
        if server is None:
            return
        if thread is not None:
            server.shutdown()
        server.server_close()
