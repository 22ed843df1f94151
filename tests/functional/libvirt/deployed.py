"""numamig-ci's local-libvirt backend started inside a test, to run the
harness's scenarios as the real tier's tests: two real libvirtd hosts, a
conductor and two compute agents as processes over RabbitMQ, TCG guests
(numamig_ci.local_deployment). Starting it takes about 15 s on a 2-core
machine. Skipped, with the reason printed, only where root, unshare,
libvirtd, QEMU or RabbitMQ are unavailable.
"""

import time

import fixtures

from numamig_ci import libvirt_hosts
from numamig_ci import session as ci_session
from numamig_ci.backends import local_libvirt
from numamig_ci.scenarios import registry
from tests import base
from tests.fixtures import rpc as rpc_fixture


class LocalLibvirtScenarioTestCase(base.TestCase):
    """A started numamig-ci local-libvirt backend of two hosts; ``run``
    runs a scenario on it and fails with its failures and progress."""

    def setUp(self):
        super().setUp()
        reason = (libvirt_hosts.missing_requirements()
                  or rpc_fixture.rabbit_unreachable_reason())
        if reason:
            print(f"SKIP real libvirt deployment: {reason}")
            self.skipTest(reason)
        state = self.useFixture(fixtures.TempDir()).path
        started = time.monotonic()
        self.backend = local_libvirt.LocalLibvirtBackend(2, state_dir=state)
        self.addCleanup(self.backend.stop)
        self.backend.start()
        self.started_s = time.monotonic() - started

    def run_scenario(self, name):
        """Run scenario ``name``; return its progress lines."""
        lines = []
        session = ci_session.Session(self.backend, say=lines.append)
        self.addCleanup(session.cleanup)
        started = time.monotonic()
        registry.SCENARIOS[name].func(session)
        lines.append(f"deployment started in {self.started_s:.1f} s, "
                     f"scenario ran {time.monotonic() - started:.1f} s")
        print('\n'.join(lines))
        self.assertEqual([], [str(f) for f in session.failures],
                         '\n'.join(lines))
        return lines
