"""An agent's report holds pins no record owns: audit finds, heal fixes.

Over RabbitMQ and PostgreSQL with a conductor and two agents as
processes (test_multiprocess's). The test plays a conductor that dies
after the destination answered: it asks the source and the destination
as the conductor would, for a migration it never records. The
destination holds the claim in memory and reports its pCPUs pinned. Its
periodic recompute (which would drop the claim: its migration is not
recorded) is set to an hour, so only ``heal claims`` can fix it.
"""

import json
import os
import subprocess
import sys
import time

from oslo_utils import uuidutils

from numamig import objects
from numamig.db import compute_nodes
from tests.functional import test_multiprocess

BIN = os.path.dirname(sys.executable)


class ReportedUsageTest(test_multiprocess.MultiProcessTestBase):

    def config_files(self, host, caps=None):
        path = os.path.join(self.dir, f'{host}-usage.conf')
        with open(path, 'w') as f:
            f.write('[compute]\nupdate_resources_interval = 3600\n')
        return [self.write_config(host, caps), path]

    def manage(self, *argv):
        return subprocess.run(
            [os.path.join(BIN, 'numamig-manage'), '--config-file',
             self.write_config('operator'), *argv, '--format', 'json'],
            capture_output=True, text=True, timeout=120)

    def _unrecorded_claim(self, instance, dest):
        """The destination's claim for a migration no record holds."""
        compute = self.names.compute_api(self.rpc.transport)
        migration = objects.Migration(
            uuid=uuidutils.generate_uuid(), instance_uuid=instance.uuid,
            source_host=instance.host, dest_host=dest, status='accepted')
        source_data = compute.check_can_live_migrate_source(
            self.rpc.context, instance, objects.LiveMigrateData(
                instance_uuid=instance.uuid, source_host=instance.host,
                dest_host=dest, migration_uuid=migration.uuid,
                dst_supports_numa_live_migration=True), timeout=30)
        answer = compute.check_can_live_migrate_destination(
            self.rpc.context, instance, dest, migration, None, timeout=30,
            source_data=source_data)
        return set().union(*(c.cpu_pinning.values() for c in
                             answer.migration_context.new_numa_topology
                             .cells))

    def _wait_for_report_pinning(self, host, pcpus, deadline_s=30):
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            report = compute_nodes.get(self.db.db, host)
            if pcpus <= set().union(*(c.pinned_cpus for c in
                                      report.topology.cells)):
                return
            time.sleep(0.5)
        self.fail(f"{host} did not report pCPUs {pcpus} within "
                  f"{deadline_s} s")

    def _usage_findings(self, run):
        groups = json.loads(run.stdout)['groups']
        return [f for g in groups if g['kind'].endswith('usage-no-record-'
                                                         'owns')
                for f in g['findings']]

    def test_audit_reports_a_pin_no_record_owns_and_heal_drops_it(self):
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'usage-guest')
        self.assertEqual(0, self.manage('audit', 'pins').returncode)
        pcpus = self._unrecorded_claim(instance, dest)
        self._wait_for_report_pinning(dest, pcpus)

        audit = self.manage('audit', 'pins')
        self.assertEqual(3, audit.returncode, audit.stdout + audit.stderr)
        (finding,) = self._usage_findings(audit)
        self.assertEqual(dest, finding['host'])
        self.assertIn('reported pinned, no guest or claim recorded here '
                      'holds them', finding['detail'])

        dry = self.manage('heal', 'claims', '--dry-run')
        self.assertEqual(3, dry.returncode, dry.stdout + dry.stderr)
        heal = self.manage('heal', 'claims')
        self.assertEqual(4, heal.returncode, heal.stdout + heal.stderr)
        healed = json.loads(heal.stdout)
        self.assertEqual([], healed['skipped'])
        self.assertIn(finding, healed['released'])

        after = self.manage('audit', 'pins')
        self.assertEqual(0, after.returncode, after.stdout + after.stderr)
        self.assertIn('released the claim of migration',
                      self.log_of(dest))
        self.stop_daemons()
