# app.py
import os

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from mrtr.examples.server import server   # or your own Server
from mrtr.http import asgi_app

app = asgi_app(server, allowed_origins=["https://app.example.com"])

if __name__ == "__main__":
    config = Config()
    config.bind = [f"127.0.0.1:{os.environ.get('PORT', '8000')}"]
    trio.run(serve, app, config)
