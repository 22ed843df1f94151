"""Wire fuzz: every RPC method of the conductor and of an agent, called
over RabbitMQ with mutated arguments (issue 15 item 7, issue 14 item 4).

A raw oslo.messaging client (no numamig serializer, so nothing is checked
on the way out) sends each declared method of the conductor's APIs (the
operations, records and release 1's APIs, each in its namespace) and of
ComputeManager arguments drawn by hypothesis: every declared argument
either a fitting value or a misfit (wrong type, huge number, long text,
deep structure, a dict where an object belongs, a forged object
primitive of another class, version or unknown name), now and then one
argument missing or one too many. Each answer must be a result or a
numamig error that crossed the wire; any other error type (a crash of
the endpoint) fails. Afterwards the rows of every table are as before
and the services still answer.

Always on: NUMAMIG_WIRE_FUZZ_EXAMPLES (default 12) examples per method;
an opt-in deeper run sets it higher (README).
"""

import collections
import os

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import oslo_messaging as messaging

from numamig import context as nm_context
from numamig import embedded
from numamig import exception
from numamig.compute import manager as compute_manager
from numamig.conductor import api_versions
from numamig.conductor import endpoints
from numamig.conductor import manager as conductor_manager
from numamig.conductor import records_manager
from tests import base
from tests.fixtures import deployment
from tests.functional import test_manage_refusals

EXAMPLES = int(os.environ.get('NUMAMIG_WIRE_FUZZ_EXAMPLES', '12'))
NUMAMIG_ERRORS = {name for name, value in vars(exception).items()
                  if isinstance(value, type) and
                  issubclass(value, exception.NumamigException)}
# Methods whose fitting arguments could change something real: they get
# misfits only (a fitting call is what the other tests exercise).
MISFITS_ONLY = {'instance_create', 'instance_adopt', 'adopt_guests',
                'build_instance', 'heal_claims', 'report_compute_node',
                'migration_context_set', 'instance_set_placement',
                'instance_update', 'delete_instance', 'live_migration',
                'accept_emulated_migration'}
UUIDS = st.uuids().map(str)

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
    st.floats(allow_nan=False), st.text(max_size=40),
    st.text(min_size=300, max_size=600), st.just('x' * 70000))
MISFITS = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
        st.fixed_dictionaries({
            'numamig_object.name': st.sampled_from(
                ['Instance', 'Migration', 'NoSuchObject', 'LiveMigrateData',
                 'ComputeNodeReport']),
            'numamig_object.namespace': st.sampled_from(['numamig', 'x']),
            'numamig_object.version': st.sampled_from(['1.0', '9.9', 'x']),
            'numamig_object.data': st.dictionaries(
                st.text(max_size=8), children, max_size=3)})),
    max_leaves=12)


def fitting(kind):
    """A value the declared kind accepts, where one is easy to draw."""
    what = kind.what
    if what.startswith('a UUID'):
        return UUIDS
    if what.startswith('a host name'):
        return st.text('abcdefgh-', min_size=1, max_size=12)
    if what.startswith('true or false'):
        return st.booleans()
    if what.startswith('an integer'):
        return st.integers(0, 100)
    if what.startswith('a number'):
        return st.floats(0, 0.05)
    if what.startswith('one of'):
        return st.sampled_from(['accepted', 'running', 'error'])
    return MISFITS


def calls(methods, misfits_only=()):
    """(method, kwargs) with declared arguments fitting or not, and now
    and then one missing or one extra."""
    @st.composite
    def one_call(draw):
        name = draw(st.sampled_from(sorted(methods)))
        kinds = methods[name]
        kwargs = {}
        for arg, kind in kinds.items():
            misfit = name in misfits_only or draw(st.booleans())
            kwargs[arg] = draw(MISFITS if misfit else fitting(kind))
        change = draw(st.sampled_from(['none', 'none', 'drop',
                                            'extra']))
        if change == 'drop' and kwargs:
            kwargs.pop(draw(st.sampled_from(sorted(kwargs))))
        elif change == 'extra':
            kwargs[draw(st.text('abcxyz_', min_size=1,
                                     max_size=10))] = 1
        return name, kwargs
    return one_call()


def declared(manager_cls, only=None):
    """The methods ``manager_cls`` declares (of ``only``, if given)."""
    return {name: member.wire_args for klass in manager_cls.__mro__
            for name, member in vars(klass).items()
            if hasattr(member, 'wire_args') and
            (only is None or name in only)}


class WireFuzzTest(base.TestCase):

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(deployment.DeploymentFixture(
            'rabbit', [embedded.HostDefinition('host-a',
                                               'numa-2cell-a.xml')],
            call_timeout=10))
        self.dep = fixture.deployment
        self.transport = fixture.rpc.transport
        self.ctxt = nm_context.get_admin_context()
        self.outcomes = collections.Counter()

    def client(self, topic, server=None, api=None):
        """A raw client of ``api`` (an api_versions.API; None: the
        compute API), at its version."""
        target = messaging.Target(
            topic=topic, server=server, exchange=self.dep.names.exchange,
            namespace=api and api.namespace,
            version=api.version if api else '1.0')
        return messaging.get_rpc_client(self.transport, target, timeout=10)

    def send(self, client, method, kwargs):
        """Call; return 'ok' or the numamig error's name; fail on any
        other error."""
        try:
            client.call(self.ctxt.to_dict(), method, **kwargs)
            return 'ok'
        except messaging.RemoteError as exc:
            self.assertIn(exc.exc_type, NUMAMIG_ERRORS | {
                'UnsupportedVersion', 'NoSuchMethod'},
                f"{method}({kwargs!r:.300}) crashed: {exc.value:.300}")
            return exc.exc_type
        except exception.NumamigException as exc:
            return type(exc).__name__
        except messaging.MessagingTimeout:
            self.fail(f"{method}({kwargs!r:.300}) got no answer")

    def fuzz(self, client, methods):
        @settings(max_examples=EXAMPLES * len(methods), deadline=None,
                  derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(calls(methods, MISFITS_ONLY))
        def one(call):
            method, kwargs = call
            self.outcomes[(method, self.send(client, method, kwargs))] += 1
        one()

    def test_every_method_refuses_misfits_and_nothing_changes(self):
        before = test_manage_refusals.row_counts(self.dep.db_url)
        topic = self.dep.names.conductor_topic
        conductor = self.client(topic, api=api_versions.OPERATIONS)
        agent = self.client(self.dep.names.compute_topic, server='host-a')
        # Each conductor API in its namespace, and release 1's API.
        self.fuzz(conductor, declared(conductor_manager.ConductorManager))
        self.fuzz(self.client(self.dep.names.conductor_agent_topic,
                              api=api_versions.RECORDS),
                  declared(records_manager.RecordManager))
        self.fuzz(self.client(topic, api=api_versions.RELEASE_1_API),
                  {**declared(records_manager.RecordManager,
                              endpoints.RELEASE_1_RECORDS),
                   **declared(conductor_manager.ConductorManager,
                              endpoints.RELEASE_1_OPERATIONS)})
        self.fuzz(agent, declared(compute_manager.ComputeManager))
        self.assertEqual(before,
                         test_manage_refusals.row_counts(self.dep.db_url),
                         "a fuzzed call changed the records")
        self.assertEqual({'service_version': 2},
                         self.client(topic, api=api_versions.RELEASE_1_API)
                         .prepare(version='1.0').call(self.ctxt.to_dict(),
                                                      'ping'))
        self.assertEqual([], agent.prepare(version='1.0').call(
            self.ctxt.to_dict(), 'list_domains'))
        refused = sum(n for (_m, outcome), n in self.outcomes.items()
                      if outcome != 'ok')
        print(f"wire fuzz: {sum(self.outcomes.values())} calls over "
              f"{len({m for m, _ in self.outcomes})} methods, {refused} "
              f"refused with numamig errors, 0 crashes")
