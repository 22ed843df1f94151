"""Tests of the host filters."""

import dataclasses
import datetime

from numamig import cpumodel
from numamig import objects
from numamig.numa import constraints
from numamig.numa import views as numa_views
from numamig.scheduler import filters
from numamig.scheduler import host_state
from tests import base
from tests.unit.scheduler import hosts


def _state(host='cmp1', is_up=True, hypervisor_type='qemu', topology=None,
           age=5):
    report = hosts.report(host, topology=topology,
                          hypervisor_type=hypervisor_type)
    return host_state.HostState(
        host=host, hypervisor_type=hypervisor_type, report=report,
        topology=report.topology, reservations=(), received_at=hosts.T0,
        age=datetime.timedelta(seconds=age), is_up=is_up,
        service_down_time=60)


def _spec(**kwargs):
    kwargs.setdefault('request', constraints.get_numa_request(
        2, 1024, {'hw:cpu_policy': 'dedicated'}, {}))
    return filters.RequestSpec(**kwargs)


class TestHostUpFilter(base.TestCase):

    def test_up_passes(self):
        self.assertTrue(filters.HostUpFilter().check(_state(),
                                                       _spec()).passed)

    def test_down_refused_with_age_and_limit(self):
        verdict = filters.HostUpFilter().check(
            _state(is_up=False, age=75), _spec())
        self.assertEqual("host is down: its last report is 75 s old "
                         "(service_down_time is 60 s)", verdict.reason)


class TestHypervisorTypeFilter(base.TestCase):

    def test_any_type_when_unspecified(self):
        self.assertTrue(filters.HypervisorTypeFilter().check(
            _state(hypervisor_type='kvm'), _spec()).passed)

    def test_same_type_passes(self):
        self.assertTrue(filters.HypervisorTypeFilter().check(
            _state(), _spec(hypervisor_type='qemu')).passed)

    def test_other_type_refused(self):
        verdict = filters.HypervisorTypeFilter().check(
            _state(hypervisor_type='kvm'), _spec(hypervisor_type='qemu'))
        self.assertEqual("hypervisor type is 'kvm', the guest needs 'qemu'",
                         verdict.reason)


class TestExcludedHostFilter(base.TestCase):

    def test_source_refused(self):
        verdict = filters.ExcludedHostFilter().check(
            _state(), _spec(source_host='cmp1'))
        self.assertEqual("it is the source host of the guest",
                         verdict.reason)

    def test_excluded_refused(self):
        verdict = filters.ExcludedHostFilter().check(
            _state(), _spec(source_host='cmp0',
                            exclude=frozenset({'cmp1'})))
        self.assertEqual("excluded by the caller", verdict.reason)

    def test_other_host_passes(self):
        self.assertTrue(filters.ExcludedHostFilter().check(
            _state(), _spec(source_host='cmp0')).passed)


class TestNUMATopologyFilter(base.TestCase):

    def test_fit_travels_with_the_verdict(self):
        verdict = filters.NUMATopologyFilter().check(_state(), _spec())
        self.assertTrue(verdict.passed)
        self.assertTrue(verdict.fit.topology.is_placed)
        self.assertEqual(2, len(verdict.fit.topology.cpu_pinning))

    def test_no_request_passes_without_fit(self):
        verdict = filters.NUMATopologyFilter().check(_state(),
                                                     _spec(request=None))
        self.assertEqual(filters.PASS, verdict)

    def test_no_fit_refused_with_the_fit_reason(self):
        big = constraints.get_numa_request(
            6, 1024, {'hw:cpu_policy': 'dedicated'}, {})
        verdict = filters.NUMATopologyFilter().check(_state(),
                                                     _spec(request=big))
        self.assertFalse(verdict.passed)
        self.assertTrue(verdict.reason.startswith(
            "NUMA topology does not fit: "))
        self.assertIn(verdict.fit.reason, verdict.reason)

    def test_views_give_the_verdict_of_the_objects(self):
        check = filters.NUMATopologyFilter().check
        state = _state()
        with_view = dataclasses.replace(
            state, numa_view=numa_views.HostView(state.topology))
        limits = objects.NUMALimits(cpu_allocation_ratio=2.0,
                                    ram_allocation_ratio=1.0)
        for vcpus in (2, 6):
            request = constraints.get_numa_request(
                vcpus, 1024, {'hw:cpu_policy': 'dedicated'}, {})
            plain = _spec(request=request, limits=limits)
            viewed = _spec(request=request, limits=limits,
                           request_view=numa_views.RequestView(request),
                           limits_view=numa_views.LimitsView(limits))
            expected = check(state, plain)
            self.assertEqual(expected, check(with_view, viewed))
            self.assertEqual(expected, check(with_view, plain))

    def test_limits_applied(self):
        shared = constraints.get_numa_request(
            2, 3072, {'hw:numa_nodes': '1'}, {})
        topology = hosts.host_topology(cells=1, pcpus=0, shared=2,
                                       memory_mb=4096)
        topology.cells[0].memory_usage_mb = 2048
        state = _state(topology=topology)
        tight = objects.NUMALimits(ram_allocation_ratio=1.0)
        loose = objects.NUMALimits(ram_allocation_ratio=2.0)
        check = filters.NUMATopologyFilter().check
        self.assertFalse(check(state, _spec(request=shared,
                                            limits=tight)).passed)
        self.assertTrue(check(state, _spec(request=shared,
                                           limits=loose)).passed)

    def test_page_size_forced(self):
        request = constraints.get_numa_request(
            2, 2048, {'hw:cpu_policy': 'dedicated'}, {})
        check = filters.NUMATopologyFilter().check
        without_1g = _state(topology=hosts.host_topology(pages_2m=1024))
        verdict = check(without_1g, _spec(request=request,
                                          pagesize_kb=1048576))
        self.assertFalse(verdict.passed)
        verdict = check(without_1g, _spec(request=request, pagesize_kb=2048))
        self.assertTrue(verdict.passed)
        self.assertEqual({2048}, {c.pagesize for c in
                                  verdict.fit.topology.cells})


class TestHostEnabledFilter(base.TestCase):

    def test_enabled_passes(self):
        verdict = filters.HostEnabledFilter().check(
            _state(), _spec(disabled={'other': 'new DIMMs'}))
        self.assertTrue(verdict.passed)

    def test_disabled_refused_with_the_operators_reason(self):
        verdict = filters.HostEnabledFilter().check(
            _state('cmp1'), _spec(disabled={'cmp1': 'new DIMMs'}))
        self.assertEqual('disabled for maintenance: new DIMMs',
                         verdict.reason)


class TestDefaultFilters(base.TestCase):

    def test_cheap_checks_before_the_fit(self):
        names = [f.name for f in filters.default_filters()]
        self.assertEqual('NUMATopology', names[-1])
        self.assertEqual({'HostUp', 'HostEnabled', 'ExcludedHost',
                          'HypervisorType', 'CPUModel', 'NUMATopology'},
                         set(names))


class TestCPUModelFilter(base.TestCase):

    GUEST = cpumodel.GuestCPU('host-passthrough', 'Icelake-Server',
                              frozenset({'avx512f', 'pku'}))

    def _state_with_cpu(self, cpu):
        state = _state()
        state.report.cpu = cpu
        return state

    def test_no_guest_cpu_passes(self):
        self.assertTrue(filters.CPUModelFilter().check(
            self._state_with_cpu(None), _spec()).passed)

    def test_host_that_reported_no_cpu_passes(self):
        self.assertTrue(filters.CPUModelFilter().check(
            self._state_with_cpu(None), _spec(guest_cpu=self.GUEST)).passed)

    def test_poorer_host_refused_naming_the_missing_features(self):
        verdict = filters.CPUModelFilter().check(
            self._state_with_cpu(objects.HostCPU(
                model='Icelake-Server', features=['avx512f'])),
            _spec(guest_cpu=self.GUEST))
        self.assertEqual(
            "CPU cannot run the guest's (host-passthrough Icelake-Server "
            "+2 features): host-passthrough guest of CPU model "
            "Icelake-Server needs features this host's CPU lacks: pku",
            verdict.reason)

    def test_same_cpu_passes(self):
        self.assertTrue(filters.CPUModelFilter().check(
            self._state_with_cpu(objects.HostCPU(
                model='Icelake-Server', features=['avx512f', 'pku'])),
            _spec(guest_cpu=self.GUEST)).passed)

    def test_in_the_default_filters_before_the_fit(self):
        names = [f.name for f in filters.default_filters()]
        self.assertLess(names.index('CPUModel'), names.index('NUMATopology'))
