"""The test project as an ASGI application (``uvicorn tests.asgi:application``)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

from django.core.asgi import get_asgi_application

application = get_asgi_application()
