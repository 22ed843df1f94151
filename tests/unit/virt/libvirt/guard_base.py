"""What the migration guard's tests share: a guest, its claim, the files.

The guest is a numamig guest of 2 cells (4 vCPUs, 2 MiB pages) pinned on
its source to pCPUs 2,3 / 10,11; the destination's claim puts it on host
cells 1 and 0 with pCPUs 6,7 / 14,15::

    source XML       vcpupin 0-3 -> 2,3,10,11   memnode 0->0, 1->1
    claim on dst     vcpupin 0-3 -> 6,7,14,15   memnode 0->1, 1->0
"""

import os

import fixtures

from numamig.virt.libvirt import guard_claims
from tests import base
from tests import libvirt_settings

DOMAINS = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                       'fixtures', 'domains')
GUEST = 'c0a1e000-0000-4000-8000-000000000001'
MIGRATION = '5a1e0000-aaaa-4bbb-8ccc-00000000c001'
NOW = 1_800_000_000.0


def source_xml():
    with open(os.path.join(DOMAINS, 'numamig-pinned-2cell.xml')) as f:
        return f.read()


def claim(**overrides):
    """The destination's ClaimPlacement of the guest."""
    values = {'cpu_pins': {0: [6], 1: [7], 2: [14], 3: [15]},
              'cell_pins': {0: [1], 1: [0]}, 'emulator_pins': [4, 12],
              'sched_vcpus': [1], 'sched_priority': 1,
              'pagesizes': {0: 2048, 1: 2048}, 'floating_cpus': None}
    values.update(overrides)
    return guard_claims.ClaimPlacement(MIGRATION, **values)


class GuardTestCase(base.TestCase):
    """A temporary directory with the claims file path and settings."""

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.claims_file = os.path.join(self.directory, 'claims.json')
        self.settings = libvirt_settings.guard(
            hook_path=os.path.join(self.directory, 'hooks', 'qemu.d',
                                   'numamig'),
            claims_file=self.claims_file, max_age_s=60,
            log_file=os.path.join(self.directory, 'guard.log'))

    def publish(self, placements=None, written_at=NOW):
        guard_claims.write(self.claims_file, 'dst',
                           {GUEST: claim()} if placements is None
                           else placements, now=written_at)
