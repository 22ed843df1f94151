"""The nested host agent's pieces that need no machine: the failure
hook libvirtd runs, and the per-node page counters it reads."""

import os
import subprocess

import fixtures

from numamig_ci.nested import agent
from tests import base


class FailHookTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(fixtures.TempDir()).path
        agent._install_hook(self.host)
        self.hook = os.path.join(self.host, 'etc', 'hooks', 'qemu')

    def call(self, operation):
        return subprocess.run([self.hook, 'guest', operation, 'begin', '-'],
                              capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)

    def test_no_flag_no_failure(self):
        self.assertEqual(0, self.call('started').returncode)

    def test_fails_only_the_flagged_operation(self):
        with open(agent._flag_path(self.host), 'w') as f:
            f.write('started')
        self.assertEqual(0, self.call('prepare').returncode)
        failed = self.call('started')
        self.assertEqual(1, failed.returncode)
        self.assertIn("failure injected at 'started' of guest",
                      failed.stderr)


class HugePagesTest(base.TestCase):

    def test_counters_per_node_and_size(self):
        root = self.useFixture(fixtures.TempDir()).path
        for node, size, free, total in ((0, 2048, 3, 64), (1, 1048576, 1, 1)):
            pool = os.path.join(root, f'node{node}', 'hugepages',
                                f'hugepages-{size}kB')
            os.makedirs(pool)
            for name, value in (('free_hugepages', free),
                                ('nr_hugepages', total)):
                with open(os.path.join(pool, name), 'w') as f:
                    f.write(f'{value}\n')
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.agent.NODE_DIR', root))
        pools = agent.Agent().huge_pages()
        self.assertEqual({'0': {'2048': [3, 64]}, '1': {'1048576': [1, 1]}},
                         pools)
