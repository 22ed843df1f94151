"""Every numamig-manage and numamig-status action's documented exit codes.

Against a real deployment: a conductor and two compute agents as
processes over RabbitMQ and PostgreSQL (test_multiprocess's). Each row
runs the command as an operator would, checks the exit code its help
documents and that an error is one line (no traceback); for a refusal
("nothing changed") the whole database is dumped before and after and
must be the same. Wrong input first, then the changes that go through,
then each daemon stopped in turn (a compute agent, then the conductor):
one deployment serves it all. Rows that change nothing run a few at a
time, the database dumped around the batch.
"""

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

from oslo_utils import uuidutils
import sqlalchemy as sa

from numamig import objects
from numamig.db import models
from tests.functional import test_multiprocess

UNKNOWN_UUID = '7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11'
BIN = os.path.dirname(sys.executable)


# The agents' periodic reports rewrite these rows on their own meanwhile,
# and the conductor's workers the guests' standing live-migratable
# answers from them.
_LIVE_TABLES = ('compute_nodes', 'sequences', 'instance_live_migratable')


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


# Seconds after which the conductor counts a silent agent down (the
# agents report every 2 s), and that numamig-manage waits for a ping.
DOWN_TIME = 10
PING_TIMEOUT = 1
# Commands of one batch run at once (each mostly waits: imports, RPC).
BATCH = 3
# What a command may take with a daemon stopped: before, conductor-bound
# commands waited the whole call timeout (60 s; 510 s for memory).
STOPPED_DAEMON_BOUND_S = 20
VMEM_SPECS = {'hw:numa_nodes': '2', 'hw:virtio_mem_size': '512',
              'hw:virtio_mem_requested': '256'}
FOR = 'vcpus=2,memory_mb=512,hw:cpu_policy=dedicated'


class ExitCodeContractTest(test_multiprocess.MultiProcessTestBase):

    def config_files(self, host, caps=None):
        """Every daemon's and the operator's file, then the contract's
        own: a silent agent counts down sooner, a ping waits less."""
        extra = os.path.join(self.dir, 'contract.conf')
        with open(extra, 'w') as f:
            f.write(f"[DEFAULT]\nservice_down_time = {DOWN_TIME}\n"
                    f"cli_conductor_timeout = {PING_TIMEOUT}\n")
        return super().config_files(host, caps) + [extra]

    def run_tool(self, tool, *argv):
        if not hasattr(self, '_operator_config'):
            # Written once: batches run commands from several threads.
            self._operator_config = []
            for path in self.config_files('operator'):
                self._operator_config += ['--config-file', path]
        config = self._operator_config
        began = time.monotonic()
        run = subprocess.run([os.path.join(BIN, tool), *config, *argv],
                             capture_output=True, text=True, timeout=120)
        run.took = time.monotonic() - began
        return run

    def check_run(self, code, tool, argv, run):
        where = f"{tool} {' '.join(argv)}\n{run.stdout}{run.stderr}"
        self.assertEqual(code, run.returncode, where)
        self.assertNotIn('Traceback', run.stdout + run.stderr, where)
        if run.returncode not in (0, 3, 4) and (
                tool == 'numamig-manage' or run.returncode == 255):
            errors = [line for line in run.stderr.splitlines()
                      if line.startswith('error: ')]
            self.assertEqual(1, len(errors), where)
            self.assertEqual(errors, run.stderr.splitlines(), where)
        return where

    def assert_code(self, code, tool, *argv, changes_nothing=False):
        before = _rows(self.db.db) if changes_nothing else None
        run = self.run_tool(tool, *argv)
        where = self.check_run(code, tool, argv, run)
        if changes_nothing:
            self.assert_unchanged(before, where)
        return run

    def assert_unchanged(self, before, where):
        after = _rows(self.db.db)
        changed = {name: (sorted(set(before[name]) - set(rows)),
                          sorted(set(rows) - set(before[name])))
                   for name, rows in after.items()
                   if rows != before[name]}
        self.assertEqual({}, changed, where)

    def assert_refusals(self, rows, tool='numamig-manage', bound_s=None):
        """Run rows of (exit code, argv) that change nothing, BATCH at a
        time; each within ``bound_s`` seconds when given. Returns the
        runs by argv."""
        before = _rows(self.db.db)
        with concurrent.futures.ThreadPoolExecutor(BATCH) as pool:
            runs = list(pool.map(lambda row: self.run_tool(tool, *row[1]),
                                 rows))
        for (code, argv), run in zip(rows, runs, strict=True):
            where = self.check_run(code, tool, argv, run)
            if bound_s is not None:
                self.assertLess(run.took, bound_s, where)
        self.assert_unchanged(before, '\n'.join(
            ' '.join(argv) for _, argv in rows))
        return {argv: run for (_, argv), run in zip(rows, runs,
                                                       strict=True)}

    def stop(self, host):
        """SIGTERM one daemon; it exits 0 after a graceful stop."""
        (proc,) = [p for h, p in self.procs if h == host]
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, proc.wait(timeout=30),
                         self.log_of(host)[-3000:])

    def wait_until_down(self, host):
        """Until numamig counts ``host`` down (its agent stopped)."""
        deadline = time.monotonic() + DOWN_TIME + 30
        while time.monotonic() < deadline:
            run = self.run_tool('numamig-manage', 'host', 'show', host,
                                '--format', 'json')
            if json.loads(run.stdout)['state'] == 'down':
                return
            time.sleep(1)
        self.fail(f"{host} still up {DOWN_TIME + 30} s after its agent "
                  f"stopped")

    def test_the_contract(self):
        source, dest = sorted(self.hosts)
        guest = self.create(source, 'contract-guest')
        vmem = self.api.instance_create(
            self.rpc.context, objects.Instance(
                uuid=uuidutils.generate_uuid(), name='contract-vmem',
                project_id='demo', vcpus=2, memory_mb=1024,
                extra_specs=dict(VMEM_SPECS)), source)
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
            (0, True, ('instance', 'show', 'contract-guest', '--no-xml')),
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
            (0, True, ('host', 'reclaim', source, '--node', '0',
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
        # Its name is the source's libvirt domain's: the agent refuses
        # before claiming, and the agent's reason crosses the broker
        # (before, libvirt's refusal was hidden behind a refused
        # clean-up call).
        run = self.assert_code(1, 'numamig-manage', 'instance', 'create',
                               '--host', source, '--vcpus', '1', '--memory',
                               '256', '--name', 'contract-guest',
                               changes_nothing=True)
        self.assertIn(f"{source}: a guest named 'contract-guest' runs on "
                      f"{source} already (instance {guest.uuid})",
                      run.stderr)
        self.assertNotIn('pre-check', run.stderr)
        self.wrong_input(source, vmem)
        self.memory_refused_by_the_hypervisor(source, vmem)
        self.assert_code(0, 'numamig-status', 'upgrade', 'check',
                         changes_nothing=True)
        # And the change that goes through: accepted, then completed.
        run = self.assert_code(0, 'numamig-manage', 'migration', 'start',
                               guest.uuid, '--host', dest, '--wait',
                               '--wait-timeout', '60', '--format', 'json')
        migration = json.loads(run.stdout)['uuid']
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
        self.assert_refusals([
            # Nothing to resume: it completed; a repeat is safe.
            (0, ('migration', 'resume', migration)),
            (127, ('host', 'drain', 'abort', dest)),  # it ended
        ])
        self.agent_stopped(source, dest, guest, vmem)
        self.conductor_stopped(source, dest, guest, vmem)
        self.stop_daemons()

    def wrong_input(self, source, vmem):
        """Every action of host drain/defragment/reclaim, instance memory,
        migration resume and numamig-status, given what it refuses."""
        self.assert_refusals([
            (127, ('host', 'drain')),
            (127, ('host', 'drain', 'show')),
            (127, ('host', 'drain', 'abort')),
            (127, ('host', 'drain', source, '--abort-running')),
            (127, ('host', 'drain', 'show', source, '--wait')),
            (127, ('host', 'drain', 'abort', source, '--dry-run')),
            (127, ('host', 'drain', source, '--keep-free-nodes', '-1')),
            (127, ('host', 'drain', source, '--timeout', '5')),
            (127, ('host', 'drain', source, '--wait', '--timeout', '0')),
            (127, ('host', 'drain', source, '--dry-run', '--wait')),
            (127, ('host', 'drain', source, '--dry-run', '--to', ',x')),
            (127, ('host', 'drain', source, source)),
            (127, ('host', 'defragment')),
            (127, ('host', 'defragment', '--dry-run', '--execute', '--for',
                   FOR)),
            (127, ('host', 'defragment', '--dry-run', '--for', 'vcpus=2')),
            (127, ('host', 'defragment', '--dry-run', '--for', FOR,
                   '--max-moves', '9')),
            (127, ('host', 'defragment', '--dry-run', '--for', FOR,
                   '--hosts', 'nope')),
            (127, ('host', 'defragment', '--execute', '--for', FOR,
                   '--parallel', '0')),
            (127, ('host', 'defragment', '--dry-run', '--for', FOR,
                   '--wait')),
            (127, ('host', 'reclaim', source)),
            # Before: 0 (dry run) and 1, the memory taken from nodes 0, 1.
            (127, ('host', 'reclaim', source, '--node', '5', '--size', '10',
                   '--dry-run')),
            (127, ('host', 'reclaim', source, '--node', '5', '--size',
                   '10')),
            (127, ('host', 'reclaim', source, '--node', '1024', '--size',
                   '10')),
            (127, ('instance', 'memory', 'set', vmem.uuid, '--host-node',
                   '7', '--size', '128')),
            (127, ('instance', 'memory', 'set', vmem.uuid, '--host-node',
                   '7', '--size', '128', '--dry-run')),
            (127, ('instance', 'memory', 'get', vmem.uuid, '--host-node',
                   '0', '--size', '128')),
            (127, ('instance', 'memory', 'set', vmem.uuid, '--host-node',
                   '0', '--size', '-5')),
            (127, ('instance', 'memory', 'set', vmem.uuid, '--host-node',
                   '0', '--size', '100000')),
            (127, ('instance', 'memory', 'set', 'nope', '--host-node', '0',
                   '--size', '128')),
            (0, ('instance', 'memory', 'set', vmem.uuid, '--host-node', '0',
                 '--size', '128', '--dry-run')),
            (127, ('migration', 'resume')),
            (127, ('migration', 'resume', 'not-a-uuid')),
            (127, ('migration', 'resume', UNKNOWN_UUID)),
            (127, ('migration', 'resume', UNKNOWN_UUID, '--wait-timeout',
                   '5')),
            (127, ('migration', 'list', '--host', 'nope')),
        ])
        self.assert_refusals([
            (255, ()),
            (255, ('upgrade',)),
            (255, ('upgrade', 'chek')),  # before: ran the checks
            (255, ('--bogus', 'upgrade', 'check')),
            (255, ('upgrade', 'check', '--bogus')),
        ], tool='numamig-status')

    def memory_refused_by_the_hypervisor(self, source, vmem):
        """The test driver cannot resize: 1, 'failed' (before: 'done', no
        error line), the reason one line, in JSON too (before: the
        agent's traceback inside the JSON's error strings)."""
        for argv in (('instance', 'memory', 'set', vmem.uuid,
                      '--host-node', '0', '--size', '128'),
                     ('host', 'reclaim', source, '--node', '1', '--size',
                      '10')):
            run = self.assert_code(1, 'numamig-manage', *argv, '--format',
                                   'json')
            answer = json.loads(run.stdout)
            self.assertEqual('failed', answer['status'], run.stdout)
            self.assertIn('every guest refused, nothing changed: '
                          'Hypervisor on', answer['result']['error'])
            self.assertIn('failed: every guest refused', run.stderr)

    def agent_stopped(self, source, dest, guest, vmem):
        """The source's agent stopped: what needs it says so at once."""
        self.stop(source)
        self.wait_until_down(source)
        runs = self.assert_refusals([
            (0, ('host', 'list')),
            (0, ('host', 'show', source)),
            # The records are shown; the XML is not compared.
            (0, ('instance', 'show', vmem.uuid)),
            (1, ('instance', 'memory', 'set', vmem.uuid, '--host-node', '0',
                 '--size', '128')),
            (1, ('host', 'reclaim', source, '--node', '0', '--size', '10')),
            (0, ('host', 'reclaim', source, '--node', '0', '--size', '10',
                 '--dry-run')),
            (1, ('migration', 'start', guest.uuid, '--host', dest,
                 '--dry-run')),
            (127, ('host', 'drain', 'show', source)),
        ], bound_s=STOPPED_DAEMON_BOUND_S)
        shown = runs[('instance', 'show', vmem.uuid)].stdout
        self.assertIn(f"domain XML not compared: Compute host {source} is "
                      f"down", shown)
        refused = runs[('instance', 'memory', 'set', vmem.uuid,
                        '--host-node', '0', '--size', '128')].stderr
        self.assertIn(f"Compute host {source} is down", refused)

    def conductor_stopped(self, source, dest, guest, vmem):
        """No conductor: every action that needs it ends at once, in one
        line naming it; what reads the database still answers."""
        # The agents first: one whose conductor is gone takes long to
        # stop (the observability issue's).
        self.stop(dest)
        self.stop(self.conductor_host)
        needs_it = [
            ('host', 'drain', dest, '--dry-run'),
            ('host', 'drain', dest),
            ('host', 'drain', 'show', dest),
            ('host', 'drain', 'abort', dest),
            ('host', 'defragment', '--dry-run', '--for', FOR),
            ('host', 'defragment', '--execute', '--for', FOR),
            ('host', 'reclaim', source, '--node', '0', '--size', '10'),
            ('host', 'disable', dest, '--reason', 'x'),
            ('host', 'enable', dest),
            ('instance', 'memory', 'set', vmem.uuid, '--host-node', '0',
             '--size', '128'),
            ('migration', 'start', guest.uuid, '--host', dest),
            ('migration', 'start', guest.uuid, '--dry-run'),
            ('migration', 'abort', UNKNOWN_UUID),
            ('migration', 'force-complete', UNKNOWN_UUID),
            ('migration', 'resume', UNKNOWN_UUID),
        ]
        runs = self.assert_refusals(
            [(255, argv) for argv in needs_it] + [
                (0, ('host', 'list')),
                (0, ('migration', 'list')),
                (0, ('instance', 'list')),
                (0, ('instance', 'show', guest.uuid)),
            ], bound_s=STOPPED_DAEMON_BOUND_S)
        for argv in needs_it:
            self.assertIn('error: No conductor answered on topic',
                          runs[argv].stderr, argv)
        self.assertIn('domain XML not compared: No conductor answered',
                      runs[('instance', 'show', guest.uuid)].stdout)
