"""libpq's bounds on a silent PostgreSQL server (numamig.db.libpq): what
the [database] options give, and that both ways numamig connects pass
them to the driver, the URL's own values first."""

import sys
from unittest import mock

from numamig.conf import CONF
from numamig.db import api
from numamig.db import direct
from numamig.db import libpq
from tests import base

PG = 'postgresql+psycopg2://numamig@db.example:5432/numamig'


class BoundsTest(base.TestCase):

    def test_the_defaults_give_up_on_a_silent_server_within_30_s(self):
        found = libpq.bounds(CONF.database)
        self.assertEqual({'keepalives': 1, 'keepalives_idle': 10,
                          'keepalives_interval': 5, 'keepalives_count': 3,
                          'tcp_user_timeout': 30000}, found)
        # Keepalives: idle, then every probe unanswered.
        self.assertLessEqual(found['keepalives_idle'] +
                             found['keepalives_interval'] *
                             found['keepalives_count'], 30)

    def test_each_bound_turns_off_alone(self):
        self.flags(keepalives_idle=0, group='database')
        self.assertEqual({'tcp_user_timeout': 30000},
                         libpq.bounds(CONF.database))
        self.flags(tcp_user_timeout=0, group='database')
        self.assertEqual({}, libpq.bounds(CONF.database))


class EngineUrlTest(base.TestCase):

    def engine_query(self, url, bounds):
        db = api.Database(url, libpq_bounds=bounds)
        self.addCleanup(db.engine.dispose)
        return db, dict(db.engine.url.query)

    def test_postgresql_connects_with_the_bounds(self):
        db, query = self.engine_query(PG, {'keepalives_idle': 10,
                                           'tcp_user_timeout': 30000})
        self.assertEqual({'keepalives_idle': '10',
                          'tcp_user_timeout': '30000'}, query)
        # What messages show is the operator's URL, unchanged.
        self.assertEqual('postgresql+psycopg2://numamig@db.example:5432/'
                         'numamig', db.safe_url)

    def test_the_urls_own_value_wins(self):
        _db, query = self.engine_query(PG + '?tcp_user_timeout=5000',
                                       {'tcp_user_timeout': 30000,
                                        'keepalives': 1})
        self.assertEqual({'tcp_user_timeout': '5000', 'keepalives': '1'},
                         query)

    def test_other_databases_are_left_alone(self):
        path = self.useFixture(base.fixtures.TempDir()).path
        _db, query = self.engine_query(f'sqlite:///{path}/x.sqlite',
                                       {'tcp_user_timeout': 30000})
        self.assertEqual({}, query)

    def test_from_config_reads_the_options(self):
        self.flags(connection=PG, tcp_user_timeout=1234,
                   keepalives_idle=0, group='database')
        db = api.Database.from_config(CONF)
        self.addCleanup(db.engine.dispose)
        self.assertEqual({'tcp_user_timeout': '1234'},
                         dict(db.engine.url.query))


class DirectTest(base.TestCase):

    def connect(self, url, bounds):
        fake = mock.Mock()
        fake.OperationalError = type('OperationalError', (Exception,), {})
        fake.connect.side_effect = RuntimeError('stop here')
        with mock.patch.dict(sys.modules, {'psycopg2': fake}):
            self.assertRaises(RuntimeError, direct.connect, url, bounds)
        return fake.connect.call_args.kwargs

    def test_direct_reads_connect_with_the_bounds(self):
        kwargs = self.connect(PG, {'keepalives': 1, 'keepalives_idle': 10})
        self.assertEqual((1, 10, 'db.example'),
                         (kwargs['keepalives'], kwargs['keepalives_idle'],
                          kwargs['host']))

    def test_the_urls_own_values_win_and_are_served(self):
        kwargs = self.connect(
            PG + '?tcp_user_timeout=5000&target_session_attrs=read-write'
                 '&keepalives_count=9',
            {'tcp_user_timeout': 30000})
        self.assertEqual(('5000', 'read-write', '9'),
                         (kwargs['tcp_user_timeout'],
                          kwargs['target_session_attrs'],
                          kwargs['keepalives_count']))
