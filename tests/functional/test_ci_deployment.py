"""numamig-ci --deployment FILE against a real multi-process deployment.

The module stands up what ``--local-libvirt 2`` stands up, through the
same code (numamig_ci.local_deployment): two libvirtd hosts on this
machine, a conductor and two compute agents as processes over the local
RabbitMQ, a SQLite database. It then describes that deployment in a
file, as an operator would, and runs the installed ``numamig-ci``
against it:

* the scenarios that exercise what --deployment does differently (CPU
  sets from the file, domains read and adopted through the file's URIs,
  a restart through them, QEMU threads found by the guest's UUID) pass,
  and every guest the harness created is gone afterwards;
* a file with a mistake is refused with a message naming it and exit 2
  or 3, and the deployment is exactly as before.

The state the tests compare is read around numamig-ci, not through it:
each host's domains through libvirt and the records, migrations and
reported usage from the database. The other real-tier scenarios run on
the same stack in test_ci_local_libvirt. If stestr spreads these tests
over two workers, each worker stands up its own deployment; names
unique to each run keep them apart.
"""

import datetime
import json
import os
import re
import subprocess
import sys
import time
import unittest

import fixtures
import libvirt
from lxml import etree
from oslo_utils import timeutils
import testscenarios

from numamig.db import api as db_api
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.db import migrations
from numamig_ci import libvirt_hosts
from numamig_ci import local_deployment
from tests import base
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios

SCENARIOS = ('pins-recomputed', 'collocation', 'iothreadpin',
             'qemu-affinity', 'persistence')
START_TIMEOUT_S = 90
# An agent computes its usage just before it reports: a report stamped
# this long after a moment reflects every record change made before it.
REPORT_MARGIN_S = 0.3
BAD_URI = 'qemu+unix:///system?socket=/nonexistent/libvirt-sock'
# The module's deployment, shared by its tests (see setUpModule).
_LOCAL = []


def _skip_reason():
    return (libvirt_hosts.missing_requirements()
            or rpc_fixture.rabbit_unreachable_reason())


def setUpModule():  # noqa: N802 (unittest API)
    if _skip_reason():
        return
    deployment = local_deployment.LocalDeployment(2)
    try:
        deployment.start()
        db = db_api.Database(deployment.db_url)
        _wait_for_reports(deployment, db, since=None)
    except BaseException:
        deployment.stop()
        raise
    unittest.addModuleCleanup(deployment.stop)
    unittest.addModuleCleanup(db.dispose)
    _LOCAL.extend([deployment, db])


def _wait_for_reports(deployment, db, since):
    """Return every host's first report at or after ``since``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        deployment.alive()
        reports = {r.host: r for r in
                   compute_nodes.get_all(db, reported_since=since)}
        if set(deployment.host_names) <= set(reports):
            return reports
        if time.monotonic() > deadline:
            raise AssertionError(f"hosts {deployment.host_names} did not "
                                 f"report within {START_TIMEOUT_S} s")
        time.sleep(0.2)


class DeploymentTestBase(base.TestCase):

    def setUp(self):
        super().setUp()
        reason = _skip_reason()
        if reason:
            print(f"SKIP numamig-ci --deployment: {reason}")
            self.skipTest(reason)
        self.deployment, self.db = _LOCAL
        self.out = self.useFixture(fixtures.TempDir()).path

    def run_ci(self, description, *args):
        """Run numamig-ci on ``description``; return (exit code, stdout)."""
        path = os.path.join(self.out, 'deployment.json')
        with open(path, 'w') as f:
            json.dump(description, f, indent=2)
        script = os.path.join(os.path.dirname(sys.executable), 'numamig-ci')
        run = subprocess.run([script, '--deployment', path, *args],
                             capture_output=True, text=True, timeout=300)
        return run.returncode, run.stdout + run.stderr

    def snapshot(self):
        """What a harness run could change: domains, records, usage.

        The usage is read from a report the agents made after this call
        began, so that it reflects every change made before it.
        """
        since = timeutils.utcnow(with_timezone=True) + \
            datetime.timedelta(seconds=REPORT_MARGIN_S)
        reports = _wait_for_reports(self.deployment, self.db, since)
        return {
            'domains': {name: _domains(uri) for name, uri in
                        self.deployment.uris().items()},
            'instances': sorted(i.uuid for i in instances.get_all(self.db)),
            'migrations': sorted(m.uuid for m in migrations.get_all(self.db)),
            'usage': {host: [(c.id, sorted(c.pinned_cpus), c.cpu_usage,
                              c.memory_usage_mb)
                             for c in report.topology.cells]
                      for host, report in sorted(reports.items())},
        }


def _domains(uri):
    conn = libvirt.open(uri)
    try:
        return sorted(d.UUIDString() for d in conn.listAllDomains())
    finally:
        conn.close()


class DeploymentRunTest(DeploymentTestBase):

    def test_scenarios_pass_and_leave_no_guest(self):
        before = self.snapshot()
        junit = os.path.join(self.out, 'ci.xml')
        argv = ['--junit', junit]
        for name in SCENARIOS:
            argv += ['--scenario', name]
        code, out = self.run_ci(self.deployment.describe(), *argv)
        self.assertEqual(0, code, out)
        self.assertIn(f'numamig-ci: {len(SCENARIOS)} passed, 0 failed, '
                      f'0 skipped', out)
        cases = etree.parse(junit).getroot().findall('testcase')
        self.assertEqual(sorted(f'numamig_ci.deployment.{n}'
                                for n in SCENARIOS),
                         sorted(f"{c.get('classname')}.{c.get('name')}"
                                for c in cases))
        # The guests really moved between this deployment's hosts: each
        # destination agent logged its guest's arrival...
        moved = re.findall(r"migration of ci-\w+-([0-9a-f]{8}) \S+ -> "
                           r"(\S+): completed", out)
        self.assertEqual(len(SCENARIOS), len(moved), out)
        for prefix, dest in moved:
            self.assertRegex(self.deployment.log_tail(dest, size=None),
                             rf"instance {prefix}[0-9a-f-]* arrived")
        # ...and none of them, nor their usage, outlived the run.
        after = self.snapshot()
        for key in ('domains', 'instances', 'usage'):
            self.assertEqual(before[key], after[key], f"{key}\n{out}")
        self.deployment.alive()


def _drop(host, key):
    def mutate(description):
        host_name = sorted(description['hosts'])[host]
        if key not in description['hosts'][host_name]:
            return None  # nothing to leave out (a one-pCPU machine)
        del description['hosts'][host_name][key]
        return host_name
    return mutate


def _set(host, key, value):
    def mutate(description):
        host_name = sorted(description['hosts'])[host]
        description['hosts'][host_name][key] = value
        return host_name
    return mutate


def _rename(host, key, new_key):
    def mutate(description):
        host_name = sorted(description['hosts'])[host]
        spec = description['hosts'][host_name]
        spec[new_key] = spec.pop(key)
        return host_name
    return mutate


class DeploymentFileRefusedTest(DeploymentTestBase):
    """Each row makes one mistake; ``expected`` names it ({host} is the
    host the mistake is in)."""

    scenarios = [
        ('unknown-key', {
            'mutate': _rename(0, 'libvirt_uri', 'libvirt_url'), 'code': 2,
            'expected': "hosts.{host}.libvirt_url is not a setting "
                        "numamig-ci knows (did you mean libvirt_uri?)"}),
        ('missing-host-set', {
            'mutate': _drop(1, 'cpu_dedicated_set'), 'code': 2,
            'expected': "hosts.{host}.cpu_dedicated_set is missing"}),
        ('unreachable-uri', {
            'mutate': _set(1, 'libvirt_uri', BAD_URI), 'code': 3,
            'expected': f"Hypervisor on {{host}} failed to connect to "
                        f"{BAD_URI}"}),
        ('sets-not-the-hosts', {
            'mutate': _drop(0, 'cpu_shared_set'), 'code': 2,
            'expected': "hosts.{host}.cpu_shared_set is none but the "
                        "host reports "}),
    ]

    def test_refused_and_deployment_untouched(self):
        description = self.deployment.describe()
        host = self.mutate(description)
        if host is None:
            self.skipTest("one pCPU: no host has a shared set to leave out")
        before = self.snapshot()
        code, out = self.run_ci(description)
        self.assertEqual(self.code, code, out)
        self.assertIn(self.expected.format(host=host), out)
        self.assertNotIn('passed', out)
        self.assertEqual(before, self.snapshot())
        self.deployment.alive()
