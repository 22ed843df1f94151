"""Versioned notifications: what numamig tells an operator's tooling.

payloads: the versioned payload objects (a registry of their own: they
never travel in an RPC API's messages). notifier: the conductor's
emitter, which never makes the code that records a change wait for the
broker.
"""
