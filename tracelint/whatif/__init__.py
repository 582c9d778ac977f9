"""What-if analysis: the run's dependency graph, its replay, edits and critical path.

Pure: imports only the timeline layer, numpy and pandas.
"""
