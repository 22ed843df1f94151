"""A real Prometheus server scrapes the daemons while they migrate a guest.

numamig-conductor and two numamig-compute daemons as processes over
RabbitMQ and PostgreSQL (test_multiprocess's deployment), each serving
its metrics endpoint (``[metrics] port``); Prometheus (Debian's package,
run here with a configuration of the test's own) scrapes them every
second. After one migration, the answers come from Prometheus' HTTP
query API, not from the endpoints: what an operator's dashboards and
alerts would read. The shipped alert rules are loaded into the same
server and checked by its promtool.
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from tests.functional import test_multiprocess

MONITORING_DIR = os.path.join(os.path.dirname(__file__), '..', '..', 'etc',
                              'numamig', 'monitoring')
ALERT_RULES = os.path.join(MONITORING_DIR, 'numamig-alerts.yaml')
# Seconds Prometheus gets to start, and to see what a scrape showed.
READY_S = 60
SEEN_S = 45


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def prometheus_missing():
    """Why no Prometheus server can run here, or None."""
    if shutil.which('prometheus') and shutil.which('promtool'):
        return None
    return ("prometheus and promtool are not installed (Debian's "
            "'prometheus' package: tools/dev.sh installs it)")


class Prometheus:
    """A Prometheus server of the test's own, scraping ``targets``."""

    def __init__(self, test, directory, targets):
        self.port = free_port()
        config = os.path.join(directory, 'prometheus.yml')
        with open(config, 'w') as f:
            f.write(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                f"rule_files: ['{os.path.abspath(ALERT_RULES)}']\n"
                "scrape_configs:\n  - job_name: numamig\n"
                "    static_configs:\n"
                f"      - targets: {json.dumps(targets)}\n")
        self.log = open(os.path.join(directory, 'prometheus.log'), 'w')
        test.addCleanup(self.log.close)
        self.proc = subprocess.Popen(
            ['prometheus', f'--config.file={config}',
             f'--storage.tsdb.path={os.path.join(directory, "tsdb")}',
             f'--web.listen-address=127.0.0.1:{self.port}'],
            stdout=self.log, stderr=subprocess.STDOUT)
        test.addCleanup(self._stop)
        self._wait_ready()

    def _stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _wait_ready(self):
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with "
                                     f"{self.proc.returncode}")
            try:
                self._get('/-/ready')
                return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"prometheus not ready within {READY_S} s")

    def _get(self, path):
        with urllib.request.urlopen(
                f'http://127.0.0.1:{self.port}{path}', timeout=10) as r:
            return r.read().decode()

    def query(self, expression):
        """[(labels, value)] of an instant query."""
        answer = json.loads(self._get(
            '/api/v1/query?' + urllib.parse.urlencode({'query': expression})))
        assert answer['status'] == 'success', answer
        return [(r['metric'], float(r['value'][1]))
                for r in answer['data']['result']]

    def targets_up(self):
        answer = json.loads(self._get('/api/v1/targets'))
        return {t['scrapeUrl']: t['health']
                for t in answer['data']['activeTargets']}

    def rules(self):
        answer = json.loads(self._get('/api/v1/rules'))
        return [r for g in answer['data']['groups'] for r in g['rules']]


class MonitoringTest(test_multiprocess.MultiProcessTestBase):

    # Two workers share the conductor's port: a scrape reaches either,
    # and each must answer the same.
    WORKERS = 2

    def setUp(self):
        reason = prometheus_missing()
        if reason:
            self.skipTest(reason)
        self.metrics_ports = {}
        super().setUp()

    def write_config(self, host, caps=None):
        path = super().write_config(host, caps)
        port = self.metrics_ports.setdefault(host, free_port())
        with open(path, 'a') as f:
            f.write(f'[metrics]\nport = {port}\nhost = 127.0.0.1\n')
        return path

    def wait_for(self, prometheus, expression, check, what):
        deadline = time.monotonic() + SEEN_S
        found = None
        while time.monotonic() < deadline:
            found = prometheus.query(expression)
            if check(found):
                return found
            time.sleep(0.5)
        self.fail(f"Prometheus never saw {what} within {SEEN_S} s: "
                  f"{expression} -> {found}; targets: "
                  f"{prometheus.targets_up()}")

    def test_prometheus_reads_a_migration_and_the_hosts(self):
        prometheus = Prometheus(
            self, self.dir,
            [f'127.0.0.1:{p}' for p in self.metrics_ports.values()])
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'mon-guest')
        migration = self.wait_for_end(self.api.live_migrate_instance(
            self.rpc.context, instance.uuid, dest))
        self.assertEqual('completed', migration.status, migration.error)

        ended = self.wait_for(
            prometheus, 'numamig_migrations_ended_total{outcome="completed"}',
            lambda r: sum(v for _, v in r) >= 1, 'the completed migration')
        self.assertEqual(1.0, sum(v for _, v in ended))
        # Every daemon's endpoint is scraped and answers.
        deadline = time.monotonic() + SEEN_S
        while set(prometheus.targets_up().values()) != {'up'} and \
                time.monotonic() < deadline:
            time.sleep(0.5)
        self.assertEqual({'up'}, set(prometheus.targets_up().values()))
        self.assertEqual(3, len(prometheus.targets_up()))
        self.wait_for(prometheus, 'numamig_metrics_collector_up == 0',
                      lambda r: r == [], 'every collector answering')
        # The duration histogram counted it.
        self.wait_for(prometheus, 'numamig_migration_duration_seconds_count',
                      lambda r: r and r[0][1] >= 1, 'its duration')
        # The conductor's view of the destination: the guest's two
        # dedicated pCPUs are pinned there; the agents' own views agree.
        pinned = 'sum by (host) (numamig_host_cell_pcpus{state="pinned"})'
        self.wait_for(
            prometheus, pinned,
            lambda r: {m['host']: v for m, v in r} == {source: 0.0,
                                                       dest: 2.0},
            'the guest pinned on its destination')
        agents = self.wait_for(
            prometheus, 'numamig_agent_guests',
            lambda r: sorted(v for _, v in r) == [0.0, 1.0],
            "the agents' guests")
        self.assertEqual(2, len(agents))
        # Each agent's reports, timed by method and outcome.
        self.wait_for(
            prometheus, 'numamig_agent_rpc_call_duration_seconds_count{'
                        'method="report_compute_node",outcome="answered"}',
            lambda r: len(r) == 2 and all(v >= 1 for _, v in r),
            "the agents' timed reports")
        # The conductor's calls to the destination, every worker's added
        # up whichever one is scraped.
        self.wait_for(
            prometheus, 'numamig_conductor_rpc_call_duration_seconds_count{'
                        'method="check_can_live_migrate_destination",'
                        'outcome="answered"}',
            lambda r: len(r) == 1 and r[0][1] >= 1,
            "the conductor's timed calls")
        # The agents audit what libvirt runs: nothing wrong, every kind
        # present.
        audit = self.wait_for(
            prometheus, 'numamig_agent_audit_findings',
            lambda r: len(r) == 2 * 6, "the agents' pin audits")
        self.assertEqual([0.0] * 12, [v for _, v in audit])
        self.assertEqual([], prometheus.query('numamig_leaked_claims'))
        # The shipped alert rules loaded, and none fires on a healthy
        # deployment.
        names = {r['name'] for r in prometheus.rules()}
        self.assertIn('NumamigHostReportStale', names)
        firing = [r['name'] for r in prometheus.rules()
                  if r.get('state') == 'firing']
        self.assertEqual([], firing)
        self.stop_daemons()


class AlertRulesTest(test_multiprocess.base.TestCase):

    def test_promtool_accepts_the_shipped_rules(self):
        reason = prometheus_missing()
        if reason:
            self.skipTest(reason)
        run = subprocess.run(['promtool', 'check', 'rules', ALERT_RULES],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(0, run.returncode, run.stdout + run.stderr)
        self.assertIn('SUCCESS', run.stdout)
