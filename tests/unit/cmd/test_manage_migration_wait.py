"""numamig-manage migration start --wait: back-off, deadline, output."""

from unittest import mock

import oslo_messaging as messaging

from numamig.cmd.manage_commands import migration as migration_cmd
from tests.unit.cmd import cli_base


class FakeClock:
    """time.monotonic and time.sleep of a follow that never sleeps."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class FollowBase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.guest = self.add_instance('src')
        self.time = FakeClock()
        # The back-off alone, unless a test bounds it by the time waited.
        self.share(1000)

    def share(self, value):
        self.useFixture(cli_base.fixtures.MonkeyPatch(
            'numamig.cmd.manage_commands.migration.WAIT_SHARE', value))

    def _mig(self, status, done=0):
        return cli_base.make_migration(
            self.guest.uuid, status=status, dest_host='dst',
            memory_total=1 << 30, memory_processed=done,
            memory_remaining=(1 << 30) - done)


class FollowTestCase(FollowBase):

    def follow(self, first, polls, timeout=None, output_format='human'):
        """Follow by polling, as against a conductor older than 1.5."""
        api = mock.Mock(name='ConductorAPI')
        api.migration_wait.side_effect = messaging.UnsupportedVersion('1.5')
        api.migration_get.side_effect = polls
        return migration_cmd.follow(
            api, None, first, output_format, timeout=timeout,
            stream=mock.Mock(), sleep=self.time.sleep,
            clock=self.time.clock), api

    def test_poll_delays_grow_to_the_cap(self):
        delays = migration_cmd.poll_delays()
        got = [next(delays) for _ in range(10)]
        self.assertEqual(migration_cmd.FIRST_POLL_S, got[0])
        for before, after in zip(got, got[1:], strict=False):
            self.assertAlmostEqual(min(before * migration_cmd.POLL_GROWTH,
                                       migration_cmd.POLL_INTERVAL), after)
        self.assertEqual(migration_cmd.POLL_INTERVAL, got[-1])

    def test_backs_off_while_nothing_changes(self):
        running = self._mig('running', 1 << 20)
        final, _ = self.follow(running, [running] * 3 +
                               [self._mig('completed', 1 << 30)])
        self.assertEqual('completed', final.status)
        expected = migration_cmd.poll_delays()
        self.assertEqual([next(expected) for _ in range(4)],
                         self.time.slept)

    def test_a_change_restarts_the_back_off(self):
        steps = [self._mig('running', 1 << 20)] * 3 + [
            self._mig('post-migrating', 1 << 30),
            self._mig('completed', 1 << 30)]
        self.follow(steps[0], steps[1:])
        first = migration_cmd.FIRST_POLL_S
        self.assertEqual(first, self.time.slept[0])
        # Polls 1-2 saw no change: the delay grew. Poll 3 saw
        # post-migrating: poll 4 (completed) came FIRST_POLL_S later.
        self.assertEqual(4, len(self.time.slept))
        self.assertGreater(self.time.slept[2], self.time.slept[1])
        self.assertGreater(self.time.slept[1], first)
        self.assertEqual(first, self.time.slept[3])

    def test_no_poll_later_than_a_share_of_the_wait(self):
        self.share(0.1)
        running = self._mig('running', 1 << 20)
        self.follow(running, [running] * 60 +
                    [self._mig('completed', 1 << 30)])
        waited = 0.0
        for delay in self.time.slept:
            self.assertLessEqual(
                delay, max(migration_cmd.FIRST_POLL_S, 0.1 * waited) + 1e-9)
            waited += delay
        # The share held the delays below the cap for a while...
        self.assertLess(self.time.slept[8], 0.2)
        # ...and the cap bounds them once the wait is long.
        self.assertEqual(migration_cmd.POLL_INTERVAL, self.time.slept[-1])

    def test_timeout_bounds_the_wait(self):
        running = self._mig('running', 1 << 20)
        final, api = self.follow(running, [running] * 1000, timeout=2.0)
        self.assertEqual('running', final.status)
        self.assertAlmostEqual(2.0, sum(self.time.slept), places=6)
        self.assertLessEqual(max(self.time.slept),
                             migration_cmd.POLL_INTERVAL)
        self.assertEqual(len(self.time.slept), api.migration_get.call_count)

    def test_start_wait_timeout_exits_1_and_says_it_goes_on(self):
        running = self._mig('running', 1 << 20)
        self.api.live_migrate_instance.return_value = running
        self.api.migration_get.return_value = running
        self.useFixture(cli_base.fixtures.MonkeyPatch(
            'numamig.cmd.manage_commands.migration.POLL_INTERVAL', 0.01))
        code, out, err = self.run_cli('migration', 'start', self.guest.uuid,
                                      '--wait', '--wait-timeout', '0.05')
        self.assertEqual(1, code)
        self.assertIn(f'migration {running.uuid} is still running', err)
        self.assertIn('it goes on', err)
        self.assertIn('RUNNING', out)

    def test_wait_timeout_needs_wait_and_a_positive_time(self):
        for extra in (['--wait-timeout', '5'],
                      ['--wait', '--wait-timeout', '0'],
                      ['--wait', '--wait-timeout', '-1']):
            code, _, err = self.run_cli('migration', 'start',
                                        self.guest.uuid, *extra)
            self.assertEqual(127, code, extra)
            self.assertIn('--wait-timeout', err)
        self.api.live_migrate_instance.assert_not_called()


class WaitTestCase(FollowBase):
    """A conductor of API 1.5 answers each wait once the migration
    changed: no polls, no sleeps."""

    def wait(self, first, answers, timeout=None):
        api = mock.Mock(name='ConductorAPI')
        asked = []

        def migration_wait(ctxt, migration, seconds):
            asked.append((migration.status, seconds))
            answer = answers.pop(0)
            self.time.now += answer[1]
            return answer[0]
        api.migration_wait.side_effect = migration_wait
        final = migration_cmd.follow(
            api, None, first, 'human', timeout=timeout, stream=mock.Mock(),
            sleep=self.time.sleep, clock=self.time.clock)
        return final, api, asked

    def test_each_change_is_one_wait_and_nothing_is_polled(self):
        final, api, asked = self.wait(self._mig('accepted'), [
            (self._mig('running', 1 << 20), 0.3),
            (self._mig('running', 1 << 29), 1.0),
            (self._mig('completed', 1 << 30), 0.7)])
        self.assertEqual('completed', final.status)
        self.assertEqual(['accepted', 'running', 'running'],
                         [status for status, _ in asked])
        self.assertEqual([], self.time.slept)
        api.migration_get.assert_not_called()

    def test_a_wait_never_outlasts_the_timeout(self):
        running = self._mig('running', 1 << 20)
        final, _, asked = self.wait(running, [(running, 10.0),
                                              (running, 2.0)],
                                    timeout=12.0)
        self.assertEqual('running', final.status)
        self.assertEqual([migration_cmd.WAIT_CHUNK_S, 2.0],
                         [seconds for _, seconds in asked])

    def test_an_unheld_wait_pauses_before_asking_again(self):
        # The conductor held as many waits as it allows: answered at
        # once, unchanged; the command must not spin on it.
        running = self._mig('running', 1 << 20)
        self.wait(running, [(running, 0.0),
                            (self._mig('completed', 1 << 30), 0.0)])
        self.assertEqual([migration_cmd.POLL_INTERVAL], self.time.slept)


class ResumeWaitTimeoutTestCase(cli_base.CLITestCase):

    def test_wait_timeout_needs_wait_and_a_positive_time(self):
        # Before: not checked; with --wait a negative timeout reached the
        # conductor, and without --wait it was silently ignored.
        for extra, said in ((['--wait-timeout', '5'],
                             '--wait-timeout 5 needs --wait'),
                            (['--wait', '--wait-timeout', '-1'],
                             '--wait-timeout -1 needs --wait and a number of '
                             'seconds above 0')):
            code, out, err = self.run_cli('migration', 'resume',
                                          cli_base.new_uuid(), *extra)
            self.assertEqual((127, ''), (code, out), extra)
            self.assertEqual(1, len(err.splitlines()), err)
            self.assertIn(said, err)
        self.api.migration_get.assert_not_called()
        self.api.migration_resume.assert_not_called()
