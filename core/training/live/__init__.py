"""Live training: a small transformer trained in a process of its own while a page of the server watches it.

spec.py says what a run trains and within which limits, worker.py is the training process, runs.py the runs a server
holds (ownership, how many at once, saved runs and their quotas). The first doc string of each says more.
"""
