"""numamig_ci.postcopy_cut: when a held migration counts as post-copy."""

import fixtures
import libvirt

from numamig_ci import postcopy_cut
from tests import base

RUNNING = [libvirt.VIR_DOMAIN_RUNNING, 0]
SWITCHING = [libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_MIGRATION]
POSTCOPY = [libvirt.VIR_DOMAIN_PAUSED, postcopy_cut.PAUSED_POSTCOPY]
SHUTOFF = [libvirt.VIR_DOMAIN_SHUTOFF, 0]


class _Domain:
    """Answers state() and jobStats() from a script of samples."""

    def __init__(self, samples):
        self.samples = list(samples)
        self.now = self.samples[0]

    def state(self):
        if self.samples:
            self.now = self.samples.pop(0)
        return self.now[0]

    def jobStats(self):  # noqa: N802 - libvirt's name
        return {'memory_processed': self.now[1]}


class WaitPostCopyTest(base.TestCase):

    def _wait(self, samples):
        hold = postcopy_cut.PostCopyHold.__new__(postcopy_cut.PostCopyHold)
        hold.timeout = 5
        domain = _Domain(samples)
        hold._domain = lambda action: action(domain)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.postcopy_cut.POLL_S', 0))
        return hold.wait_post_copy()

    def test_the_switch_over_pause_leads_on_to_post_copy(self):
        cut = postcopy_cut.CUT_AFTER
        self.assertEqual(cut, self._wait([
            (RUNNING, 0), (SWITCHING, 10), (POSTCOPY, 100),
            (POSTCOPY, 100 + cut)]))

    def test_a_job_that_ended_is_no_post_copy(self):
        self.assertIsNone(self._wait([(RUNNING, 0), (SHUTOFF, 10)]))

    def test_leaving_post_copy_before_the_amount_is_none(self):
        self.assertIsNone(self._wait([(POSTCOPY, 0), (SWITCHING, 10)]))
