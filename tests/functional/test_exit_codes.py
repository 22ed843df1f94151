"""Every numamig-manage and numamig-status action's documented exit codes.

Against a real deployment: a conductor and two compute agents as
processes over RabbitMQ and PostgreSQL (test_multiprocess's). Each row
runs the command as an operator would, checks the exit code its help
documents and that an error is one line (no traceback); for a refusal
("nothing changed") the whole database is dumped before and after and
must be the same.
"""

import os
import subprocess
import sys

import sqlalchemy as sa

from numamig.db import models
from tests.functional import test_multiprocess

UNKNOWN_UUID = '7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11'
BIN = os.path.dirname(sys.executable)


# The agents' periodic reports rewrite these rows on their own meanwhile.
_LIVE_TABLES = ('compute_nodes', 'sequences')


def _rows(db):
    """Every row of every numamig table a command could change."""
    dump = {}
    with db.reader() as session:
        for table in models.Base.metadata.sorted_tables:
            if table.name in _LIVE_TABLES:
                continue
            dump[table.name] = sorted(
                repr(tuple(row)) for row in session.execute(
                    sa.select(table)))
    return dump


class ExitCodeContractTest(test_multiprocess.MultiProcessTestBase):

    def run_tool(self, tool, *argv):
        config = self.write_config('operator')
        return subprocess.run(
            [os.path.join(BIN, tool), '--config-file', config, *argv],
            capture_output=True, text=True, timeout=120)

    def assert_code(self, code, tool, *argv, changes_nothing=False):
        before = _rows(self.db.db) if changes_nothing else None
        run = self.run_tool(tool, *argv)
        where = f"{tool} {' '.join(argv)}\n{run.stdout}{run.stderr}"
        self.assertEqual(code, run.returncode, where)
        self.assertNotIn('Traceback', run.stdout + run.stderr, where)
        if run.returncode not in (0, 3, 4) and tool == 'numamig-manage':
            errors = [line for line in run.stderr.splitlines()
                      if line.startswith('error: ')]
            self.assertEqual(1, len(errors), where)
        if changes_nothing:
            after = _rows(self.db.db)
            changed = {name: (sorted(set(before[name]) - set(rows)),
                              sorted(set(rows) - set(before[name])))
                       for name, rows in after.items()
                       if rows != before[name]}
            self.assertEqual({}, changed, where)
        return run

    def test_the_contract(self):
        source, dest = sorted(self.hosts)
        guest = self.create(source, 'contract-guest')
        bad = '--property', 'hw:cpu_polcy=dedicated'
        table = [
            # (exit code, changes nothing, argv)
            (0, True, ('host', 'list')),
            (0, True, ('host', 'show', source)),
            (127, True, ('host', 'show', 'nope')),
            (127, True, ('host', 'delete', 'nope')),
            (127, True, ('host', 'delete', source)),  # still reporting
            (127, True, ('host', 'disable', 'nope', '--reason', 'x')),
            (127, True, ('host', 'enable', 'nope')),
            (127, True, ('host', 'drain', 'nope', '--dry-run')),
            (127, True, ('host', 'drain', source, '--dry-run', '--to',
                         'nope')),
            (127, True, ('host', 'drain', source, '--dry-run', '--to',
                         source)),
            (0, True, ('host', 'drain', source, '--dry-run')),
            (0, False, ('host', 'disable', dest, '--reason', 'contract')),
            (1, True, ('host', 'drain', source, '--dry-run')),
            # Refused up front: nothing recorded, the host left enabled.
            (1, True, ('host', 'drain', source)),
            (127, True, ('host', 'drain', 'show', source)),
            (127, True, ('host', 'drain', 'abort', source)),
            (127, True, ('host', 'drain', source, '--parallel', '0')),
            (127, True, ('host', 'drain', 'halt', source)),
            (0, True, ('host', 'defragment', '--dry-run', '--for',
                       'vcpus=2,memory_mb=512,hw:cpu_policy=dedicated')),
            (127, True, ('host', 'defragment', '--dry-run', '--for',
                         'vcpus=2,memory_mb=512,hw:numa_nodes=3')),
            (127, True, ('host', 'defragment', '--execute', '--for',
                         'vcpus=2,memory_mb=512')),
            (1, True, ('migration', 'start', guest.uuid, '--host', dest)),
            (0, False, ('host', 'enable', dest)),
            (0, True, ('instance', 'list')),
            (127, True, ('instance', 'list', '--host', 'nope')),
            (0, True, ('instance', 'show', guest.uuid)),
            (127, True, ('instance', 'show', UNKNOWN_UUID)),
            (127, True, ('instance', 'show', 'not-a-uuid')),
            (127, True, ('instance', 'create', '--host', source, '--vcpus',
                         '2', '--memory', '1024', *bad)),
            (127, True, ('instance', 'create', '--host', source, '--vcpus',
                         '100000000', '--memory', '1024')),
            (127, True, ('instance', 'memory', 'set', UNKNOWN_UUID,
                         '--host-node', '0', '--size', '10')),
            # The contract guest has no virtio-mem device.
            (127, True, ('instance', 'memory', 'set', guest.uuid,
                         '--host-node', '0', '--size', '10')),
            (127, True, ('host', 'reclaim', 'nope', '--node', '0',
                         '--size', '10')),
            (127, True, ('host', 'reclaim', source, '--node', '0',
                         '--size', '10', '--dry-run')),
            (127, True, ('host', 'reclaim', source, '--node', '0',
                         '--size', '0')),
            (0, True, ('migration', 'list')),
            (127, True, ('migration', 'list', '--status', 'nope')),
            (127, True, ('migration', 'show', UNKNOWN_UUID)),
            (127, True, ('migration', 'start', UNKNOWN_UUID)),
            (127, True, ('migration', 'start', guest.uuid, '--host',
                         'nope')),
            (127, True, ('migration', 'abort', UNKNOWN_UUID)),
            (127, True, ('migration', 'force-complete', UNKNOWN_UUID)),
            (0, True, ('migration', 'start', guest.uuid, '--host', dest,
                       '--dry-run')),
            (0, True, ('audit', 'pins')),
            (0, True, ('heal', 'claims', '--dry-run')),
            (0, True, ('db', 'version')),
            (127, True, ('db', 'sync', '9999')),
            (2, True, ('numa', 'fit', '--host-topology', '/nonexistent',
                       '--request', '/nonexistent')),
            (127, True, ('no-such-category',)),
        ]
        for code, nothing, argv in table:
            self.assert_code(code, 'numamig-manage', *argv,
                             changes_nothing=nothing)
        self.assert_code(0, 'numamig-status', 'upgrade', 'check',
                         changes_nothing=True)
        # And the change that goes through: accepted, then completed.
        self.assert_code(0, 'numamig-manage', 'migration', 'start',
                         guest.uuid, '--host', dest, '--wait',
                         '--wait-timeout', '60')
        # A drain that goes through moves the guest back, then shows.
        self.assert_code(0, 'numamig-manage', 'host', 'drain', dest,
                         '--wait', '--timeout', '90')
        run = self.assert_code(0, 'numamig-manage', 'host', 'drain', 'show',
                               dest, '--format', 'json')
        self.assertIn('"status": "completed"', run.stdout)
        self.assert_code(0, 'numamig-manage', 'host', 'enable', dest)
        # A reclaim no guest can give any of (devices with nothing
        # plugged): refused in one line, nothing recorded or asked.
        self.assert_code(0, 'numamig-manage', 'instance', 'create',
                         '--host', dest, '--vcpus', '2', '--memory', '1024',
                         '--property', 'hw:numa_nodes=2', '--property',
                         'hw:virtio_mem_size=512', '--property',
                         'hw:virtio_mem_requested=0')
        for extra in ((), ('--exact',), ('--dry-run',)):
            run = self.assert_code(127, 'numamig-manage', 'host', 'reclaim',
                                   dest, '--node', '0', '--size', '128',
                                   *extra, changes_nothing=True)
            self.assertIn(f'the guests on {dest} can give none of the 128 '
                          f'MiB asked on host node 0', run.stderr)
        self.stop_daemons()
