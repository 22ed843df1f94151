"""libpq's client-side bounds on a silent PostgreSQL server, from the
``[database]`` options (numamig.conf.database), for both ways numamig
connects: numamig.db.api's engine and numamig.db.direct's reads.

A server that goes silent (its host lost power or its network, a
failover moved its address) resets nothing; a client then waits on it
for the kernel's limits: about 15 minutes with a statement sent and
unacknowledged, 2 hours waiting for an answer. libpq's keepalives bound
the second, ``tcp_user_timeout`` the first.
"""


def bounds(group):
    """{libpq parameter: value} of the ``[database]`` bounds in
    ``group``; empty where every one is off."""
    found = {}
    if group.keepalives_idle:
        found.update(keepalives=1, keepalives_idle=group.keepalives_idle,
                     keepalives_interval=group.keepalives_interval,
                     keepalives_count=group.keepalives_count)
    if group.tcp_user_timeout:
        found['tcp_user_timeout'] = group.tcp_user_timeout
    return found
