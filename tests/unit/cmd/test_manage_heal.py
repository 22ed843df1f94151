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
