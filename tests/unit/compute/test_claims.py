"""Tests of numamig.compute.claims: move and instance claims."""

import threading

from numamig import exception
from numamig.compute import claims
from tests import base
from tests.unit.compute import base as cbase
from tests.unit.numa import hosts


class MoveClaimTest(base.TestCase):

    def _claim(self, agent, inst, migration=None):
        migration = migration or cbase.migration(inst)
        return claims.move_claim(agent.tracker, agent.conductor_api, None,
                                 inst, migration, None), migration

    def test_claim_avoids_pins_of_guests_already_here(self):
        here = cbase.instance(host=cbase.HOST, pins={0: 0, 1: 8})
        agent = cbase.agent(instances=[here])
        # The source used the same pCPUs: a copy would overlap.
        inst = cbase.instance(pins={0: 0, 1: 8})
        claim, migration = self._claim(agent, inst)
        new_pins = set(claim.topology.cpu_pinning.values())
        self.assertEqual(2, len(new_pins))
        self.assertEqual(set(), new_pins & {0, 8})
        self.assertEqual({0, 8} | new_pins,
                         cbase.pinned(agent.tracker.usage_topology()))

    def test_claim_is_recorded_before_it_is_returned(self):
        agent = cbase.agent()
        inst = cbase.instance(pins={0: 2, 1: 10})
        seen = []
        agent.conductor_api.migration_context_set.side_effect = \
            lambda ctxt, context: seen.append(
                agent.tracker.get_claim(context.migration_uuid).persisted)
        claim, migration = self._claim(agent, inst)
        context = agent.conductor_api.migration_context_set.call_args[0][1]
        self.assertEqual([False], seen)
        self.assertTrue(claim.persisted)
        self.assertEqual((inst.uuid, migration.uuid, cbase.SOURCE,
                          cbase.HOST),
                         (context.instance_uuid, context.migration_uuid,
                          context.source_host, context.dest_host))
        self.assertEqual(inst.numa_topology, context.old_numa_topology)
        self.assertEqual(claim.topology, context.new_numa_topology)

    def test_no_fit_names_the_reason_and_claims_nothing(self):
        agent = cbase.agent(topology=cbase.host_topology(cells=1, cores=1,
                                                         threads=1))
        inst = cbase.instance(vcpus=4, pins={0: 0, 1: 1, 2: 2, 3: 3})
        exc = self.assertRaises(exception.MigrationPreCheckError,
                                self._claim, agent, inst)
        self.assertIn(f'on host {cbase.HOST}', str(exc))
        self.assertIn(inst.uuid, str(exc))
        self.assertEqual([], agent.tracker.claims())
        agent.conductor_api.migration_context_set.assert_not_called()

    def test_refused_record_drops_the_claim(self):
        agent = cbase.agent()
        agent.conductor_api.migration_context_set.side_effect = \
            exception.MigrationPreCheckError(reason='moved on')
        inst = cbase.instance(pins={0: 2, 1: 10})
        self.assertRaisesMessage(exception.MigrationPreCheckError,
                                 'moved on', self._claim, agent, inst)
        self.assertEqual([], agent.tracker.claims())
        self.assertEqual(set(), cbase.pinned(agent.tracker.usage_topology()))

    def test_unexpected_record_error_becomes_a_pre_check_error(self):
        agent = cbase.agent()
        agent.conductor_api.migration_context_set.side_effect = \
            RuntimeError('database gone')
        inst = cbase.instance(pins={0: 2, 1: 10})
        self.assertRaisesMessage(exception.MigrationPreCheckError,
                                 'database gone', self._claim, agent, inst)
        self.assertEqual([], agent.tracker.claims())

    def test_repeated_request_returns_the_claim_held(self):
        agent = cbase.agent()
        inst = cbase.instance(pins={0: 2, 1: 10})
        first, migration = self._claim(agent, inst)
        again, _ = self._claim(agent, inst, migration)
        self.assertIs(first, again)
        self.assertEqual(
            1, agent.conductor_api.migration_context_set.call_count)

    def test_repeat_handled_beside_the_first_claims_once(self):
        # Both requests looked before either claimed; the second gets the
        # lock once the first has claimed, and must not fit again.
        agent = cbase.agent()
        inst = cbase.instance(pins={0: 2, 1: 10})
        migration = cbase.migration(inst)
        first_look = threading.Event()
        release = threading.Event()
        real_get = agent.tracker.get_claim
        looks = []

        def get_claim(uuid):
            looks.append(uuid)
            if len(looks) == 1:
                first_look.set()
                release.wait(10)
                return None
            return real_get(uuid)
        agent.tracker.get_claim = get_claim
        answers = []
        slow = threading.Thread(target=lambda: answers.append(
            self._claim(agent, inst, migration)[0]))
        slow.start()
        self.assertTrue(first_look.wait(10))
        first, _ = self._claim(agent, inst, migration)
        release.set()
        slow.join(10)
        self.assertEqual([first], answers)
        self.assertEqual([first], agent.tracker.claims())
        self.assertEqual(set(first.topology.cpu_pinning.values()),
                         cbase.pinned(agent.tracker.usage_topology()))

    def test_guest_without_numa_characteristics_claims_nothing(self):
        agent = cbase.agent()
        inst = cbase.instance(extra_specs={})
        claim, _ = self._claim(agent, inst)
        self.assertIsNone(claim)
        agent.conductor_api.migration_context_set.assert_not_called()

    def _claim_large(self, source_pagesize):
        pools = hosts.hugepage_pools(16384, pages_2m=2048, pages_1g=4)
        agent = cbase.agent(topology=cbase.host_topology(
            memory_mb=16384, pages=pools))
        inst = cbase.instance(
            pins={0: 2, 1: 10}, pagesize=source_pagesize,
            extra_specs={'hw:cpu_policy': 'dedicated',
                         'hw:mem_page_size': 'large'})
        claim, _ = self._claim(agent, inst)
        return {c.pagesize for c in claim.topology.cells}

    def test_keeps_the_source_1g_page_size(self):
        self.assertEqual({1048576}, self._claim_large(1048576))

    def test_keeps_the_source_2m_page_size(self):
        self.assertEqual({2048}, self._claim_large(2048))

    def test_concurrent_claims_never_share_a_pcpu(self):
        agent = cbase.agent()
        guests = [cbase.instance(pins={0: 0, 1: 8}) for _ in range(8)]
        results, errors = [], []

        def claim(inst):
            try:
                results.append(self._claim(agent, inst)[0])
            except exception.MigrationPreCheckError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=claim, args=(g,))
                   for g in guests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pins = [p for c in results for p in c.topology.cpu_pinning.values()]
        self.assertEqual(len(pins), len(set(pins)))
        # 16 dedicated pCPUs, 2 per guest: all 8 fit.
        self.assertEqual((8, 0), (len(results), len(errors)))


class InstanceClaimTest(base.TestCase):

    def test_places_and_counts_a_new_guest(self):
        agent = cbase.agent()
        inst = cbase.instance(host=None)
        placed = claims.instance_claim(agent.tracker, inst, None)
        self.assertEqual(cbase.HOST, placed.host)
        self.assertIsNone(inst.host, "the input must not change")
        self.assertEqual(set(placed.numa_topology.cpu_pinning.values()),
                         cbase.pinned(agent.tracker.usage_topology()))

    def test_no_fit(self):
        agent = cbase.agent(topology=cbase.host_topology(cells=1, cores=1,
                                                         threads=1))
        self.assertRaises(exception.MigrationPreCheckError,
                          claims.instance_claim, agent.tracker,
                          cbase.instance(host=None, vcpus=3), None)
        self.assertEqual(set(), agent.tracker.instance_uuids())

    def test_alias_this_agent_lacks_names_the_agent_and_the_fix(self):
        # The conductor resolved 'vf' with its [pci] alias; this agent was
        # given none: the operator must learn where the gap is.
        agent = cbase.agent()
        inst = cbase.instance(host=None)
        inst.extra_specs = dict(inst.extra_specs,
                                **{'pci_passthrough:alias': 'vf:1'})
        exc = self.assertRaises(exception.InvalidNUMASpec,
                                claims.instance_claim, agent.tracker, inst,
                                None)
        self.assertIn(f"compute agent {cbase.HOST}: no [pci] alias is "
                      f"named 'vf' (configured: none); give every compute "
                      f"agent the conductor's [pci] alias", str(exc))
        self.assertEqual(set(), agent.tracker.instance_uuids())
