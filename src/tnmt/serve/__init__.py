"""`tnmt serve`: translation over HTTP with batching across requests, LibreTranslate's API and a web page.

`batcher.py` queues sentences and decodes them in shared batches, `app.py` is the FastAPI application,
`markup.py` translates HTML sentence by sentence and carries its inline tags by word alignment
(`tag_transfer.py`), `detect.py` tells which served language a text is in, `static/` holds the page served at `/`.
"""
