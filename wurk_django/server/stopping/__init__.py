"""Stopping a running job from outside its thread: time limits, revokes, and the exception
raised into the thread."""
