"""Tests of the CPU power scenario's expectations (pure parts)."""

from numamig_ci import checks
from numamig_ci.scenarios import cpu_power
from tests import base


def _host(dedicated, shared):
    return checks.HostConfig('h', frozenset(dedicated), frozenset(shared),
                             {0: frozenset({0, 1, 2, 3})})


class ExpectedOnlineTest(base.TestCase):

    def test_cpu0_and_shared_cpus_stay_online(self):
        host = _host({0, 1, 2}, {3})
        self.assertEqual({1, 2}, cpu_power.managed(host))
        self.assertEqual({0, 3}, cpu_power.expected_online(host, ()))

    def test_pinned_pcpus_are_online(self):
        host = _host({0, 1, 2}, {3})
        self.assertEqual({0, 2, 3},
                         cpu_power.expected_online(host, {0, 2}))
