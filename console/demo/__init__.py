"""The demo workspace ``acme``, as plain data (no Django).

``memories`` holds the hand-written memories of the demo's actors and the habits that fill in
what a memory does not say; ``history`` lays out a week of the workspace's life (policy edits,
memory changes, recalls) in time order. ``manage.py load_demo`` plays them through the
services, so every event, injection and hit count is a real one.
"""
