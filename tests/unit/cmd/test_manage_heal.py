"""numamig-manage heal claims: dry run, release, nothing to do."""

import json

from numamig.db import instances
from numamig.db import migrations
from tests.unit.cmd import cli_base


class ManageHealTestCase(cli_base.CLITestCase):

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
        self.assertEqual(0, self.run_cli('heal', 'claims')[0])
