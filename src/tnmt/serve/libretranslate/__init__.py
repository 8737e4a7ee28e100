"""LibreTranslate's API, so that its clients and its web page work against `tnmt serve` unchanged.

`api.py` is the router (`/translate`, `/detect`, `/languages`, `/frontend/settings`), `translate.py` routes each
text to its model (detected for `source: "auto"`) and answers in LibreTranslate's shape, `markup.py` translates
HTML sentence by sentence and carries its inline tags by word alignment (`tag_transfer.py`), `detect.py` tells
which language a text is in (served or not, with a calibrated confidence).
"""
