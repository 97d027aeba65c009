"""`imgpipe ui` and `imgpipe report`: a read-only local web app over ML Metadata and the artifacts
(runs, a run's data, training, evaluation and mistakes, a model's lineage), and the run page as
one self-contained HTML file.

views.py computes what each page shows from pipeline/lineage's answers and the artifacts'
files; app.py serves it with Flask and the Jinja templates beside it; report.py writes the run
page with its images embedded. No script or style comes from the network.
"""
