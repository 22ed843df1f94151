"""Which guests the locality watch may move, from their domain XML."""

from numamig.numa import locality as numa_locality
from numamig.virt.libvirt import locality
from tests import base

CPUS = frozenset(range(16))
NODES = frozenset({0, 1})
OWN = ("<metadata><l:move xmlns:l='https://numamig.org/xmlns/locality/1' "
       "node='0' cpus='0-3,8-11'/></metadata>")


def _xml(cputune='', numatune='', metadata=''):
    return (f"<domain type='kvm'><name>g</name>{metadata}"
            f"<vcpu placement='static' cpuset='0-15'>2</vcpu>"
            f"{cputune}{numatune}</domain>")


def _pins(cpuset, vcpus=(0, 1)):
    return '<cputune>' + ''.join(
        f"<vcpupin vcpu='{v}' cpuset='{cpuset}'/>" for v in vcpus) + \
        '</cputune>'


def _memory(mode, nodeset=None, placement=None):
    attrs = f"mode='{mode}'" + (f" nodeset='{nodeset}'" if nodeset else '') \
        + (f" placement='{placement}'" if placement else '')
    return f'<numatune><memory {attrs}/></numatune>'


class ExcludedTest(base.TestCase):

    def judge(self, live, persistent=None):
        return locality.excluded(live, persistent, CPUS, NODES)

    def test_floating_guests_may_move(self):
        for numatune in ('', _memory('preferred', '1'),
                         _memory('interleave', '0-1'),
                         # strict to every node restricts nothing (a
                         # relaxed binding)
                         _memory('strict', '0-1')):
            self.assertIsNone(self.judge(_xml(numatune=numatune)))
        # Pins to every CPU restrict nothing either.
        self.assertIsNone(self.judge(_xml(cputune=_pins('0-15'))))

    def test_pinned_in_definition_or_running_state(self):
        pinned = _xml(cputune=_pins('2', vcpus=(0,)))
        self.assertEqual(numa_locality.PINNED, self.judge(pinned))
        self.assertEqual(numa_locality.PINNED, self.judge(_xml(), pinned))

    def test_strictly_bound(self):
        for numatune in (_memory('strict', '1'),
                         _memory('restrictive', '0'),
                         _memory('strict', placement='auto'),
                         "<numatune><memnode cellid='0' mode='strict' "
                         "nodeset='1'/></numatune>"):
            self.assertEqual(numa_locality.BOUND,
                             self.judge(_xml(numatune=numatune)))
            self.assertEqual(numa_locality.BOUND,
                             self.judge(_xml(), _xml(numatune=numatune)))

    def test_its_own_move_is_not_a_binding(self):
        own = _xml(cputune=_pins('0-3,8-11'),
                   numatune=_memory('strict', '0'), metadata=OWN)
        self.assertIsNone(self.judge(own, _xml()))
        self.assertEqual(locality.OwnMove(0, frozenset({0, 1, 2, 3, 8, 9,
                                                        10, 11})),
                         locality.own_move(own))

    def test_someone_elses_change_after_its_move_is(self):
        repinned = _xml(cputune=_pins('5'), numatune=_memory('strict', '0'),
                        metadata=OWN)
        self.assertEqual(numa_locality.PINNED, self.judge(repinned, _xml()))
        rebound = _xml(cputune=_pins('0-3,8-11'),
                       numatune=_memory('strict', '1'), metadata=OWN)
        self.assertEqual(numa_locality.BOUND, self.judge(rebound, _xml()))
        # Its own record never excuses a binding in the definition.
        own = _xml(cputune=_pins('0-3,8-11'),
                   numatune=_memory('strict', '0'), metadata=OWN)
        self.assertEqual(numa_locality.BOUND, self.judge(
            own, _xml(numatune=_memory('strict', '0'))))

    def test_live_mode(self):
        self.assertIsNone(locality.live_mode(_xml()))
        self.assertEqual('preferred', locality.live_mode(
            _xml(numatune=_memory('preferred', '1'))))


class MigratePagesTest(base.TestCase):
    """The fallback where libvirt has no cpuset controller: the kernel's
    migrate_pages(2), called for real on this process."""

    def test_own_pages_to_a_node_it_has(self):
        import os
        # Node 0 exists on every Linux host: moving node 0's pages to
        # node 0 is a real call that changes nothing.
        self.assertEqual(0, locality.migrate_pages(os.getpid(), {0}, 0))

    def test_no_such_process(self):
        self.assertRaises(OSError, locality.migrate_pages, 2 ** 22 + 7,
                          {0}, 0)

    def test_refusal_for_want_of_cpuset_falls_back(self):
        from unittest import mock

        import libvirt
        dom = mock.Mock()
        refusal = libvirt.libvirtError('refused')
        refusal.get_error_message = lambda: (
            'Requested operation is not valid: cgroup cpuset controller '
            'is not mounted')
        dom.setNumaParameters.side_effect = refusal
        moved = []
        done, how = locality.move(dom, _xml(), 1, frozenset({4, 5}),
                                  [frozenset(range(8))], moved.append)
        self.assertEqual(([1], 'migrate_pages', frozenset({4, 5})),
                         (moved, how, done.cpus))
        dom.pinVcpu.assert_called_once_with(
            0, (False,) * 4 + (True, True))
        # Any other refusal is libvirt's answer.
        refusal.get_error_message = lambda: 'change of nodeset for ' \
            'running domain requires strict numa mode'
        self.assertRaises(libvirt.libvirtError, locality.move, dom, _xml(),
                          1, frozenset({4, 5}), [frozenset(range(8))],
                          moved.append)
