"""The newest API manifests carry every object's current version.

An object bumped without a manifest that names the new version is sent
backported by every client capped at the newest API version, and its new
field is lost on the way (issue 17 measured it for the uncapped compute
client). This test walks every registered numamig object: the newest
manifest of each RPC API must carry its current version, and what an
uncapped client sends must be exactly that manifest. The only
exceptions are ALLOWED, each with its reason; each rpcapi module's
HELD_BACK must name exactly them.
"""

import testscenarios

from numamig import rpc
from numamig.compute import rpcapi as compute_rpcapi
from numamig.conductor import rpcapi as conductor_rpcapi
from tests import base
from tests.unit.objects import test_objects

load_tests = testscenarios.load_tests_apply_scenarios

# (API, object) -> why its newest manifest holds it older than current.
ALLOWED = {
    ('compute', 'Migration'):
        "Migration 1.1 (release 2: the run's result, the admission "
        "queue and the rest) is read only by the conductor's records; "
        "agents of release 1 refuse anything above 1.0.",
    ('compute', 'ComputeNodeReport'):
        "reports go from agents to the conductor (its records API); "
        "no compute message carries one to an agent.",
    ('compute', 'MigrationStatusChange'):
        "MigrationStatusChange 1.1 (status postcopy-paused) travels only "
        "inside Migration 1.1, which agents read from the conductor's "
        "answers (its records API); compute messages carry Migration "
        "1.0.",
}


class NewestManifestTest(base.TestCase):

    scenarios = [
        ('compute', {'api': 'compute', 'module': compute_rpcapi,
                     'newest': compute_rpcapi.ComputeAPI.VERSION}),
        ('conductor', {'api': 'conductor', 'module': conductor_rpcapi,
                       'newest': conductor_rpcapi.ConductorAPI.VERSION}),
    ]

    def test_newest_version_is_declared(self):
        self.assertIn(self.newest, self.module.OBJECT_VERSIONS)

    def test_every_object_in_its_current_version(self):
        manifest = self.module.OBJECT_VERSIONS[self.newest]
        for name, classes in sorted(test_objects.numamig_classes().items()):
            if (self.api, name) in ALLOWED:
                continue
            self.assertEqual(
                classes[0].VERSION, manifest.get(name),
                f"{name} {classes[0].VERSION} is not in the newest "
                f"{self.api} API manifest ({self.newest}): add an API "
                f"version whose manifest carries it (see numamig/rpc.py)")

    def test_exceptions_are_the_allowed_ones(self):
        allowed = {name for api, name in ALLOWED if api == self.api}
        self.assertEqual(allowed, set(self.module.HELD_BACK))

    def test_uncapped_client_sends_the_newest_manifest(self):
        self.assertEqual(self.module.OBJECT_VERSIONS[self.newest],
                         rpc.newest_versions(self.module.HELD_BACK))

    def test_manifests_never_go_back(self):
        # A receiver of a newer API version reads at least what an older
        # one does.
        as_tuple = rpc._version_tuple
        versions = sorted(self.module.OBJECT_VERSIONS, key=as_tuple)
        for older, newer in zip(versions, versions[1:], strict=False):
            for name, version in self.module.OBJECT_VERSIONS[older].items():
                self.assertGreaterEqual(
                    as_tuple(self.module.OBJECT_VERSIONS[newer][name]),
                    as_tuple(version), f"{name}: {older} -> {newer}")
