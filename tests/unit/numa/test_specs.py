"""Tests of numamig.numa.specs: which keys a new guest may carry."""

from numamig import exception
from numamig.numa import specs
from tests import base


class CheckKnownTest(base.TestCase):

    def assert_refused(self, fragment, extra_specs=None, image=None,
                       foreign=()):
        exc = self.assertRaises(exception.UnknownNUMASpec,
                                specs.check_known, extra_specs or {},
                                image or {}, foreign)
        self.assertIn(fragment, str(exc))
        return exc

    def test_typo_of_a_flavor_key_names_the_closest(self):
        self.assert_refused(
            "Unknown flavor key hw:cpu_polcy (did you mean hw:cpu_policy?)",
            {'hw:cpu_polcy': 'dedicated'})

    def test_typo_of_an_image_property_names_the_closest(self):
        self.assert_refused(
            "image property hw_mem_pagesize (did you mean "
            "hw_mem_page_size?)", image={'hw_mem_pagesize': 'large'})

    def test_no_close_key_gives_no_hint(self):
        exc = self.assert_refused("hw:watchdog_action",
                                  {'hw:watchdog_action': 'reset'})
        self.assertNotIn('did you mean', str(exc))
        self.assertIn('foreign_numa_specs', str(exc))

    def test_every_declared_key_passes(self):
        flavor = {s.flavor_key: 'x' for s in specs.SPECS
                  if not s.per_cell}
        image = {s.image_key: 'x' for s in specs.SPECS
                 if s.image_key and not s.per_cell}
        self.assertIsNone(specs.check_known(flavor, image))

    def test_per_cell_keys_only_where_declared(self):
        self.assertIsNone(specs.check_known(
            {'hw:numa_cpus.0': '0', 'hw:numa_mem.1': '512'},
            {'hw_numa_cpus.0': '0'}))
        self.assert_refused("hw:cpu_policy.0", {'hw:cpu_policy.0': 'x'})
        self.assert_refused("hw:numa_cpus", {'hw:numa_cpus': '0'})

    def test_other_namespaces_and_foreign_keys_pass(self):
        self.assertIsNone(specs.check_known(
            {'quota:cpu_shares': '10', 'trait:CUSTOM_X': 'required',
             'hw:watchdog_action': 'reset'}, {'os_distro': 'debian'},
            foreign=('hw:watchdog_action',)))

    def test_inputs_are_not_changed(self):
        flavor = {'hw:cpu_policy': 'dedicated'}
        specs.check_known(flavor, {})
        self.assertEqual({'hw:cpu_policy': 'dedicated'}, flavor)
