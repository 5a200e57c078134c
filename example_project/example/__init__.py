"""The example site's project package (settings, URLs, WSGI)."""
