"""Lexicographically first perfect matching of guest cells to host cells.

Each guest cell lists the host cells it fits, in the caller's preference
order (positions 0, 1, ... of the strategy's host order). The answer gives
guest cell 0 the most preferred host cell that still leaves a perfect
matching for the rest, then guest cell 1, and so on: the same result as
trying host-cell permutations in order, in O(k^2 * E) instead of O(n!).
"""


class _Matcher:
    def __init__(self, adjacency, hosts):
        self.adjacency = adjacency
        self.host_of = [None] * len(adjacency)
        self.guest_on = [None] * hosts

    def augment(self, guest, banned, visited):
        """Kuhn's step: find ``guest`` a host, moving others (DFS).

        Changes the matching only when it succeeds.
        """
        for host in self.adjacency[guest]:
            if host in banned or host in visited:
                continue
            visited.add(host)
            holder = self.guest_on[host]
            if holder is None or self.augment(holder, banned, visited):
                self.host_of[guest] = host
                self.guest_on[host] = guest
                return True
        return False

    def move(self, guest, host, fixed):
        """Give ``guest`` the host if the unfixed rest can still match."""
        old = self.host_of[guest]
        displaced = self.guest_on[host]
        self.guest_on[old] = None
        self.host_of[guest] = host
        self.guest_on[host] = guest
        if displaced is None:
            return True
        self.host_of[displaced] = None
        if self.augment(displaced, fixed | {host}, set()):
            return True
        self.host_of[displaced] = host
        self.guest_on[host] = displaced
        self.host_of[guest] = old
        self.guest_on[old] = guest
        return False


def first_perfect_matching(adjacency, hosts):
    """Return (host per guest, None) or (None, (guests, their hosts)).

    :param adjacency: per guest, the hosts it may use, preferred first.
    :param hosts: the number of hosts (positions 0..hosts-1).
    :returns: on failure, a set of guests and the smaller set of hosts
        they can use between them (Hall's condition fails for them).
    """
    matcher = _Matcher(adjacency, hosts)
    for guest in range(len(adjacency)):
        visited = set()
        if not matcher.augment(guest, frozenset(), visited):
            return None, _hall_violation(matcher, guest)
    fixed = set()
    for guest, preferred in enumerate(adjacency):
        for host in preferred:
            if host in fixed:
                continue
            if matcher.host_of[guest] == host or \
                    matcher.move(guest, host, fixed):
                break
        fixed.add(matcher.host_of[guest])
    return list(matcher.host_of), None


def _hall_violation(matcher, guest):
    """Return the guests reachable from unmatched ``guest`` and hosts.

    Every host they reach is taken by another of them, so they are more
    guests than hosts.
    """
    guests, hosts = {guest}, set()
    stack = [guest]
    while stack:
        for host in matcher.adjacency[stack.pop()]:
            if host in hosts:
                continue
            hosts.add(host)
            holder = matcher.guest_on[host]
            if holder is not None and holder not in guests:
                guests.add(holder)
                stack.append(holder)
    return guests, hosts
