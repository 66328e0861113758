"""Compaction of chat sessions (seed 000, issue 34): the monitor's state kept per session, runs
that summarise a session's oldest turns into ``summary`` memories, and their summarizers.

Empty on purpose: the settings import ``chat.compaction.service_config``.
"""
