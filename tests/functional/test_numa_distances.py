"""Nearest first end to end on the embedded tier, in process and over RabbitMQ.

host-b has four NUMA cells whose distance table pairs them across the id
order (0 with 2, 1 with 3 at 12; 21 otherwise), so the order alone would
split a guest of two cells over cells 0 and 1, 21 apart. The dry run
names the distance cost of the cells it would take, the migration puts
the guest's memory on the close pair (read back from the domain XML the
destination holds), and host show's table is the host's own.
"""

import os
import re

import fixtures
import testscenarios

from numamig import embedded
from numamig_ci import domain
from tests.functional import test_live_migration as lm

load_tests = testscenarios.load_tests_apply_scenarios

HOSTS_DIR = os.path.join(os.path.dirname(embedded.__file__), os.pardir,
                         'etc', 'numamig', 'hosts')
TWO_CELLS = dict(lm.DEDICATED, **{'hw:numa_nodes': '2'})


def crossed_pairs_caps(directory):
    """numa-4cell.xml with the table 10 / 12 (0-2, 1-3) / 21."""
    with open(os.path.join(HOSTS_DIR, 'numa-4cell.xml')) as handle:
        text = handle.read()
    cells = re.split(r"(<cell id='\d+'>)", text)
    out = [cells[0]]
    for opening, body in zip(cells[1::2], cells[2::2], strict=True):
        cell = int(re.search(r"\d+", opening).group())

        def value(match, cell=cell):
            other = int(match.group(1))
            near = 10 if other == cell else 12 if other % 2 == cell % 2 \
                else 21
            return f"<sibling id='{other}' value='{near}'/>"
        out += [opening, re.sub(r"<sibling id='(\d+)' value='\d+'/>", value,
                                body)]
    path = os.path.join(directory, 'numa-4cell-crossed.xml')
    with open(path, 'w') as handle:
        handle.write(''.join(out))
    return path


class NearestFirstTest(lm.LiveMigrationTestCase):

    def hosts(self):
        caps = crossed_pairs_caps(self.useFixture(fixtures.TempDir()).path)
        return (lm.host('host-a'), embedded.HostDefinition('host-b', caps))

    def test_a_two_cell_guest_lands_on_the_close_pair(self):
        mover = self.create('host-a', vcpus=4, specs=TWO_CELLS)
        # Told the distance between its host cells on host-a (21 there).
        self.assertEqual({0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}},
                         domain.cell_distances(self.xml('host-a', mover)))
        answer = self.api.live_migration_dry_run(self.ctxt, mover.uuid,
                                                 'host-b')
        self.assertEqual('host-b', answer['dest_host'])
        self.assertEqual([0, 2], sorted(
            c.host_cell for c in answer['numa_topology'].cells))
        self.assertEqual(12, answer['distance']['cost'])
        self.assertEqual(0, answer['distance']['excess'])
        self.assertIn('host cells 0, 2: distance cost 12 (the nearest set '
                      'of host cells it fits', answer['distance']['reason'])
        migration = self.migrate(mover, 'host-b')
        self.assertEqual('completed', migration.status, migration.error)
        _pins, nodes, _pages = lm.xml_placement(self.xml('host-b', mover))
        self.assertEqual({'0', '2'}, set(nodes.values()))
        # The destination's distances crossed the wire (NUMAMigrateInfo)
        # into the guest's XML there: the test driver's emulated move
        # defines and starts it anew, so they are its live ones too.
        self.assertEqual({0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}},
                         domain.cell_distances(self.xml('host-b', mover)))
        self.assertEqual([0, 2], sorted(
            c.host_cell for c in self.record(mover).numa_topology.cells))
        # The table as the agent reported it, and the scheduler holds it.
        state = self.dep.conductor.manager.cache.get('host-b')
        self.assertEqual({0: 10, 1: 21, 2: 12, 3: 21},
                         state.topology.cells[0].distances)
