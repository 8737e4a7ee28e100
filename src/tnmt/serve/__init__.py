"""`tnmt serve`: translation over HTTP with batching across requests, LibreTranslate's API and a web page.

`app.py` is the FastAPI application (middleware, errors, metrics, probes, the page) that mounts the APIs:
`native.py` is tnmt's own under `/v1`, `libretranslate/` LibreTranslate's. Both reach the models through
`models.py` (the served models, the limits, the queue and the deadline); `batcher.py` queues sentences and
decodes them in shared batches; `static/` holds the page served at `/`.
"""
