"""numamig-manage instance memory set / host reclaim: what an answer of
the conductor becomes (exit code, the one ``error:`` line)."""

import json

from numamig import exception
from tests.unit.cmd import cli_base

REFUSAL = ("Hypervisor on cn1 failed to resize the virtio-mem device of "
           "guest cell 0 to 0 MiB: libvirt error 3: not supported")


def _answer(status, guests=(), short_mb=0, error=None):
    plan = {'node': 0, 'exact': False, 'wanted_mb': -256,
            'on_node_mb': -256 + short_mb, 'elsewhere_mb': 0,
            'best_effort_mb': 0, 'short_mb': short_mb, 'steps': [],
            'notes': []}
    result = None if status == 'planned' else {
        'guests': list(guests), 'released_mb': 0,
        'all_reached': all(g['reached'] for g in guests)}
    if error:
        result['error'] = error
    return {'uuid': 'c1', 'host': 'cn1', 'status': status,
            'request': {}, 'plan': plan, 'result': result}


def _guest(name, reached=True, error=None):
    guest = {'instance': name, 'requested': {'0': 0}, 'reached': reached,
             'current': None if error else {'0': 0}, 'released_mb': 0}
    if error:
        guest['error'] = error
    return guest


class MemoryOutcomeTestCase(cli_base.CLITestCase):

    def setUp(self):
        super().setUp()
        self.guest = self.add_instance('cn1')

    def memory_set(self, answer, *extra):
        self.api.instance_memory_set.return_value = answer
        return self.run_cli('instance', 'memory', 'set', self.guest.uuid,
                            '--host-node', '0', '--size', '0', *extra)

    def assert_one_error(self, err, text):
        self.assertEqual([f"error: {text}"], err.splitlines())

    def test_every_guest_refused_is_failed_with_the_reason(self):
        answer = _answer('failed', [_guest('g1', False, REFUSAL)],
                         error=f"every guest refused, nothing changed: "
                               f"{REFUSAL}")
        code, out, err = self.memory_set(answer)
        self.assertEqual(1, code)
        # Before: "done" on stdout, exit 1 and no error line.
        self.assertIn('Memory change c1 on cn1: failed', out)
        self.assert_one_error(err, f"memory change c1 on cn1 failed: every "
                                   f"guest refused, nothing changed: "
                                   f"{REFUSAL}")
        code, out, err = self.memory_set(answer, '--format', 'json')
        self.assertEqual(('failed', 1), (json.loads(out)['status'], code))
        self.assertEqual(1, len(err.splitlines()))

    def test_some_guests_refused_names_them(self):
        answer = _answer('partial', [_guest('g1'),
                                     _guest('g2', False, REFUSAL)])
        code, _, err = self.memory_set(answer)
        self.assertEqual(1, code)
        self.assert_one_error(err, f"memory change c1 on cn1: 1 of 2 guests "
                                   f"refused; g2: {REFUSAL}")

    def test_a_guest_late_or_a_short_plan_says_so(self):
        code, _, err = self.memory_set(_answer('done', [_guest('g1', False)]))
        self.assertEqual(1, code)
        self.assertIn('g1 did not reach the size asked within [virtio_mem] '
                      'resize_timeout', err)
        self.assertEqual(1, len(err.splitlines()))
        code, _, err = self.memory_set(_answer('planned', short_mb=-56),
                                       '--dry-run')
        self.assertEqual(1, code)
        self.assert_one_error(err, "memory change c1 on cn1 would be 56 MiB "
                                   "short of 256 MiB: the guests' devices "
                                   "cannot give or take more")

    def test_reached_is_0_with_nothing_on_stderr(self):
        code, _, err = self.memory_set(_answer('done', [_guest('g1')]))
        self.assertEqual((0, ''), (code, err))

    def test_refusal_from_the_conductor_is_its_message_alone(self):
        # As the conductor's refusal arrives over RabbitMQ.
        self.api.host_reclaim.side_effect = exception.keep_remote_message(
            cli_base.from_the_wire(exception.InvalidMemoryChange(
                reason="host cn1 has no NUMA node 5; its nodes are 0, 1")))
        self.add_report('cn1')
        code, out, err = self.run_cli('host', 'reclaim', 'cn1', '--node',
                                      '5', '--size', '10', '--format',
                                      'json')
        self.assertEqual(127, code)
        line = ("Memory change refused: host cn1 has no NUMA node 5; its "
                "nodes are 0, 1")
        self.assertEqual([f"error: {line}"], err.splitlines())
        self.assertEqual({'error': line, 'exit_code': 127}, json.loads(out))
