"""The real tier: dirty-rate sampling on QEMU (TCG) and the prediction.

Which of libvirt's dirty-rate calculation modes measure a TCG guest is
recorded (page sampling hashes sampled pages and needs no accelerator;
dirty bitmap and dirty ring need KVM's dirty logging), and the
prediction follows from the measured rate: an idle guest converges, the
dirtying guest (94 MiB kept dirty) at 1 MiB/s does not.

Then the prediction against the outcome, each migration predicted and
carried out by the same source: the idle guest predicted to converge
ends in pre-copy; the dirtying guest at 32 MiB/s, predicted under the
``nfv`` policy to need post-copy, ends by post-copy (about 20 s). At 64
MiB/s the prediction is a coin toss on this machine: TCG dirties slower
while other work shares the cores, and page sampling once measured a
rate that pre-copy would outrun (predicted ``converges``; post-copy).
"""

import fixtures

from numamig.convergence import policy as pol
from numamig.virt.libvirt import dirty_rate
from tests.functional.libvirt import real_hosts
from tests.functional.libvirt.real_hosts import GUEST


class PredictionTestCase(real_hosts.RealHostsTestCase):

    def _predict(self, bandwidth_mib, dirty):
        self.spawn_guest(dirty=dirty)
        source = self.driver('src', bandwidth_mib=bandwidth_mib,
                             downtime_ms=500)
        answer = source.predict_convergence(GUEST, pol.SHIPPED[pol.TIMER])
        self.record(str({'dirty': dirty, 'bandwidth_mib': bandwidth_mib,
                         **answer}))
        return answer

    def _predict_then_migrate(self, dirty, policy, bandwidth_mib):
        self.spawn_guest(dirty=dirty)
        source = self.driver('src', bandwidth_mib=bandwidth_mib,
                             policy=policy)
        answer = source.predict_convergence(GUEST, pol.SHIPPED[policy])
        run = self.start_migration(source, bandwidth_mib=bandwidth_mib)
        run.wait_for_end()
        self.assertIsNone(run.error)
        self.assert_moved_to_dst()
        result = self.result = run.result
        how = 'post-copy' if result.post_copy else \
            'paused' if result.paused else 'pre-copy'
        self.record(f"{policy}, {'dirtying' if dirty else 'idle'} guest at "
                    f"{bandwidth_mib} MiB/s: predicted "
                    f"{answer['prediction']} "
                    f"({answer['predicted_elapsed_ms']} ms), outcome {how} "
                    f"in {result.elapsed_ms} ms; {answer['reason']}")
        return answer, how

    def test_idle_guest_predicted_to_converge_does(self):
        answer, how = self._predict_then_migrate(False, pol.TIMER, 64)
        self.assertEqual('page-sampling', answer['dirty_rate_method'],
                         answer['reason'])
        self.assertEqual(('converges', 'pre-copy'),
                         (answer['prediction'], how), answer['reason'])

    def assert_estimated(self, source, above):
        """The drain's estimate (sample_dirty_rates) of the guest: page
        sampling, more than ``above`` B/s (None: exactly 0); a guest
        not on the host is left out."""
        absent = '00000000-0000-4000-8000-00000000d00d'
        answer = source.sample_dirty_rates([GUEST, absent])
        self.record(f"estimate: {answer}")
        self.assertEqual([GUEST], list(answer['guests']))
        guest = answer['guests'][GUEST]
        self.assertEqual('page-sampling', guest['method'], guest['reason'])
        if above is None:
            self.assertEqual(0, guest['dirty_rate'])
        else:
            self.assertGreater(guest['dirty_rate'], above)
        self.assertEqual(source._settings.migration.downtime_ms,
                         answer['figures']['downtime_ms'])

    def test_idle_guest_estimated_idle(self):
        self.spawn_guest(halted=True)
        self.assert_estimated(self.drivers['src'], None)

    def test_dirtying_guest_predicted_to_need_post_copy_does(self):
        answer, how = self._predict_then_migrate(True, pol.NFV, 32)
        self.assertEqual(('needs-post-copy', 'post-copy'),
                         (answer['prediction'], how), answer['reason'])
        # Escalated by stalled passes, not by a clock: each of nfv's
        # downtime steps, then post-copy, each at a pass of its own.
        actions = self.result.convergence_actions
        self.assertEqual(len(pol.SHIPPED[pol.NFV].downtime_ms) + 1,
                         len(actions), actions)
        self.assertTrue(actions[-1].startswith('post-copy (pass '), actions)
        passes = [int(a.split('(pass ')[1].split(':')[0])
                  for a in actions[1:]]
        self.assertEqual(sorted(set(passes)), passes, actions)

    def test_dirtying_guest_over_a_slow_link_does_not(self):
        answer = self._predict(1, dirty=True)
        self.assertEqual('page-sampling', answer['dirty_rate_method'],
                         answer['reason'])
        self.assertGreater(answer['sampled_dirty_rate'], 2 ** 20)
        self.assertEqual('will-not-converge', answer['prediction'],
                         answer['reason'])
        self.assert_estimated(self.drivers['src'], 2 ** 20)

    def test_which_modes_measure_a_tcg_guest(self):
        self.spawn_guest(dirty=True)
        source = self.drivers['src']
        dom = source._lookup(GUEST)
        found = {}
        # Dirty bitmap last: it has made QEMU drop its monitor (the guest
        # died), after which no mode can measure anything.
        for mode in sorted(dirty_rate.MODES,
                           key=lambda m: m[0] == 'dirty-bitmap'):
            self.useFixture(fixtures.MockPatch(
                'numamig.virt.libvirt.dirty_rate.MODES', (mode,)))
            rate, how = dirty_rate.sample(source._connection(), dom,
                                          deadline_s=5)
            found[mode[0]] = how if rate is None else f"{rate} B/s"
        self.record(str(found))
        # Measured: page sampling measures a TCG guest, dirty ring is
        # refused, dirty bitmap killed the guest (so the driver tries
        # page sampling only on TCG: dirty_rate.modes_for).
        self.assertIn('B/s', found['page-sampling'])
        self.assertIn('dirty-ring feature', found['dirty-ring'])
