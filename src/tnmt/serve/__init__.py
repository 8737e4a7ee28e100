"""`tnmt serve`: translation over HTTP with batching across requests, LibreTranslate's API and a web page.

`batcher.py` queues sentences and decodes them in shared batches, `app.py` is the FastAPI application,
`html_text.py` translates HTML text nodes, `static/` holds the page served at `/`.
"""
