"""Tests of the claims file the agent publishes to its migration guard."""

import json
import os
import stat

from numamig.virt.libvirt import guard_claims
from tests.unit.virt.libvirt import guard_base as gb
from tests.unit.virt.libvirt.guard_base import GUEST
from tests.unit.virt.libvirt.guard_base import NOW


class ClaimsFileTest(gb.GuardTestCase):

    def test_round_trip(self):
        self.publish()
        host, placements = guard_claims.read(self.claims_file, 60, now=NOW)
        self.assertEqual('dst', host)
        self.assertEqual(gb.claim().as_dict(), placements[GUEST].as_dict())
        self.assertEqual({0, 1}, placements[GUEST].host_nodes)

    def test_distances_round_trip_and_only_where_there_are_some(self):
        table = {0: {0: 10, 1: 12}, 1: {0: 13, 1: 10}}
        self.publish({GUEST: gb.claim(cell_distances=table),
                      'other': gb.claim()})
        with open(self.claims_file) as f:
            document = json.load(f)
        # An entry without distances is as a guard before them wrote it.
        self.assertNotIn('cell_distances', document['claims']['other'])
        _host, placements = guard_claims.read(self.claims_file, 60, now=NOW)
        self.assertEqual(table, placements[GUEST].cell_distances)
        self.assertEqual({}, placements['other'].cell_distances)

    def test_mode_is_0640_whatever_the_umask(self):
        old = os.umask(0)
        self.addCleanup(os.umask, old)
        self.publish()
        self.assertEqual(0o640, stat.S_IMODE(os.stat(self.claims_file)
                                             .st_mode))

    def test_directory_is_created_0750(self):
        old = os.umask(0o022)
        self.addCleanup(os.umask, old)
        self.claims_file = os.path.join(self.directory, 'state', 'c.json')
        self.publish()
        self.assertEqual(0o750, stat.S_IMODE(os.stat(os.path.dirname(
            self.claims_file)).st_mode))
        self.assertTrue(os.path.isfile(self.claims_file))

    def test_a_failed_write_keeps_the_old_file(self):
        self.publish()
        before = open(self.claims_file).read()
        bad = gb.claim()
        bad.cpu_pins = {0: object()}  # not JSON: the write fails half way
        self.assertRaises(TypeError, self.publish, {GUEST: bad})
        self.assertEqual(before, open(self.claims_file).read())
        self.assertEqual(['claims.json'], os.listdir(self.directory))

    def test_fresh_until_max_age(self):
        self.publish(written_at=NOW - 60)
        guard_claims.read(self.claims_file, 60, now=NOW)
        self.assertRaises(guard_claims.ClaimsUnavailable, guard_claims.read,
                          self.claims_file, 59.5, now=NOW)

    def test_oversized_file_is_not_read(self):
        with open(self.claims_file, 'w') as f:
            f.truncate(guard_claims.MAX_BYTES + 1)
        self.assertRaisesMessage(guard_claims.ClaimsUnavailable,
                                 'more than the', guard_claims.read,
                                 self.claims_file, 60, NOW)

    def test_unreadable_file(self):
        os.mkdir(self.claims_file)
        self.assertRaisesMessage(guard_claims.ClaimsUnavailable,
                                 'cannot be read', guard_claims.read,
                                 self.claims_file, 60, NOW)
