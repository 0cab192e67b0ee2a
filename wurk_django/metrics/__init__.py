"""Execution metrics in Sidekiq 8's Redis layout (CORE-210..215).

``tracker`` records them on the worker side; ``query`` reads them for the
admin's metrics pages. This package module imports neither, so a worker never
pulls in the reader and the reader never pulls in the worker.
"""
