"""numamig-manage heal claims: dry run, release, nothing to do."""

import json
from unittest import mock

from numamig.conductor import maintenance
from numamig.db import instances
from numamig.db import migrations
from tests.unit.cmd import cli_base


class ManageHealTestCase(cli_base.CLITestCase):
    """The conductor's heal (on the test database) answers the CLI."""

    def setUp(self):
        super().setUp()
        self.conductor = mock.Mock(db=self.db, check_timeout=1)
        self.api.heal_claims.side_effect = \
            lambda ctxt, dry_run: maintenance.heal_claims(
                self.conductor, ctxt, dry_run=dry_run)

    def leak(self, status='error'):
        guest = self.add_instance('src')
        mig = migrations.create(self.db, cli_base.make_migration(
            guest.uuid, dest_host='dst'))
        instances.set_migration_context(
            self.db, guest.uuid, cli_base.make_context(guest, mig.uuid))
        if status != 'accepted':
            migrations.set_status(self.db, mig.uuid, status)
        return guest

    def context_of(self, guest):
        return instances.get(self.db, guest.uuid).instance.migration_context

    def test_nothing_to_heal(self):
        self.leak(status='accepted')
        code, out, _ = self.run_cli('heal', 'claims')
        self.assertEqual((0, "No leaked claim: nothing to heal.\n"),
                         (code, out))

    def test_dry_run_changes_nothing(self):
        guest = self.leak()
        code, out, _ = self.run_cli('heal', 'claims', '--dry-run')
        self.assertEqual(3, code)
        self.assertIn('Dry run: nothing released', out)
        self.assertIsNotNone(self.context_of(guest))

    def test_heal_releases_then_nothing_left(self):
        guest = self.leak()
        kept = self.leak(status='accepted')
        code, out, _ = self.run_cli('heal', 'claims', '--format', 'json')
        self.assertEqual(4, code)
        self.assertEqual([guest.uuid], [f['instance_uuids'][0] for f in
                                        json.loads(out)['released']])
        self.assertIsNone(self.context_of(guest))
        self.assertIsNotNone(self.context_of(kept))
        # The scheduler's reservation and the agent's claim go too.
        self.conductor.cache.release.assert_called_once_with('dst',
                                                             guest.uuid)
        drop = self.conductor.compute_api.drop_move_claim_at_destination
        self.assertEqual('dst', drop.call_args[0][2].dest_host)
        self.assertEqual(0, self.run_cli('heal', 'claims')[0])

    def test_capped_conductor_heals_in_the_database(self):
        self.api.can_operate.return_value = False
        guest = self.leak()
        self.assertEqual(4, self.run_cli('heal', 'claims')[0])
        self.assertIsNone(self.context_of(guest))
        self.api.heal_claims.assert_not_called()


class ManageHealUsageTestCase(cli_base.CLITestCase):
    """An agent's report holding pins no record owns."""

    def setUp(self):
        super().setUp()
        self.api.heal_claims.return_value = {'found': [], 'released': [],
                                             'skipped': []}
        self.guest = self.add_instance('src')
        clean = self.report_as_recorded()
        # Host cell 1's dedicated pCPUs, as an unrecorded claim holds
        # them.
        stray_topology = clean.topology.obj_clone()
        stray_topology.cells[1].pinned_cpus |= {6, 7}
        self.add_report('src', topology=stray_topology,
                        fingerprint=clean.fingerprint)
        self.api.host_refresh_usage.side_effect = \
            lambda ctxt, host: self.report_as_recorded(host)

    def test_dry_run_reports_and_changes_nothing(self):
        code, out, _ = self.run_cli('heal', 'claims', '--dry-run',
                                    '--format', 'json')
        self.assertEqual(3, code)
        (group,) = json.loads(out)['groups']
        self.assertEqual('reported-usage-no-record-owns', group['kind'])
        self.assertIn('pCPUs 6-7 reported pinned',
                      group['findings'][0]['detail'])
        self.api.host_refresh_usage.assert_not_called()

    def test_heal_has_the_agent_recompute(self):
        code, out, _ = self.run_cli('heal', 'claims')
        self.assertEqual(4, code, out)
        self.assertIn('usage an agent reports that no record owns (1)', out)
        self.assertIn('Healed 1 of 1.', out)
        self.api.host_refresh_usage.assert_called_once_with(mock.ANY, 'src')
        self.assertEqual((0, "Audited src: nothing found.\n"),
                         self._audit())

    def test_a_host_that_cannot_recompute_is_not_healed(self):
        from numamig import exception
        self.api.host_refresh_usage.side_effect = exception.Invalid(
            reason="src is older than compute API 1.4")
        code, out, _ = self.run_cli('heal', 'claims')
        self.assertEqual(3, code, out)
        self.assertIn('not healed: src: host cell 1: pCPUs 6-7', out)
        self.assertIn('older than compute API 1.4', out)

    def _audit(self):
        self.api.can_operate.return_value = False
        self.api.get_domain_xml.side_effect = \
            lambda ctxt, uuid: cli_base.domain_xml(self.guest)
        code, out, _ = self.run_cli('audit', 'pins')
        return code, out
